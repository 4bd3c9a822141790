"""API throughput: invoice create (API key, signature mode) and status lookup, against a
trivial route (``/healthz``) of the same app measured in the same run.

Starts anvil, deploys the dev contracts, runs ``invoicing serve`` as a separate process
(one uvicorn worker) on a fresh database and drives it with concurrent HTTP clients for a
few seconds per case. Prints one line per case, e.g.::

    api create_api_key rps=812 trivial_rps=1650 ratio=0.49

    .venv/bin/python bench/api.py [--seconds 5] [--concurrency 32] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from eth_account import Account

from invoicing.auth.signatures import sign_request
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess, free_port
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.migrate import upgrade

INVOICING = str(Path(sys.executable).parent / "invoicing")
OWNER = Account.from_key(DEV_PRIVATE_KEYS[1])
Request = Callable[[int], tuple[str, str, dict[str, Any], dict[str, str]]]


async def measure(
    client: httpx.AsyncClient, make: Request, seconds: float, concurrency: int
) -> float:
    """Requests per second completed with a 2xx status during ``seconds``."""
    counter = iter(range(10**9))
    done = 0
    deadline = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            method, path, body, headers = make(next(counter))
            response = await client.request(method, path, json=body or None, headers=headers)
            if response.status_code >= 300:
                raise SystemExit(f"{path}: {response.status_code} {response.text}")
            done += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return done / (time.perf_counter() - start)


def presigned(count: int, chain_id: int) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """Signature-mode create requests signed before timing (the client's cost, not ours)."""
    now = time.time_ns() // 1_000_000
    requests = []
    for i in range(count):
        body = {"ownerAddress": OWNER.address, "chainId": chain_id, "amount": "1.5"}
        payload = {"chainId": chain_id, "amount": "1.5"}
        ts = now + i
        signature = sign_request(
            OWNER.key.to_0x_hex(), "invoice.create", OWNER.address, ts, payload
        )
        requests.append((body, {"x-service-signature": signature, "x-service-timestamp": str(ts)}))
    return requests


async def deploy(rpc_url: str) -> tuple[int, str]:
    evm = EvmClient.connect(rpc_url)
    try:
        deployment = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
    finally:
        await evm.aclose()
    return deployment.chain_id, deployment.factory


def bench(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-api-"))
    database_url = args.database_url or f"sqlite:///{workdir}/bench.db"
    with AnvilProcess() as anvil:
        chain_id, factory = asyncio.run(deploy(anvil.url))
        asyncio.run(upgrade(database_url))
        chains = workdir / "chains.toml"
        chains.write_text(
            f'[[chain]]\nchain_id = {chain_id}\nname = "anvil"\n'
            f'rpc_url = "{anvil.url}"\nfactory = "{factory}"\n'
        )
        env = {
            **os.environ,
            "INVOICING_DATABASE_URL": database_url,
            "INVOICING_CHAINS_FILE": str(chains),
            "INVOICING_ENVIRONMENT": "development",
        }
        issued = subprocess.run(
            [INVOICING, "api-keys", "create", "--owner", OWNER.address],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        api_key = json.loads(issued)["apiKey"]
        port = free_port()
        server = subprocess.Popen(
            [INVOICING, "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            asyncio.run(run_cases(f"http://127.0.0.1:{port}", api_key, chain_id, args))
        finally:
            server.terminate()
            server.wait(timeout=10)


async def run_cases(base_url: str, api_key: str, chain_id: int, args: argparse.Namespace) -> None:
    limits = httpx.Limits(max_connections=args.concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:
        for _ in range(100):
            try:
                if (await client.get("/healthz")).status_code == 200:
                    break
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
        key_headers = {"x-service-api-key": api_key}
        body = {"ownerAddress": OWNER.address, "chainId": chain_id, "amount": "1.5"}
        created = await client.post("/integration/invoices", json=body, headers=key_headers)
        payment_address = created.json()["paymentAddress"]
        signed = presigned(int(args.seconds * 3000), chain_id)
        status_path = (
            f"/integration/invoices/status?ownerAddress={OWNER.address}"
            f"&paymentAddress={payment_address}"
        )

        cases: dict[str, Request] = {
            "trivial": lambda i: ("GET", "/healthz", {}, {}),
            "create_api_key": lambda i: ("POST", "/integration/invoices", body, key_headers),
            "create_signature": lambda i: ("POST", "/integration/invoices", *signed[i]),
            "status_api_key": lambda i: ("GET", status_path, {}, key_headers),
        }
        await measure(client, cases["trivial"], 1.0, args.concurrency)  # warm-up
        trivial = await measure(client, cases["trivial"], args.seconds, args.concurrency)
        print(f"api trivial rps={trivial:.0f}")
        for name in ("create_api_key", "create_signature", "status_api_key"):
            rps = await measure(client, cases[name], args.seconds, args.concurrency)
            print(f"api {name} rps={rps:.0f} trivial_rps={trivial:.0f} ratio={rps / trivial:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--database-url", default=None)
    bench(parser.parse_args())


if __name__ == "__main__":
    main()
