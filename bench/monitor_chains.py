"""Monitor passes of several chains in one worker process: does one chain's pass wait for
another's?

Seeds N pending invoices on each of K chains (chain ids 31337, 31338, ...) into one
PostgreSQL database (kept as ``bench_monitor_chains_<k>x<n>`` and reused; ``--smoke``: a
database of its own, dropped), each chain read from an in-process memory node of its own,
loads every chain's watched set, then runs rounds of block passes on every chain at once
(one task per chain, as the worker's loops run them, ``monitor.worker.run``): first with
every node answering at once, then with the first chain's node answering each ``eth_call``
``--slow-s`` late (a slow or far node).
Prints one line per round and chain::

    monitor_chains round=slow chain=31338 n=100000 pass_s=0.41 rpc_calls=8

A chain whose pass waited for the slow one would take ``--slow-s`` longer.

    .venv/bin/python bench/monitor_chains.py --chains 9 --invoices 100000
        --database-url postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import func, select
from starlette.requests import Request
from starlette.responses import Response

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import ChainGateway, EvmGateway
from invoicing.migrate import upgrade
from invoicing.monitor.check import confirmed_block
from invoicing.monitor.passes import run_block_pass
from invoicing.services import Services, build_services
from invoicing.settings import Settings
from invoicing.tables.invoices import Invoice

sys.path.insert(0, str(Path(__file__).parent))
from memory_node import MemoryNode  # noqa: E402
from monitor import SMOKE_HELP, fresh_database, load_shards, seed  # noqa: E402


class SlowNode(MemoryNode):
    """A memory node that answers each ``eth_call`` ``delay_s`` late."""

    delay_s = 0.0

    async def _endpoint(self, request: Request) -> Response:
        if self.delay_s and b"eth_call" in await request.body():
            await asyncio.sleep(self.delay_s)
        return await super()._endpoint(request)


async def seeded(services: Services, url: str, chain_id: int) -> int:
    async with services.db.sessions() as session:
        count = await session.scalar(
            select(func.count()).select_from(Invoice).where(Invoice.chain_id == chain_id)
        )
    return int(count or 0)


async def rounds(args: argparse.Namespace) -> None:
    kept = None if args.smoke else f"bench_monitor_chains_{args.chains}x{args.invoices}"
    url, drop = fresh_database(args.database_url, kept)
    try:
        await upgrade(url)
        await _rounds(args, url)
    finally:
        drop()


async def _rounds(args: argparse.Namespace, url: str) -> None:
    with AnvilProcess() as anvil:
        evm = EvmClient.connect(anvil.url)
        dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
        await evm.aclose()
        ids = [dev.chain_id + i for i in range(args.chains)]
        nodes = [SlowNode(chain_id, dev.factory) for chain_id in ids]
        for node in nodes:
            await node.__aenter__()
        try:
            chains = [
                ChainConfig(chain_id=i, name=f"c{i}", rpc_url=node.url, factory=dev.factory)
                for i, node in zip(ids, nodes, strict=True)
            ]
            services = build_services(
                Settings(
                    environment="development", database_url=url, chains=chains, run_workers=False
                )
            )
            for chain_id in ids:
                if await seeded(services, url, chain_id) != args.invoices:
                    await seed(
                        services, url, args.invoices, dataclasses.replace(dev, chain_id=chain_id)
                    )
            for chain_id in ids:
                started = time.perf_counter()
                await load_shards(services, chain_id)
                print(f"monitor_chains load chain={chain_id} s={time.perf_counter() - started:.2f}")
            gateways = services.chains.all()
            for name, delay in (("even", 0.0), ("slow", args.slow_s), ("even", 0.0)):
                nodes[0].delay_s = delay
                await one_round(name, services, gateways, args.invoices)
            await services.aclose()
        finally:
            for node in nodes:
                await node.__aexit__()


async def one_round(
    name: str, services: Services, gateways: Sequence[ChainGateway], n: int
) -> None:
    async def one(gateway: ChainGateway) -> str:
        assert isinstance(gateway, EvmGateway)
        block = await confirmed_block(gateway)
        calls = gateway.evm.rpc.calls
        started = time.perf_counter()
        await run_block_pass(services, gateway, block)
        seconds = time.perf_counter() - started
        return (
            f"monitor_chains round={name} chain={gateway.config.chain_id} n={n} "
            f"pass_s={seconds:.2f} rpc_calls={gateway.evm.rpc.calls - calls}"
        )

    started = time.perf_counter()
    lines = await asyncio.gather(*(one(gateway) for gateway in gateways))
    for line in lines:
        print(line, flush=True)
    print(f"monitor_chains round={name} all_s={time.perf_counter() - started:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=9)
    parser.add_argument("--invoices", type=int, default=100_000, help="per chain")
    parser.add_argument("--slow-s", type=float, default=5.0)
    parser.add_argument("--database-url", required=True, help="PostgreSQL server URL")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.chains, args.invoices, args.slow_s = 2, 100, 0.5
    asyncio.run(rounds(args))


if __name__ == "__main__":
    main()
