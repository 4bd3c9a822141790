"""Exponential backoff for settlement steps: a parked escrow's next try, and a step (one
chain, or one batch) that failed on an RPC error."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from eth_abi.exceptions import DecodingError

from invoicing.chain.answers import RpcError


def retry_delay_s(failures: int, base_s: float, max_s: float) -> float:
    """The wait after ``failures`` failures in a row: ``base_s``, doubled each time, capped."""
    if failures <= 0:
        return 0.0
    # Past 2**60 the cap has long been reached; the bound keeps the float finite.
    return min(max_s, base_s * float(2 ** min(failures - 1, 60)))


@dataclass
class _Failing:
    failures: int
    retry_at_ms: int


class Backoff:
    """Steps that failed in this process, by key, and when each may run again."""

    def __init__(self, base_s: float, max_s: float) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self._failing: dict[Hashable, _Failing] = {}

    def ready(self, key: Hashable, now_ms: int) -> bool:
        failing = self._failing.get(key)
        return failing is None or now_ms >= failing.retry_at_ms

    def failures(self, key: Hashable) -> int:
        failing = self._failing.get(key)
        return failing.failures if failing else 0

    def failed(self, key: Hashable, now_ms: int) -> float:
        """Record a failure of ``key``; returns the delay (seconds) before it runs again."""
        failures = self.failures(key) + 1
        delay_s = retry_delay_s(failures, self.base_s, self.max_s)
        self._failing[key] = _Failing(failures, now_ms + int(delay_s * 1000))
        return delay_s

    def hold(self, key: Hashable, retry_at_ms: int) -> None:
        """Keep ``key`` waiting until ``retry_at_ms`` (a wait someone else decided: a budget
        used up for the day), without counting a failure."""
        self._failing[key] = _Failing(self.failures(key), retry_at_ms)

    def succeeded(self, key: Hashable) -> None:
        self._failing.pop(key, None)


# The node answered, but not usefully for this request (a JSON-RPC error, an answer that
# does not decode): the request's step fails, the rest goes on. An unreachable node is
# ``ChainUnavailable`` and fails the whole step on its chain.
REQUEST_ERRORS: tuple[type[Exception], ...] = (RpcError, DecodingError)
