"""Burst: N invoices paid in one block → seconds until the last paid webhook is received.

Starts anvil (its own, so the bench controls mining), a webhook receiver, and the service in
one of two set-ups, each measured in the same run:

- ``dev``: ``invoicing dev --rpc-url`` (SQLite, the API and every worker in one process);
- ``postgres`` (with ``--database-url``): a fresh database on that server, one
  ``invoicing serve`` and ``--workers`` separate ``invoicing worker`` processes.

It creates N invoices through the API (signature mode, each with the receiver as its
``webhookUrl``), turns anvil's automine off, sends N payments (one per invoice, from one
account, nonces in a row), mines them in ONE block (``evm_mine``) and times from the mined
block to the last paid webhook received. Prints one line per set-up::

    burst setup=dev invoices=1000 block_txs=1000 last_webhook_s=2.41 first_webhook_s=0.52
        p50_webhook_s=1.3 service_cpu_s=1.9

``service_cpu_s`` is the CPU time the service's processes used from the payments' sending to
the last webhook (user and system, all of them added up): on a loaded machine the wall times
swing with the load, the CPU time much less.

Exits 1 when a set-up misses the goal (the last webhook within 5 s).

    .venv/bin/python bench/burst.py [--invoices 1000] [--workers 2] [--setups dev,postgres]
        [--database-url postgresql://postgres@127.0.0.1:5432/postgres] [--profile DIR]

``--profile DIR`` samples every service process with ``py-spy`` (``pip install py-spy``)
from the payments' sending to the last webhook and writes one collapsed-stack file per
process into DIR (``setup-N.txt``; ``py-spy``'s ``raw`` format, one stack and its sample
count a line), to see where the time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from eth_account import Account

from invoicing.auth.signatures import sign_request
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess, free_port
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient, fee_fields
from invoicing.migrate import upgrade

sys.path.insert(0, str(Path(__file__).parent))
from monitor import fresh_database  # noqa: E402
from receiver import Stats, start_receiver  # noqa: E402

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

INVOICING = str(Path(sys.executable).parent / "invoicing")
OWNER = Account.from_key(DEV_PRIVATE_KEYS[1])
PAYER_KEY = DEV_PRIVATE_KEYS[6]
RELAYER_KEY = DEV_PRIVATE_KEYS[0]
AMOUNT = "0.001"
AMOUNT_WEI = 10**15
GOAL_S = 5.0
CREATES_IN_FLIGHT = 16
# Limits far above the load: one owner creates every invoice.
ENV = {
    "INVOICING_OWNER_RATE_LIMIT_PER_MINUTE": "1000000000",
    "INVOICING_MAX_WATCHED_INVOICES_PER_OWNER": "1000000000",
}


def signed_create(
    chain_id: int, webhook_url: str, ts: int
) -> tuple[dict[str, Any], dict[str, str]]:
    payload = {"chainId": chain_id, "amount": AMOUNT, "webhookUrl": webhook_url}
    signature = sign_request(OWNER.key.to_0x_hex(), "invoice.create", OWNER.address, ts, payload)
    body = {"ownerAddress": OWNER.address, **payload}
    return body, {"x-service-signature": signature, "x-service-timestamp": str(ts)}


async def create_invoices(base_url: str, chain_id: int, webhook_url: str, n: int) -> list[str]:
    """N invoices through the API; their payment addresses."""
    gate = asyncio.Semaphore(CREATES_IN_FLIGHT)
    now = time.time_ns() // 1_000_000
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:

        async def one(i: int) -> str:
            for attempt in range(3):
                # A dropped connection (an overloaded machine) is retried as a new request:
                # a new timestamp, so never refused as a replay.
                body, headers = signed_create(chain_id, webhook_url, now + i + attempt * n)
                try:
                    async with gate:
                        answer = await client.post(
                            "/integration/invoices", json=body, headers=headers
                        )
                except httpx.TransportError:
                    continue
                answer.raise_for_status()
                return str(answer.json()["paymentAddress"])
            raise SystemExit("creates keep failing")

        return list(await asyncio.gather(*(one(i) for i in range(n))))


async def pay_in_one_block(rpc_url: str, addresses: list[str]) -> tuple[float, int]:
    """Send one payment per address with automine off, then mine them all in one block;
    answers when the block was mined (monotonic) and how many transactions it holds."""
    evm = EvmClient.connect(rpc_url)
    try:
        await evm.call_rpc("evm_setAutomine", [False])
        sender = Account.from_key(PAYER_KEY).address
        nonce = await evm.get_transaction_count(sender)
        chain_id = await evm.chain_id()
        max_fee, tip = await evm.fee_caps()
        fees = fee_fields(await evm.eip1559(), max_fee * 2, tip)
        raws = [
            evm.sign_transaction(
                PAYER_KEY,
                fees
                | {
                    "chainId": chain_id,
                    "nonce": nonce + i,
                    "to": address,
                    "value": AMOUNT_WEI,
                    "gas": 21_000,
                    "data": b"",
                },
            )[1]
            for i, address in enumerate(addresses)
        ]
        for start in range(0, len(raws), 100):
            await asyncio.gather(*(evm.send_raw_transaction(raw) for raw in raws[start:][:100]))
        await evm.call_rpc("evm_mine", [])
        mined_at = time.monotonic()
        block = await evm.get_block("latest")
        await evm.call_rpc("evm_setAutomine", [True])
        return mined_at, len(block["transactions"])
    finally:
        await evm.aclose()


async def wait_webhooks(stats: Stats, n: int, timeout_s: float = 120) -> list[float]:
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / 0.02)):
        if len(stats.arrivals) >= n or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.02)
    return sorted(arrival for _path, _event, arrival in stats.arrivals)


@dataclass
class Receiver:
    port: int
    stats: Stats


@contextmanager
def profiled(setup: str, pids: list[int], directory: Path | None) -> Iterator[None]:
    """Sample ``pids`` with py-spy while the block runs (nothing without ``directory``)."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).parent / "py-spy")
    samplers = [
        subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--format", "raw", "--nonblocking"]
            + ["--output", str(directory / f"{setup}-{n}.txt")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n, pid in enumerate(pids)
    ]
    time.sleep(1)  # py-spy attaches
    try:
        yield
    finally:
        for sampler in samplers:
            sampler.send_signal(signal.SIGINT)
        for sampler in samplers:
            sampler.wait(timeout=60)


async def measure(
    setup: str,
    base_url: str,
    rpc_url: str,
    chain_id: int,
    n: int,
    receiver: Receiver,
    pids: list[int],
    profile: Path | None,
) -> bool:
    receiver.stats.arrivals.clear()
    webhook_url = f"http://127.0.0.1:{receiver.port}/paid"
    addresses = await create_invoices(base_url, chain_id, webhook_url, n)
    with profiled(setup, pids, profile):
        cpu_before = cpu_seconds(pids)
        mined_at, block_txs = await pay_in_one_block(rpc_url, addresses)
        arrivals = await wait_webhooks(receiver.stats, n)
        cpu_s = cpu_seconds(pids) - cpu_before
    after = [arrival - mined_at for arrival in arrivals]
    last = after[-1] if len(after) == n else float("inf")
    print(
        f"burst setup={setup} invoices={n} block_txs={block_txs} received={len(after)} "
        f"last_webhook_s={last:.2f} first_webhook_s={after[0]:.2f} "
        f"p50_webhook_s={statistics.median(after):.2f} service_cpu_s={cpu_s:.2f}",
        flush=True,
    )
    return last <= GOAL_S


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU seconds the processes used so far (Linux ``/proc``)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


@contextmanager
def processes(commands: list[list[str]], env: dict[str, str]) -> Iterator[list[int]]:
    started = [
        subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for c in commands
    ]
    try:
        yield [process.pid for process in started]
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def wait_ready(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, timeout=5) as client:
        for _ in range(600):
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise SystemExit(f"{base_url} never became ready")


async def dev_case(anvil: AnvilProcess, n: int, receiver: Receiver, profile: Path | None) -> bool:
    workdir = Path(tempfile.mkdtemp(prefix="bench-burst-"))
    ready = workdir / "ready.json"
    port = free_port()
    command = [INVOICING, "dev", "--rpc-url", anvil.url, "--port", str(port)]
    command += ["--ready-file", str(ready)]
    with processes([command], {**os.environ, **ENV}) as pids:
        for _ in range(1200):
            if ready.exists() and ready.read_text().strip():
                break
            await asyncio.sleep(0.1)
        info = json.loads(ready.read_text())
        base_url, chain_id = info["base_url"], info["chain_id"]
        return await measure("dev", base_url, anvil.url, chain_id, n, receiver, pids, profile)


async def postgres_case(
    anvil: AnvilProcess,
    n: int,
    workers: int,
    server: str,
    receiver: Receiver,
    profile: Path | None,
) -> bool:
    url, drop = fresh_database(server)
    workdir = Path(tempfile.mkdtemp(prefix="bench-burst-"))
    try:
        evm = EvmClient.connect(anvil.url)
        dev = await deploy_dev_contracts(evm, RELAYER_KEY)
        await evm.aclose()
        await upgrade(url)
        chains = workdir / "chains.toml"
        chains.write_text(
            f'[[chain]]\nchain_id = {dev.chain_id}\nname = "anvil"\nrpc_url = "{anvil.url}"\n'
            f'factory = "{dev.factory}"\nrelayer_key = "{RELAYER_KEY}"\n'
        )
        env = {
            **os.environ,
            **ENV,
            "INVOICING_DATABASE_URL": url,
            "INVOICING_CHAINS_FILE": str(chains),
            "INVOICING_ENVIRONMENT": "development",
            "INVOICING_WEBHOOK_ALLOW_PRIVATE": "true",
        }
        port = free_port()
        commands = [[INVOICING, "serve", "--port", str(port), "--no-access-log"]]
        commands += [[INVOICING, "worker"] for _ in range(workers)]
        with processes(commands, env) as pids:
            base_url = f"http://127.0.0.1:{port}"
            await wait_ready(base_url)
            setup = f"postgres_workers_{workers}"
            return await measure(
                setup, base_url, anvil.url, dev.chain_id, n, receiver, pids, profile
            )
    finally:
        drop()


async def run(args: argparse.Namespace) -> bool:
    # The receiver outlives the service processes: their connections end before it closes.
    server, stats = await start_receiver()
    receiver = Receiver(server.sockets[0].getsockname()[1], stats)
    ok = True
    try:
        if "dev" in args.setups.split(","):
            with AnvilProcess() as anvil:
                ok = await dev_case(anvil, args.invoices, receiver, args.profile) and ok
        if args.database_url and "postgres" in args.setups.split(","):
            with AnvilProcess() as anvil:
                ok = (
                    await postgres_case(
                        anvil,
                        args.invoices,
                        args.workers,
                        args.database_url,
                        receiver,
                        args.profile,
                    )
                    and ok
                )
    finally:
        await asyncio.sleep(0.5)  # the closed connections' handlers see their EOF
        server.close()
        await server.wait_closed()
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--invoices", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--database-url", default=None, help="PostgreSQL server URL")
    parser.add_argument("--setups", default="dev,postgres", help="which set-ups to run")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy output directory")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.invoices, args.workers = 5, 1
    sys.exit(0 if asyncio.run(run(args)) or args.smoke else 1)


if __name__ == "__main__":
    main()
