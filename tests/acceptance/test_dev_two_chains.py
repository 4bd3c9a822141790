"""`invoicing dev --chains 2`: two anvil chains in one service. Invoices, payments, webhooks
and withdrawals stay on their own chain, a payment on the wrong chain pays nothing, and a
dead node on one chain does not stall the other chain's work."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount

from invoicing.chain import artifacts
from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import ERC20, TEST_TOKEN
from invoicing.chain.deploy import deterministic_address, dev_aggregator_init_code, factory_address
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.chain.evm import EvmClient
from tests.conftest import new_database_url
from tests.support.journey import INVOICING, poll_status, wait_ready
from tests.support.receiver import receiver
from tests.support.server import free_port, free_port_run
from tests.support.signing import new_owner, signed_headers

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

PAYER = DEV_PRIVATE_KEYS[8]
ETH = 10**18
TUSD = 10**6


def kill_child_anvil(parent_pid: int, port: int) -> None:
    """SIGKILL the anvil that `invoicing dev` (parent_pid) started on ``port``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent_pid and b"--port" in argv and str(port).encode() in argv:
            os.kill(int(entry.name), signal.SIGKILL)
            return
    raise AssertionError(f"no anvil on port {port} under {parent_pid}")


async def create_invoice(
    http: httpx.AsyncClient, key: str, owner: str, chain_id: int, hook: str, **fields: Any
) -> dict[str, Any]:
    response = await http.post(
        "/integration/invoices",
        json={"ownerAddress": owner, "chainId": chain_id, "webhookUrl": hook, **fields},
        headers={"x-service-api-key": key},
    )
    assert response.status_code == 201, response.text
    invoice: dict[str, Any] = response.json()
    return invoice


async def token_balance(evm: EvmClient, token: str, holder: str) -> int:
    raw = await evm.eth_call(token, encode_call(ERC20, "balanceOf", holder))
    balance = decode_result(ERC20, "balanceOf", raw)
    assert isinstance(balance, int)
    return balance


def set_fee_body(owner: LocalAccount, chain_id: int, factory: str, fee_bps: int) -> dict[str, Any]:
    deadline = int(time.time()) + 3600
    typed = set_fee_typed_data(chain_id, factory, owner.address, fee_bps, 0, deadline)
    signed = Account.sign_message(encode_typed_data(full_message=typed), owner.key)
    return {
        "ownerAddress": owner.address,
        "chainId": chain_id,
        "feeBps": fee_bps,
        "nonce": "0",
        "deadline": str(deadline),
        "signature": "0x" + bytes(signed.signature).hex(),
    }


async def fees_of(http: httpx.AsyncClient, key: str, owner: str, chain_id: int) -> Any:
    answer = await http.get(
        "/integration/fees",
        params={"ownerAddress": owner, "chainId": chain_id},
        headers={"x-service-api-key": key},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


async def test_two_chains_kept_apart_and_one_dead_node_stalls_nothing(tmp_path: Path) -> None:
    database_url, drop_database = new_database_url()
    ready_file = tmp_path / "ready.json"
    chain_port = free_port_run(2)
    env = {
        **os.environ,
        "INVOICING_MONITOR_INTERVAL_S": "1",
        "INVOICING_WITHDRAWAL_INTERVAL_S": "1",
        "INVOICING_WEBHOOK_RETRY_DELAY_S": "1",
        "INVOICING_SECRET": "two-chains-secret-" + "t" * 32,
    }
    log = (tmp_path / "dev.log").open("w")
    process = await asyncio.create_subprocess_exec(
        *[INVOICING, "dev", "--chains", "2", "--port", str(free_port())],
        *["--chain-port", str(chain_port), "--ready-file", str(ready_file)],
        *["--database-url", database_url],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    owner = new_owner()
    tusd = deterministic_address(artifacts.test_token_bytecode())
    feed = deterministic_address(dev_aggregator_init_code())
    try:
        ready = await wait_ready(ready_file, process)
        first, second = ready["chains"]  # type: ignore[misc]
        assert ready["chain_id"] == 31337 and ready["factory"] == factory_address()
        assert first == {
            "chain_id": 31337,
            "rpc_url": f"http://127.0.0.1:{chain_port}",
            "factory": factory_address(),
            "tokens": {"TUSD": tusd},
            "feeds": {"ETH/USD": feed},
        }
        assert second == {
            "chain_id": 31338,
            "rpc_url": f"http://127.0.0.1:{chain_port + 1}",
            "factory": factory_address(),
            "tokens": {"TUSD": tusd},
            "feeds": {"ETH/USD": feed},
        }
        one, two = EvmClient.connect(first["rpc_url"]), EvmClient.connect(second["rpc_url"])
        assert (await one.chain_id(), await two.chain_id()) == (31337, 31338)
        async with receiver() as hooks, httpx.AsyncClient(base_url=str(ready["base_url"])) as http:
            issued = await http.post(
                "/integration/api-keys",
                json={"ownerAddress": owner.address, "label": "shop"},
                headers=signed_headers(owner, "apikey.create", {"label": "shop"}),
            )
            assert issued.status_code == 201, issued.text
            key = issued.json()["apiKey"]
            on_one = await create_invoice(
                http, key, owner.address, 31337, hooks.url("/one"), amount="0.5"
            )
            on_two = await create_invoice(
                http, key, owner.address, 31338, hooks.url("/two"), amount="25", tokenAddress=tusd
            )
            assert on_one["chainId"] == 31337 and on_two["chainId"] == 31338

            # The first invoice's address paid in full, but on the other chain: pays nothing.
            await two.transact(PAYER, on_one["paymentAddress"], value=ETH // 2)
            await two.transact(
                PAYER,
                tusd,
                encode_call(TEST_TOKEN, "transfer", on_two["paymentAddress"], 25 * TUSD),
            )
            (paid_two,) = await hooks.wait_for("/two", timeout_s=30)
            assert paid_two.body["chainId"] == 31338 and paid_two.body["status"] == "paid"
            assert paid_two.body["requiredRaw"] == str(25 * TUSD)
            status = await http.get(
                "/integration/invoices/status",
                params={"ownerAddress": owner.address, "paymentAddress": on_one["paymentAddress"]},
                headers={"x-service-api-key": key},
            )
            assert status.json()["invoice"]["status"] == "pending"
            assert hooks.at("/one") == []

            await one.transact(PAYER, on_one["paymentAddress"], value=ETH // 2)
            (paid_one,) = await hooks.wait_for("/one", timeout_s=30)
            assert paid_one.body["chainId"] == 31337 and paid_one.body["status"] == "paid"
            assert paid_one.body["requiredRaw"] == str(ETH // 2)
            for invoice in (on_one, on_two):
                done = await poll_status(
                    http, key, owner.address, invoice["paymentAddress"], "completed"
                )
                assert done["withdrawn"] is True
            # Each chain's withdrawal paid the owner on that chain, exactly.
            assert await one.get_balance(owner.address) == ETH // 2
            assert await token_balance(one, tusd, owner.address) == 0
            assert await token_balance(two, tusd, owner.address) == 25 * TUSD
            assert await two.get_balance(owner.address) == 0
            # The wrong-chain coins stay where they were sent (nothing swept them).
            assert await two.get_balance(on_one["paymentAddress"]) == ETH // 2

            # Fee settings are per chain: a SetFee signed for chain 2 changes chain 2 only,
            # and the same signature offered for chain 1 (another EIP-712 domain) is refused.
            on_chain_two = set_fee_body(owner, 31338, factory_address(), 100)
            sent = await http.post("/fees/set-meta", json=on_chain_two)
            assert sent.status_code == 202, sent.text
            replayed = await http.post("/fees/set-meta", json={**on_chain_two, "chainId": 31337})
            assert replayed.json()["error"]["code"] == "invalid_owner_signature"
            for _ in range(100):  # mined at once (anvil automines); read until it shows
                if (await fees_of(http, key, owner.address, 31338))["nonce"] == "1":
                    break
                await asyncio.sleep(0.1)
            assert await fees_of(http, key, owner.address, 31338) == {
                "feeBps": 100,
                "payoutAddress": None,
                "nonce": "1",
                "factory": ready["factory"],
            }
            assert await fees_of(http, key, owner.address, 31337) == {
                "feeBps": 0,
                "payoutAddress": None,
                "nonce": "0",
                "factory": ready["factory"],
            }

            # The second chain's node dies; the first chain keeps detecting and withdrawing.
            kill_child_anvil(process.pid, chain_port + 1)
            late = await create_invoice(
                http, key, owner.address, 31337, hooks.url("/late"), amount="0.25"
            )
            await one.transact(PAYER, late["paymentAddress"], value=ETH // 4)
            (paid_late,) = await hooks.wait_for("/late", timeout_s=30)
            assert paid_late.body["chainId"] == 31337 and paid_late.body["status"] == "paid"
            await poll_status(http, key, owner.address, late["paymentAddress"], "completed")
            assert await one.get_balance(owner.address) == ETH // 2 + ETH // 4
        await one.aclose()
        await two.aclose()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), timeout=30)
        log.close()
        drop_database()
