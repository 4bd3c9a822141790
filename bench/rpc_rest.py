"""RPC cost at rest: JSON-RPC calls per block and per hour with N watched invoices.

Starts anvil, deploys the dev contracts, seeds N pending invoices (none paid) into a fresh
database, switches anvil to a block every ``--block-time`` seconds and runs the monitor's
worker loop (``monitor.worker.watch_chain``, default settings) through a recording JSON-RPC
proxy (``tests/support/rpc_log.py``). Once the loop has seen a few blocks (``--warmup``) it
counts every call over ``--blocks`` blocks and extrapolates to an hour. The count starts and
ends half a block after a block, when the loop is idle, so every block's reads are counted
once. A call is a JSON-RPC method: the items of a batch count one each (providers bill each
method of a batch). Prints one line per mix of assets::

    rpc_rest invoices=10000 tokens=0.20 reader=deployed block_time_s=12 blocks=8 calls=16
        calls_per_block=2.00 calls_per_hour=600 naive_calls_per_hour=1800000
        by_method=eth_blockNumber:8,eth_call:8

Each mix runs twice on the same node, first as the baseline ``reader=absent`` (the
EscrowReader's code removed with ``anvil_setCode``: the service reads one ``balancesOf`` per
asset through the factory, as on a chain where the reader is not deployed), then with
``reader=deployed``.

``naive_calls_per_hour`` is one balance read per invoice every 20 s (the monitor's due-pass
interval), computed, not run. ``tokens`` is the share of TUSD invoices (one EscrowReader call
reads every asset). Exits 1 when a ``reader=deployed`` case is over 2 calls per block.

    .venv/bin/python bench/rpc_rest.py [--invoices 10000] [--block-time 12] [--blocks 8]
        [--warmup 6] [--database-url postgresql://postgres@127.0.0.1:5432/postgres]
        [--readers absent,deployed]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
from pathlib import Path

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import ESCROW_READER, load_artifact
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import DevDeployment, deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.chain.reader import reader_address
from invoicing.migrate import upgrade
from invoicing.monitor.worker import watch_chain
from invoicing.services import build_services
from invoicing.settings import Settings

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
from monitor import fresh_database, seed  # noqa: E402

from tests.support.rpc_log import recording_proxy  # noqa: E402

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

GOAL_CALLS_PER_BLOCK = 2.0
SPEC_INTERVAL_S = 20


async def wait_blocks(evm: EvmClient, count: int) -> None:
    """Until the head has moved ``count`` blocks from now."""
    start = head = await evm.block_number()
    while head < start + count:
        await asyncio.sleep(0.2)
        head = await evm.block_number()


async def measure(
    anvil: AnvilProcess,
    dev: DevDeployment,
    args: argparse.Namespace,
    token_every: int,
    reader: bool,
) -> bool:
    url, drop = fresh_database(args.database_url)
    try:
        await upgrade(url)
        async with recording_proxy(anvil.url) as (proxy_url, log):
            chain = ChainConfig(
                chain_id=dev.chain_id, name="anvil", rpc_url=proxy_url, factory=dev.factory
            )
            services = build_services(
                Settings(
                    environment="development", database_url=url, chains=[chain], run_workers=False
                )
            )
            await seed(services, url, args.invoices, dev, token_every)
            evm = EvmClient.connect(anvil.url)
            stop = asyncio.Event()
            loop = asyncio.create_task(watch_chain(services, services.chains.all()[0], stop))
            await wait_blocks(evm, args.warmup)
            await asyncio.sleep(args.block_time / 2)
            before = len(log.calls)
            await wait_blocks(evm, args.blocks)
            await asyncio.sleep(args.block_time / 2)
            calls = log.calls[before:]
            stop.set()
            await loop
            await evm.aclose()
            await services.aclose()
    finally:
        drop()
    per_block = len(calls) / args.blocks
    methods = collections.Counter(method for method, _params in calls)
    tokens = 0 if token_every == 0 else 1 / token_every
    print(
        f"rpc_rest invoices={args.invoices} tokens={tokens:.2f} "
        f"reader={'deployed' if reader else 'absent'} block_time_s={args.block_time} "
        f"blocks={args.blocks} calls={len(calls)} calls_per_block={per_block:.2f} "
        f"calls_per_hour={per_block * 3600 / args.block_time:.0f} "
        f"naive_calls_per_hour={args.invoices * 3600 // SPEC_INTERVAL_S} "
        f"by_method={','.join(f'{m}:{c}' for m, c in sorted(methods.items()))}",
        flush=True,
    )
    return not reader or per_block <= GOAL_CALLS_PER_BLOCK


async def run(args: argparse.Namespace) -> bool:
    with AnvilProcess() as anvil:
        evm = EvmClient.connect(anvil.url)
        dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
        # Deployed on demand; from here on a block every --block-time seconds.
        await evm.call_rpc("evm_setIntervalMining", [args.block_time])
        reader_code = "0x" + load_artifact(ESCROW_READER).deployed_bytecode.hex()
        ok = True
        for token_every in (0, 5):
            for reader in [case == "deployed" for case in args.readers.split(",")]:
                code = reader_code if reader else "0x"
                await evm.call_rpc("anvil_setCode", [reader_address(), code])
                ok = await measure(anvil, dev, args, token_every, reader) and ok
        await evm.aclose()
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invoices", type=int, default=10_000)
    parser.add_argument("--block-time", type=int, default=12)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=6)
    parser.add_argument("--database-url", default=None, help="PostgreSQL server URL")
    parser.add_argument(
        "--readers", default="absent,deployed", help="absent, deployed or both (in that order)"
    )
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.invoices, args.block_time, args.blocks, args.warmup = 20, 1, 2, 1
    sys.exit(0 if asyncio.run(run(args)) or args.smoke else 1)


if __name__ == "__main__":
    main()
