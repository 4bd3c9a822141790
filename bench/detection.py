"""Detection latency: payment mined → paid webhook received, p50 and p95, with 1 s blocks.

Starts anvil with one block per second, deploys the dev contracts, runs the monitor and
webhook workers with their default settings against a fresh SQLite database, and pays
invoices in rounds (several payments per block). "Mined" is when the payment's receipt first
appears (polled every 20 ms); "received" is when the local receiver got the webhook. Prints::

    detection samples=30 p50_s=0.62 p95_s=0.98 max_s=1.05 block_time_s=1 warmup_s=10

Exits 1 when p95 is over 2 s.

    .venv/bin/python bench/detection.py [--rounds 6] [--per-round 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from invoicing.auth.guard import Caller
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.invoices.create import NewInvoice, create_invoice
from invoicing.migrate import upgrade
from invoicing.monitor import worker as monitor_worker
from invoicing.notifications import worker as webhook_worker
from invoicing.services import build_services
from invoicing.settings import Settings
from invoicing.workers import run_workers

sys.path.insert(0, str(Path(__file__).parent))
from receiver import start_receiver  # noqa: E402

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

PAYER_KEY = DEV_PRIVATE_KEYS[5]
OWNER = "0x" + "5a" * 20
GOAL_P95_S = 2.0
AMOUNT_WEI = 10**15
WARMUP_S = 10


async def mined_at(evm: EvmClient, tx_hashes: list[str]) -> dict[str, float]:
    """When each transaction's receipt first showed up."""
    seen: dict[str, float] = {}
    while len(seen) < len(tx_hashes):
        for tx_hash in tx_hashes:
            if tx_hash not in seen and await evm.get_receipt(tx_hash) is not None:
                seen[tx_hash] = time.monotonic()
        await asyncio.sleep(0.02)
    return seen


async def run(rounds: int, per_round: int, warmup_s: float = WARMUP_S) -> bool:
    with AnvilProcess(block_time_s=1) as anvil:
        evm = EvmClient.connect(anvil.url)
        dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
        url = f"sqlite+aiosqlite:///{tempfile.mkdtemp(prefix='bench-detection-')}/d.db"
        await upgrade(url)
        chain = ChainConfig(
            chain_id=dev.chain_id, name="anvil", rpc_url=anvil.url, factory=dev.factory
        )
        services = build_services(
            Settings(
                environment="development",
                database_url=url,
                chains=[chain],
                webhook_allow_private=True,
                run_workers=False,
            )
        )
        server, stats = await start_receiver()
        port = server.sockets[0].getsockname()[1]
        stop = asyncio.Event()
        workers = asyncio.create_task(
            run_workers(services, stop, [monitor_worker.run, webhook_worker.run])
        )
        gateway = services.chains.get(dev.chain_id)
        latencies: list[float] = []
        # A monitor runs for days; its first blocks are read at the plain poll, up to a poll
        # late, until it has learned the chain's pace (``HeadPacer``). Measured after that.
        await asyncio.sleep(warmup_s)
        try:
            for round_ in range(rounds):
                invoices = []
                for i in range(per_round):
                    invoice, _ = await create_invoice(
                        services.db,
                        gateway,
                        NewInvoice(
                            owner_address=OWNER,
                            chain_id=dev.chain_id,
                            amount="0.001",
                            webhook_url=f"http://127.0.0.1:{port}/d/{round_}/{i}",
                        ),
                        Caller(OWNER, "signature", signature="0x01", timestamp="1"),
                        services.clock.now_ms(),
                        3600,
                    )
                    invoices.append(invoice)
                await asyncio.sleep(0.3)  # let the new invoices' first due pass happen
                sent = [
                    await evm.transact(PAYER_KEY, inv.payment_address, value=AMOUNT_WEI, wait=False)
                    for inv in invoices
                ]
                hashes = [tx["transactionHash"] for tx in sent]
                mined = await mined_at(evm, hashes)
                paths = {f"/d/{round_}/{i}": hashes[i] for i in range(per_round)}
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline:
                    arrived = {p: t for p, _, t in stats.arrivals if p in paths}
                    if len(arrived) == per_round:
                        break
                    await asyncio.sleep(0.01)
                else:
                    print(f"detection FAILED: round {round_} got {len(arrived)}/{per_round}")
                    return False
                latencies += [arrived[p] - mined[h] for p, h in paths.items()]
        finally:
            stop.set()
            await workers
            server.close()
            await services.aclose()
            await evm.aclose()
    latencies.sort()
    p50 = statistics.median(latencies)
    p95 = latencies[max(0, round(0.95 * len(latencies)) - 1)]
    print(
        f"detection samples={len(latencies)} p50_s={p50:.2f} p95_s={p95:.2f} "
        f"max_s={latencies[-1]:.2f} block_time_s=1 poll_interval_s="
        f"{services.settings.monitor_poll_interval_s:g} warmup_s={warmup_s:g}",
        flush=True,
    )
    return p95 <= GOAL_P95_S


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        met = asyncio.run(run(rounds=1, per_round=2, warmup_s=1))
    else:
        met = asyncio.run(run(args.rounds, args.per_round))
    sys.exit(0 if met or args.smoke else 1)


if __name__ == "__main__":
    main()
