"""Webhook HTTP clients side by side: deliveries per CPU second of the sending process.

Three wires behind the same ``HttpWebhookClient`` (SSRF guard, 10 s timeout per attempt,
no redirects, answers read up to 64 KiB, the same headers and body), measured in one run:

- ``http11``: the hand-written HTTP/1.1 client on asyncio streams (``outbound/http11.py``);
- ``httpx``: an ``httpx.AsyncClient`` whose connection pool dials through a network backend
  that connects only to the addresses the guard checked for the request;
- ``aiohttp``: an ``aiohttp.ClientSession`` whose connector asks an ``AbstractResolver`` that
  answers only the addresses the guard checked for the request.

Each sends ``--events`` POSTs spread evenly over ``--endpoints`` hosts (each a loopback address
of its own, 127.0.0.2 and up, named ``endpoint-<i>.test``), ``--concurrency`` in flight and at
most ``--per-host`` to one host (the worker's defaults, 200 and 20), keeping connections
alive, after a warm-up that opens them. The receiver (``bench/receiver.py``) runs in its own
process and answers 204; only this process's CPU time (``time.process_time()``) counts.
Rounds are interleaved (the order rotates) so that load from others on the machine hits every
client alike; a line gives the best round and every round's value, and the ratio of the best
rounds to the baseline, the hand-written client. One run on the 2-core development machine::

    webhook_clients client=http11 n=5000 endpoints=100 concurrency=200 per_host=20
        resolver=table deliveries_per_cpu_s=11164 (runs 8130/10661/11164)
        deliveries_per_s=11162 ratio=1.00
    webhook_clients client=httpx ... deliveries_per_cpu_s=710 (runs 635/646/710) ... ratio=0.06
    webhook_clients client=aiohttp ... deliveries_per_cpu_s=4313 (runs 3838/3991/4313) ...
        ratio=0.39
    webhook_clients decision best_library=aiohttp hand_written_over_best=2.59 rule=1.50
        keep_hand_written=yes

The decision rule (kept from the task that added this bench): keep the hand-written client
only if it delivers at least 1.5 times as much per CPU second as the best library.

Names resolve through an in-process table by default, the same for every client, so the
figures compare the HTTP work; ``--system-resolver`` uses IP-literal URLs and the service's
own resolver (``getaddrinfo`` in a thread, as in production) instead. The targets are
loopback addresses, so the guard runs with the development setting that allows them: it
resolves and pins, but its per-address refusal check (a few microseconds, the same code for
every client) does not run.

    .venv/bin/python bench/webhook_clients.py [--events 5000] [--endpoints 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import socket
import ssl
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpcore
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult

from invoicing.chain.anvil import free_port
from invoicing.notifications.client import Delivery, HttpWebhookClient, Wire
from invoicing.outbound.guard import Resolver, Target, TargetRefused
from invoicing.outbound.http11 import MAX_ANSWER_BYTES
from invoicing.outbound.resolver import SystemResolver

sys.path.insert(0, str(Path(__file__).parent))
from webhooks import address_of, receiver_process  # noqa: E402

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

RULE = 1.5
BODY = (
    b'{"invoiceId":"1","chainId":31337,"paymentAddress":"0x5FbDB2315678afecb367f032d93F642f64'
    b'180aa3","tokenAddress":"0x0000000000000000000000000000000000000000","amount":"1.5",'
    b'"balance":1.5,"status":"paid","txHash":null,"metadata":{"order":"A-1"}}'
)
# The request for the current delivery, as checked by the guard (read by the connect hooks).
CHECKED: ContextVar[Target] = ContextVar("checked")


async def within_limit(chunks: AsyncIterator[bytes]) -> bool:
    """Read an answer's body up to ``MAX_ANSWER_BYTES``; False when it is longer."""
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > MAX_ANSWER_BYTES:
            return False
    return True


@contextlib.contextmanager
def pinned_to(target: Target, library_errors: type[Exception]) -> Iterator[None]:
    """Within it, connects go to ``target``'s checked addresses, and the library's errors
    become ``ConnectionError`` (which the client records as a failed attempt)."""
    token = CHECKED.set(target)
    try:
        yield
    except library_errors as exc:
        raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        CHECKED.reset(token)


def checked_addresses(host: str) -> tuple[str, ...]:
    target = CHECKED.get(None)
    if target is None:
        raise TargetRefused(f"{host} was not checked by the guard")
    return target.addresses


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, dialling the checked addresses in turn (not what DNS says)."""

    def __init__(self) -> None:
        self.backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception = httpcore.ConnectError(f"{host}: no address")
        for address in checked_addresses(host):
            try:
                return await self.backend.connect_tcp(address, port, timeout=timeout)
            except httpcore.ConnectError as exc:
                failure = exc
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


class HttpxWire:
    """One ``httpx.AsyncClient`` per origin: httpcore's pool scans all of its connections for
    every request it queues, which costs far more with connections to a hundred hosts in one
    pool (about 80 deliveries per CPU second here) than a client per origin does."""

    def __init__(self) -> None:
        self.clients: dict[tuple[str, str, int], httpx.AsyncClient] = {}
        self.tls = ssl.create_default_context()  # 65 ms each: one for all the clients

    def _client(self, target: Target) -> httpx.AsyncClient:
        origin = (target.scheme, target.host, target.port)
        client = self.clients.get(origin)
        if client is None:
            transport = httpx.AsyncHTTPTransport(verify=self.tls, trust_env=False)
            # httpx takes no network backend; its transport is a thin shell around this pool.
            transport._pool = httpcore.AsyncConnectionPool(
                ssl_context=self.tls,
                max_connections=None,
                max_keepalive_connections=None,
                keepalive_expiry=None,
                network_backend=PinnedBackend(),
            )
            client = self.clients[origin] = httpx.AsyncClient(
                transport=transport,
                follow_redirects=False,
                timeout=None,
                trust_env=False,
            )
        return client

    async def post(
        self, target: Target, headers: dict[str, str], body: bytes, owner: str = ""
    ) -> int:
        client = self._client(target)
        with pinned_to(target, httpx.TransportError):
            request = client.build_request("POST", target.url, content=body, headers=headers)
            response = await client.send(request, stream=True)
            try:
                await within_limit(response.aiter_raw())  # an unread rest drops the connection
            finally:
                await response.aclose()
            return response.status_code

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()


class PinnedResolver(AbstractResolver):
    """aiohttp's resolver hook: answers the checked addresses, in order."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in checked_addresses(host)
        ]

    async def close(self) -> None:
        return None


class AiohttpWire:
    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            connector = aiohttp.TCPConnector(
                resolver=PinnedResolver(),
                use_dns_cache=False,
                limit=0,
                keepalive_timeout=None,
                happy_eyeballs_delay=None,
            )
            self.session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(),
                auto_decompress=False,
            )
        return self.session

    async def post(
        self, target: Target, headers: dict[str, str], body: bytes, owner: str = ""
    ) -> int:
        with pinned_to(target, aiohttp.ClientError):
            async with self._session().post(
                target.url, data=body, headers=headers, allow_redirects=False
            ) as response:
                if not await within_limit(response.content.iter_any()):
                    response.close()  # drops the connection instead of reading the rest
                return response.status

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()


WIRES: dict[str, Callable[[], Wire | None]] = {
    "http11": lambda: None,  # the client's own default wire
    "httpx": HttpxWire,
    "aiohttp": AiohttpWire,
}


@dataclass
class Round:
    deliveries: int
    cpu_s: float
    wall_s: float


def table_resolver(hosts: dict[str, str]) -> Resolver:
    async def resolve(host: str, port: int) -> list[str]:
        return [hosts[host]]

    return resolve


def deliveries(n: int, urls: list[str]) -> list[tuple[Delivery, str]]:
    """``n`` deliveries spread evenly over ``urls``, each with the host it goes to."""
    out = []
    for i in range(n):
        url = urls[i % len(urls)]
        headers = {
            "content-type": "application/json",
            "x-service-api-key": "sk_" + "a" * 40,
            "x-service-event-id": f"00000000-0000-4000-8000-{i:012d}",
            "x-service-delivery-attempt": "1",
        }
        out.append((Delivery(url, BODY, headers), url.split("/")[2]))
    return out


async def deliver(
    client: HttpWebhookClient, work: list[tuple[Delivery, str]], concurrency: int, per_host: int
) -> int:
    """Send ``work`` with ``concurrency`` in flight, at most ``per_host`` to one host."""
    host_slots: defaultdict[str, asyncio.Semaphore] = defaultdict(
        lambda: asyncio.Semaphore(per_host)
    )
    pending = iter(work)
    delivered = 0

    async def sender() -> None:
        nonlocal delivered
        for delivery, host in pending:
            async with host_slots[host]:
                outcome = await client.send(delivery)
            if not outcome.delivered:
                raise RuntimeError(f"{delivery.url}: {outcome}")
            delivered += 1

    await asyncio.gather(*(sender() for _ in range(concurrency)))
    return delivered


async def one_round(
    wire: Wire | None, resolver: Resolver, urls: list[str], args: argparse.Namespace
) -> Round:
    client = HttpWebhookClient(allow_private=True, resolver=resolver, wire=wire)
    try:
        warm_up = deliveries(args.concurrency * 2, urls)  # opens the connections
        await deliver(client, warm_up, args.concurrency, args.per_host)
        work = deliveries(args.events, urls)
        cpu, wall = time.process_time(), time.perf_counter()
        count = await deliver(client, work, args.concurrency, args.per_host)
        return Round(count, time.process_time() - cpu, time.perf_counter() - wall)
    finally:
        await client.aclose()


def targets(args: argparse.Namespace, port: int) -> tuple[list[str], Resolver]:
    addresses = [address_of(i) for i in range(args.endpoints)]
    if args.system_resolver:
        return [f"http://{a}:{port}/ok/{i}" for i, a in enumerate(addresses)], SystemResolver()
    names = {f"endpoint-{i}.test": a for i, a in enumerate(addresses)}
    urls = [f"http://{name}:{port}/ok/{i}" for i, name in enumerate(names)]
    return urls, table_resolver(names)


async def run(args: argparse.Namespace, port: int) -> None:
    urls, resolver = targets(args, port)
    names = list(WIRES)
    rounds: dict[str, list[Round]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in itertools.islice(itertools.cycle(names), r, r + len(names)):
            rounds[name].append(await one_round(WIRES[name](), resolver, urls, args))
    rates = {name: [x.deliveries / x.cpu_s for x in rs] for name, rs in rounds.items()}
    best = {name: max(values) for name, values in rates.items()}
    setting = (
        f"n={args.events} endpoints={args.endpoints} concurrency={args.concurrency} "
        f"per_host={args.per_host} resolver={'system' if args.system_resolver else 'table'}"
    )
    for name in names:
        walls = [x.deliveries / x.wall_s for x in rounds[name]]
        runs = "/".join(f"{v:.0f}" for v in sorted(rates[name]))
        print(
            f"webhook_clients client={name} {setting} deliveries_per_cpu_s={best[name]:.0f} "
            f"(runs {runs}) deliveries_per_s={max(walls):.0f} "
            f"ratio={best[name] / best['http11']:.2f}",
            flush=True,
        )
    library = max((n for n in names if n != "http11"), key=best.__getitem__)
    lead = best["http11"] / best[library]
    print(
        f"webhook_clients decision best_library={library} hand_written_over_best={lead:.2f} "
        f"rule={RULE:.2f} keep_hand_written={'yes' if lead >= RULE else 'no'}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--endpoints", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--per-host", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--system-resolver", action="store_true")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.events, args.endpoints, args.concurrency, args.per_host, args.rounds = 40, 2, 8, 4, 1
    port = free_port()
    with receiver_process(port, [address_of(i) for i in range(args.endpoints)]):
        asyncio.run(run(args, port))


if __name__ == "__main__":
    main()
