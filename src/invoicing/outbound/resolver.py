"""Webhook name lookups: the system resolver on threads of its own, and a cache.

``SystemResolver`` runs ``getaddrinfo`` on its own ``threads`` (8), never on the event
loop's default executor, which the RPC client's lookups and the SQLite writer share: a
name server that never answers holds only these threads. A lookup is waited for at most
``timeout_s`` (5 s); its thread cannot be stopped and stays busy until the system resolver
gives up, so it counts until then. When every thread is busy a lookup fails at once
(``ResolverBusy``): its delivery fails as a connection error and is retried later, rather
than waiting in a queue. Nothing else uses these threads.

``CachedResolver`` keeps a name's answer ``ttl_s`` seconds and a failed lookup (no such
name, no answer in time) ``failure_ttl_s`` seconds, so deliveries to a dead name do not
take a thread each; a busy resolver says nothing about the name and is not kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from invoicing.outbound.guard import Resolver

Lookup = Callable[[str, int], list[str]]  # blocking: runs on one of the resolver's threads


class ResolverBusy(ConnectionError):
    """Every lookup thread is busy: the delivery fails now and is retried later."""


def system_lookup(host: str, port: int) -> list[str]:
    """Every address the system resolver answers for ``host``, each once, in its order."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class SystemResolver:
    """A ``Resolver`` on ``threads`` threads of its own, ``timeout_s`` per lookup, failing
    fast when all are busy (module docstring). ``lookup`` is the blocking step tests swap."""

    def __init__(
        self, lookup: Lookup = system_lookup, threads: int = 8, timeout_s: float = 5.0
    ) -> None:
        self.lookup = lookup
        self.threads = threads
        self.timeout_s = timeout_s
        self.busy = 0  # lookups on a thread, including those whose waiter gave up
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="webhook-dns")

    async def __call__(self, host: str, port: int) -> list[str]:
        with contextlib.suppress(ValueError):  # an IP literal is its own answer, no thread
            return [str(ipaddress.ip_address(host))]
        if self.busy >= self.threads:
            raise ResolverBusy(f"all {self.threads} name lookup threads are busy")
        self.busy += 1
        loop = asyncio.get_running_loop()
        running = loop.run_in_executor(self._executor, self.lookup, host, port)
        running.add_done_callback(self._finished)  # when the thread is free, not the waiter
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(running)
        except TimeoutError:
            raise TimeoutError(f"no answer within {self.timeout_s:g} s") from None

    def _finished(self, running: asyncio.Future[list[str]]) -> None:
        self.busy -= 1
        if not running.cancelled():
            running.exception()  # retrieved: a lookup whose waiter gave up is not an error

    def close(self) -> None:
        """Stop taking lookups; threads still blocked end when their lookup does."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class CachedResolver:
    """A resolver whose answers are kept ``ttl_s`` seconds per (host, port), and failures
    ``failure_ttl_s`` seconds.

    The system resolver costs a thread hop per lookup, which halved the client's deliveries
    per CPU second (``client.py``); a burst to one endpoint now looks its name up once.
    Concurrent lookups of one name share one; at most ``max_names`` names are kept (the
    oldest answer goes first).

    Keeping an answer weakens nothing against DNS rebinding: the guard checks the kept
    answer at every delivery as it checks a fresh one, and the client connects only to the
    addresses it checked, so a name re-pointed meanwhile is looked up and checked again
    when its answer expires, before anything connects there."""

    def __init__(
        self,
        resolver: Resolver,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_names: int = 10_000,
        failure_ttl_s: float = 0.0,
    ) -> None:
        self.resolver = resolver
        self.ttl_s = ttl_s
        self.failure_ttl_s = failure_ttl_s
        self.clock = clock
        self.max_names = max_names
        self._answers: dict[tuple[str, int], tuple[float, list[str] | str]] = {}
        self._lookups: dict[tuple[str, int], asyncio.Future[list[str]]] = {}

    async def __call__(self, host: str, port: int) -> list[str]:
        key = (host, port)
        kept = self._answers.get(key)
        if kept is not None and self.clock() < kept[0]:
            if isinstance(kept[1], str):
                raise ConnectionError(f"{kept[1]} (a failed lookup, kept {self.failure_ttl_s:g} s)")
            return list(kept[1])
        lookup = self._lookups.get(key)
        if lookup is None:
            lookup = self._lookups[key] = asyncio.ensure_future(self._lookup(key))
            lookup.add_done_callback(lambda _: self._lookups.pop(key, None))
        return list(await asyncio.shield(lookup))

    async def _lookup(self, key: tuple[str, int]) -> list[str]:
        try:
            addresses = await self.resolver(*key)
        except ResolverBusy:
            raise
        except OSError as exc:
            self._keep(key, self.failure_ttl_s, f"{type(exc).__name__}: {exc}")
            raise
        self._keep(key, self.ttl_s, list(addresses))
        return addresses

    def _keep(self, key: tuple[str, int], ttl_s: float, answer: list[str] | str) -> None:
        self._answers.pop(key, None)
        if ttl_s <= 0:
            return
        while len(self._answers) >= self.max_names:
            del self._answers[next(iter(self._answers))]
        self._answers[key] = (self.clock() + ttl_s, answer)
