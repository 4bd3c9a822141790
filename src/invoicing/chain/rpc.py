"""A small async JSON-RPC client for EVM nodes, over one or several URLs of one chain.

Failover: every request has a timeout; a timeout, a dropped connection, HTTP 429 (its
``Retry-After`` honoured up to a cap), 5xx or another non-JSON-RPC answer, and the JSON-RPC
errors that say the provider (not the call) failed (``chain.answers``) are retried, with
jittered backoff, on the next URL. A URL that failed ``failures_before_cooldown`` times in a
row is set aside for ``cooldown_s`` and then used again. At most ``max_attempts`` attempts per
request; then :class:`ChainUnavailable`. The call's own JSON-RPC error is raised at once
(``RpcError``, ``ContractRevert``: ``chain.answers``), never retried.

Every HTTP attempt of a client that knows its chain is counted in
``invoicing_rpc_requests_total`` (outcome ok, rpc_error, timeout, connect_error,
http_error, provider_error) and timed in ``invoicing_rpc_request_seconds``.

Heads are not taken on one URL's word (:meth:`JsonRpc.head`): with several URLs every URL is
asked, and the head believed and the head read at follow the rule of ``chain.heads``. A URL
behind the highest head whose head block is older than ``head_stale_s`` lags: it leaves the
quorum. A URL that reports more than is believed, or lacks the head read at, serves
requests only after the others.

A URL is a secret: no repr, log line, metric label or error shows one (``chain.urls``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from invoicing import metrics
from invoicing.chain.answers import batch_results, provider_refused, quantity, raise_for_error
from invoicing.chain.heads import HeadBelief, lead_for
from invoicing.chain.rpc_body import JSON_HEADERS, decode_answer, encode_request
from invoicing.chain.urls import redact_url
from invoicing.errors import ChainUnavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RpcPolicy:
    """Timeouts and failover of a :class:`JsonRpc` (``INVOICING_RPC_*`` settings)."""

    timeout_s: float = 10.0
    max_attempts: int = 4
    backoff_s: float = 0.25  # first retry after about this (jittered), doubled each retry
    backoff_max_s: float = 5.0
    retry_after_max_s: float = 30.0  # a longer Retry-After is cut to this
    failures_before_cooldown: int = 3
    cooldown_s: float = 60.0
    # A head no second URL reports is believed only this far ahead of the last head two URLs
    # reported (and at most half the chain's confirmations), plus this many blocks for every
    # second since (chain.heads).
    head_lead_max_blocks: int = 16
    head_max_blocks_per_s: float = 5.0
    # A URL behind the others whose head block is older than this lags: out of the quorum.
    head_stale_s: float = 60.0


class _Retry(Exception):
    """An attempt failed in a way another attempt (on another URL) may not."""

    def __init__(self, reason: str, wait_s: float | None = None, kind: str = "http_error") -> None:
        super().__init__(reason)
        self.wait_s = wait_s  # how long this URL asked us to stay away (Retry-After)
        self.kind = kind  # the outcome label of invoicing_rpc_requests_total


@dataclass
class _Endpoint:
    url: str = field(repr=False)  # a secret: see redact_url
    failures: int = 0  # in a row
    resting_until: float = 0.0  # monotonic time; set aside (used only if all are) until then
    retry_at: float = 0.0  # monotonic time; its Retry-After asked for no request before then
    head: int | None = None  # the block number it last reported
    ahead: bool = False  # it reported a head beyond the believed one
    lagging: bool = False  # left out of the quorum (see JsonRpc.head)
    head_time: tuple[int, int] = (-1, 0)  # (block number, its timestamp) as it reported


def _retry_after_s(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not worth parsing, the default backoff applies
        return None


class JsonRpc:
    """JSON-RPC over HTTP with failover between URLs, and a call counter (benchmarks report
    RPC calls per pass). ``url`` is the first (preferred) URL."""

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        timeout_s: float | None = None,
        policy: RpcPolicy | None = None,
        chain_id: int | None = None,
        confirmations: int = 1,
    ) -> None:
        urls = [urls] if isinstance(urls, str) else list(urls)
        # The chain the service's metrics count this client's requests under (None: a
        # command's own client, not counted).
        self.chain_id = chain_id
        if not urls:
            raise ValueError("no RPC URL")
        policy = policy or RpcPolicy()
        if timeout_s is not None:
            policy = replace(policy, timeout_s=timeout_s)
        self.policy = policy
        self.url = urls[0]
        self.calls = 0
        self._endpoints = [_Endpoint(url) for url in urls]
        self.best_head = 0  # the head reads happen at (see head)
        self.lead_blocks = lead_for(confirmations, policy.head_lead_max_blocks)
        self._belief = HeadBelief(self.lead_blocks, policy.head_max_blocks_per_s)
        self._ids = itertools.count(1)
        self._http = httpx.AsyncClient(timeout=policy.timeout_s)

    @property
    def urls(self) -> list[str]:
        return [endpoint.url for endpoint in self._endpoints]

    def url_name(self, index: int) -> str:
        """How lines and errors name the URL at ``index``: its position and redacted URL."""
        return f"RPC URL #{index + 1} ({redact_url(self._endpoints[index].url)})"

    async def aclose(self) -> None:
        await self._http.aclose()

    def _pick(self, tried: set[int]) -> tuple[int, float]:
        """The URL for the next attempt and how long to wait first: by preference one not set
        aside, not yet tried for this request, not waiting out a Retry-After, first listed."""
        now = time.monotonic()

        def rank(i: int) -> tuple[bool, bool, bool, float, int]:
            head = self._endpoints[i].head
            off_head = head is not None and not self.best_head <= head <= self._belief.believed
            return (
                self._endpoints[i].resting_until > now,
                i in tried,
                off_head,  # lacking the head read at, or reporting a head not believed
                max(self._endpoints[i].retry_at, now),
                i,
            )

        best = min(range(len(self._endpoints)), key=rank)
        return best, max(0.0, self._endpoints[best].retry_at - now)

    def _failed(self, endpoint: _Endpoint, failure: _Retry) -> None:
        endpoint.failures += 1
        now = time.monotonic()
        if failure.wait_s is not None:
            endpoint.retry_at = now + failure.wait_s
        if len(self._endpoints) == 1 or endpoint.failures < self.policy.failures_before_cooldown:
            return  # (a chain's only URL is never set aside: there is nothing else to use)
        endpoint.resting_until = now + self.policy.cooldown_s
        if endpoint.failures == self.policy.failures_before_cooldown:
            log.warning(
                "%s set aside for %.1f s after %d failures in a row (%s)",
                self.url_name(self._endpoints.index(endpoint)),
                self.policy.cooldown_s,
                endpoint.failures,
                failure,
            )

    async def _post(self, body: Any) -> Any:
        """The answer of the first attempt that succeeds (failover as the module says)."""
        tried: set[int] = set()
        last: _Retry | None = None
        for attempt in range(max(1, self.policy.max_attempts)):
            index, wait_s = self._pick(tried)
            if attempt:
                backoff = min(self.policy.backoff_max_s, self.policy.backoff_s * 2 ** (attempt - 1))
                wait_s = max(wait_s, backoff * random.uniform(0.5, 1.5))
            if wait_s:
                await asyncio.sleep(wait_s)
            endpoint = self._endpoints[index]
            tried.add(index)
            try:
                answer = await self._attempt(endpoint.url, body)
            except _Retry as failure:
                self._failed(endpoint, failure)
                last = failure
                continue
            endpoint.failures = 0
            endpoint.resting_until = endpoint.retry_at = 0.0
            return answer
        # The URL may carry a provider's API key: name it by position only.
        raise ChainUnavailable(
            f"RPC unreachable ({self.policy.max_attempts} attempts over "
            f"{len(self._endpoints)} URL(s)): {last}"
        )

    async def _attempt(self, url: str, body: Any) -> Any:
        self.calls += 1
        if self.chain_id is None:
            return await self._exchange(url, body)
        started = time.perf_counter()
        outcome = "ok"
        try:
            answer = await self._exchange(url, body)
            if isinstance(answer, dict) and "error" in answer:
                outcome = "rpc_error"
            return answer
        except _Retry as failure:
            outcome = failure.kind
            raise
        finally:
            method = body.get("method", "?") if isinstance(body, dict) else "batch"
            metrics.rpc_request(self.chain_id, method, outcome, time.perf_counter() - started)

    async def _exchange(self, url: str, body: Any) -> Any:
        content = encode_request(body)
        try:
            response = await self._http.post(url, content=content, headers=JSON_HEADERS)
        except httpx.TimeoutException as exc:
            raise _Retry(f"timed out ({type(exc).__name__})", kind="timeout") from exc
        # httpcore asks a connection's socket for its peer as it opens; a node that closes
        # the connection at once leaves no socket, and anyio raises AttributeError there
        # (seen when a node goes away mid-call): a failed connection like any other.
        except (httpx.HTTPError, AttributeError) as exc:
            raise _Retry(f"connection failed ({type(exc).__name__})", kind="connect_error") from exc
        if response.status_code == 429:
            cap = self.policy.retry_after_max_s
            asked = _retry_after_s(response.headers.get("retry-after"))
            raise _Retry("HTTP 429", None if asked is None else min(asked, cap))
        try:
            answer = decode_answer(response.content)
        except ValueError:
            raise _Retry(f"HTTP {response.status_code}, not JSON") from None
        items = answer if isinstance(answer, list) else [answer]
        if not all(isinstance(item, dict) for item in items) or not items:
            raise _Retry(f"HTTP {response.status_code}, not a JSON-RPC answer")
        if response.status_code >= 500 and not all("error" in item for item in items):
            raise _Retry(f"HTTP {response.status_code}")
        if any(provider_refused(item.get("error")) for item in items):
            raise _Retry(
                "the provider refused (rate limit or a block it lacks)", kind="provider_error"
            )
        if response.status_code >= 400 and not all(
            "error" in item or "result" in item for item in items
        ):
            raise _Retry(f"HTTP {response.status_code}")
        return answer

    async def head(self) -> int:
        """The head reads happen at: with one URL its ``eth_blockNumber``; with several, every
        URL is asked at once, those that lag are left out, and the rest move the belief of
        ``chain.heads``. It never goes below one given before. URLs set aside are asked too
        when the others answer nothing newer than a head seen before. When none answers, the
        request goes through the usual failover (or raises ChainUnavailable)."""
        if len(self._endpoints) == 1:
            head = await self._called_head()
            self.best_head = max(self.best_head, head)
            return head
        now = time.monotonic()
        live = [e for e in self._endpoints if e.resting_until <= now and e.retry_at <= now]
        answered = await self._heads(live)
        if not answered or max(e.head or 0 for e in answered) <= self.best_head:
            answered += await self._heads([e for e in self._endpoints if e not in live])
        if not answered:
            self._believe([await self._called_head()])
            return self.best_head
        self._believe(await self._quorum(answered))
        return self.best_head

    async def _called_head(self) -> int:
        try:
            return quantity(await self.call("eth_blockNumber"))
        except ValueError:
            raise ChainUnavailable("RPC sent a malformed block number") from None

    async def _quorum(self, answered: list[_Endpoint]) -> list[int]:
        """The heads of the URLs that do not lag, each lagging URL named once in a warning."""
        top = max(e.head or 0 for e in answered)
        lags = await asyncio.gather(*(self._lags(e, top) for e in answered))
        for endpoint, lagging in zip(answered, lags, strict=True):
            if lagging and not endpoint.lagging:
                log.warning(
                    "%s lags: head %d, %d behind another URL's, with a block older than %.0f s: "
                    "left out of the quorum until it catches up",
                    self.url_name(self._endpoints.index(endpoint)),
                    endpoint.head,
                    top - (endpoint.head or 0),
                    self.policy.head_stale_s,
                )
            endpoint.lagging = lagging
        return [e.head for e, lagging in zip(answered, lags, strict=True) if e.head and not lagging]

    async def _lags(self, endpoint: _Endpoint, top: int) -> bool:
        """Whether a URL is behind ``top`` with a head block older than ``head_stale_s`` (an
        honest URL under one that over-reports has a fresh head block; one that cannot show
        its own head block lags too). Its block is asked once per head it reports."""
        head = endpoint.head or 0
        if head >= top:
            return False
        if endpoint.head_time[0] != head:
            body = self._body("eth_getBlockByNumber", [hex(head), False])
            try:
                block = (await self._attempt(endpoint.url, body))["result"]
                endpoint.head_time = (head, quantity(block["timestamp"]))
            except (_Retry, KeyError, TypeError, ValueError):
                return True
        return time.time() - endpoint.head_time[1] > self.policy.head_stale_s

    def _believe(self, heads: list[int]) -> None:
        """Raise ``best_head`` to the read head among ``heads`` (``chain.heads``)."""
        self._belief = self._belief.after(heads, time.monotonic())
        self.best_head = max(self.best_head, self._belief.read_head)
        believed = self._belief.believed
        for number, endpoint in enumerate(self._endpoints, 1):
            ahead = endpoint.head is not None and endpoint.head > believed
            if ahead and not endpoint.ahead:
                log.warning(
                    "%s reports head %d, ahead of the believed %d that no other URL "
                    "or the chain's pace confirms: not believed",
                    self.url_name(number - 1),
                    endpoint.head,
                    believed,
                )
            endpoint.ahead = ahead

    async def _heads(self, endpoints: list[_Endpoint]) -> list[_Endpoint]:
        """Those of ``endpoints`` that answered their head (kept in ``head``)."""
        answered = await asyncio.gather(*(self._head_of(endpoint) for endpoint in endpoints))
        return [endpoint for endpoint, ok in zip(endpoints, answered, strict=True) if ok]

    async def _head_of(self, endpoint: _Endpoint) -> bool:
        try:
            answer = await self._attempt(endpoint.url, self._body("eth_blockNumber", []))
            head = quantity(answer["result"])
        except _Retry as failure:
            self._failed(endpoint, failure)
            return False
        except (KeyError, TypeError, ValueError):
            return False
        endpoint.head = head
        endpoint.failures = 0
        return True

    async def batch_each(
        self, requests: Sequence[tuple[str, list[Any]]], *, resting: bool = False
    ) -> list[list[Any] | None]:
        """Send the same JSON-RPC batch to every URL not set aside (with ``resting``, to every
        URL), all at once (no failover): for each URL in order its results (a JSON-RPC error
        as the RpcError in its place), or None when it did not answer or answered malformed.
        For answers that must not be taken on one URL's word."""
        now = time.monotonic()

        async def ask(endpoint: _Endpoint) -> list[Any] | None:
            if endpoint.resting_until > now and not resting:
                return None
            first, body = self._batch_body(requests)
            try:
                answers = await self._attempt(endpoint.url, body)
            except _Retry as failure:
                self._failed(endpoint, failure)
                return None
            endpoint.failures = 0
            try:
                return batch_results(first, len(requests), answers, return_errors=True)
            except ChainUnavailable:
                return None

        return list(await asyncio.gather(*(ask(endpoint) for endpoint in self._endpoints)))

    async def call(self, method: str, params: list[Any] | None = None) -> Any:
        """Send one request and return its ``result``."""
        answer = await self._post(self._body(method, params or []))
        if not isinstance(answer, dict):
            raise ChainUnavailable("RPC sent a malformed answer")
        if "error" in answer:
            raise_for_error(answer["error"])
        return answer.get("result")

    async def batch(
        self, requests: Sequence[tuple[str, list[Any]]], *, return_errors: bool = False
    ) -> list[Any]:
        """Send several requests in one HTTP round trip (one JSON-RPC batch); results come
        back in order. An item's JSON-RPC error is raised, or with ``return_errors`` put in
        its place as the RpcError."""
        if not requests:
            return []
        first, body = self._batch_body(requests)
        return batch_results(first, len(requests), await self._post(body), return_errors)

    def _body(self, method: str, params: list[Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def _batch_body(self, requests: Sequence[tuple[str, list[Any]]]) -> tuple[int, Any]:
        body = [self._body(method, params) for method, params in requests]  # ids in a row
        return body[0]["id"], body
