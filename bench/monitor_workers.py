"""Monitor workers sharing one chain: one block pass over N watched invoices by 1 and by 2
worker processes on one PostgreSQL database.

Reuses the database ``bench/monitor.py --keep`` kept for N (``bench_monitor_keep_<n>``),
seeding it first when it holds another number (``--smoke``: a database of its own,
dropped). Starts anvil for the dev contracts and one in-process memory node (in this
process) that every worker reads from. For each count of workers it starts that many
processes; each leases its share of the chain's 64 shards (``monitor.shards.ShardLeases``,
renewed until every worker holds its even share), loads its watched set, and then, at one
signal, all run a block pass over the shards they hold at the same block. Prints one line
per count::

    monitor_workers n=1000000 workers=2 pass_s=0.61 worker_pass_s=0.58,0.61
        worker_cpu_s=0.50,0.52 shards=32,32 checked=1000000 load_s=1.9,2.0

``pass_s`` is from the signal to the last worker's end of its pass: what "the chain's pass"
takes. The memory node's CPU is this process's, not the workers'.

    .venv/bin/python bench/monitor_workers.py --invoices 1000000 --workers 1,2
        --database-url postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.migrate import upgrade
from invoicing.monitor.changes import refresh, watched_of
from invoicing.monitor.check import confirmed_block
from invoicing.monitor.passes import run_block_pass
from invoicing.monitor.shards import ShardLeases
from invoicing.services import build_services
from invoicing.settings import Settings
from invoicing.tables.monitor import SHARDS

sys.path.insert(0, str(Path(__file__).parent))
from memory_node import MemoryNode  # noqa: E402
from monitor import SMOKE_HELP, fresh_database, reuse, seed  # noqa: E402


async def worker(url: str, chain: ChainConfig, workers: int, ready: Barrier, results: Any) -> None:
    services = build_services(
        Settings(environment="development", database_url=url, chains=[chain], run_workers=False)
    )
    gateway = services.chains.all()[0]
    leases = ShardLeases(services, chain.chain_id)
    share = SHARDS // workers
    # Renew until this worker holds its even share (the others hand theirs back).
    while len(await leases.renew()) != share:  # noqa: ASYNC110 (the others' renewals)
        await asyncio.sleep(0.3)
    ready.wait()  # every worker holds its share
    await leases.renew()
    shards = leases.held()
    loaded = time.perf_counter()
    watched = watched_of(services.db, chain.chain_id)
    async with watched.lock:
        await refresh(services.db, watched, shards, shards)
    load_s = time.perf_counter() - loaded
    block = await confirmed_block(gateway)
    ready.wait()  # start the passes together
    started, cpu = time.perf_counter(), time.process_time()
    passed = await run_block_pass(services, gateway, block, shards=shards)
    results.put(
        (
            started,
            time.perf_counter(),
            time.process_time() - cpu,
            len(shards),
            passed.checked,
            load_s,
        )
    )
    ready.wait()  # hold the leases until every worker has passed
    await leases.release()
    await services.aclose()


def run_worker(url: str, chain: ChainConfig, workers: int, ready: Barrier, results: Any) -> None:
    asyncio.run(worker(url, chain, workers, ready, results))


async def measure(url: str, chain: ChainConfig, workers: int) -> None:
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(workers)
    results = context.Queue()
    processes = [
        context.Process(target=run_worker, args=(url, chain, workers, ready, results))
        for _ in range(workers)
    ]
    for process in processes:
        process.start()
    got = []
    while len(got) < workers:  # the node answers in this process's loop meanwhile
        try:
            got.append(results.get_nowait())
        except Exception:  # noqa: BLE001 (queue.Empty)
            await asyncio.sleep(0.05)
    for process in processes:
        await asyncio.to_thread(process.join)
    pass_s = max(end for _, end, *_ in got) - min(start for start, *_ in got)
    print(
        f"monitor_workers n={sum(r[4] for r in got)} workers={workers} pass_s={pass_s:.2f} "
        f"worker_pass_s={','.join(f'{r[1] - r[0]:.2f}' for r in got)} "
        f"worker_cpu_s={','.join(f'{r[2]:.2f}' for r in got)} "
        f"shards={','.join(str(r[3]) for r in got)} checked={sum(r[4] for r in got)} "
        f"load_s={','.join(f'{r[5]:.1f}' for r in got)}",
        flush=True,
    )


async def run(args: argparse.Namespace) -> None:
    kept = None if args.smoke else f"bench_monitor_keep_{args.invoices}"
    url, drop = fresh_database(args.database_url, kept)
    try:
        await upgrade(url)
        with AnvilProcess() as anvil:
            evm = EvmClient.connect(anvil.url)
            dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
            await evm.aclose()
            async with MemoryNode(dev.chain_id, dev.factory) as memory:
                chain = ChainConfig(
                    chain_id=dev.chain_id, name="anvil", rpc_url=memory.url, factory=dev.factory
                )
                services = build_services(
                    Settings(
                        environment="development",
                        database_url=url,
                        chains=[chain],
                        run_workers=False,
                    )
                )
                if await reuse(services, args.invoices, dev) is None:
                    await seed(services, url, args.invoices, dev)
                await services.aclose()
                for workers in [int(w) for w in args.workers.split(",")]:
                    for _ in range(args.rounds):
                        await measure(url, chain, workers)
    finally:
        drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invoices", type=int, default=1_000_000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--database-url", required=True, help="PostgreSQL server URL")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.invoices, args.workers, args.rounds = 200, "1,2", 1
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
