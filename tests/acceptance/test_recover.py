"""Recovery without the service: export the escrows, lose the service and its database, then
sweep everything to the owner with `invoicing recover` (and with examples/recover.mjs, the
ethers.js script of docs/operations/recovery.md), on a chain the service no longer watches."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount
from typer.testing import CliRunner

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.cli import app
from invoicing.migrate import upgrade
from invoicing.services import build_services
from invoicing.settings import Settings
from invoicing.web.app import create_app
from tests.conftest import RunningApp, chain_config, new_database_url
from tests.support.api import issue_api_key, key_headers, signed_get
from tests.support.chain import read_view
from tests.support.factory import deploy_test_contract
from tests.support.server import serve
from tests.support.signing import new_owner

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

INVOICING = str(Path(sys.executable).parent / "invoicing")
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "recover.mjs"
PAYER = DEV_PRIVATE_KEYS[6]
ETH = 10**18
TUSD = 10**6


@dataclass
class Lost:
    """What is left once the service and its database are gone: the chain and the export."""

    owner: LocalAccount
    export: Path
    escrows: list[str]
    native_held: int
    token_held: int


async def pay(evm: EvmClient, dev: DevDeployment, to: str, native: int = 0, token: int = 0) -> None:
    if native:
        assert (await evm.transact(PAYER, to, b"", value=native))["status"] == 1
    if token:
        transfer = encode_call(TEST_TOKEN, "transfer", to, token)
        assert (await evm.transact(PAYER, dev.token, transfer))["status"] == 1


async def token_balance(evm: EvmClient, dev: DevDeployment, account: str) -> int:
    balance: int = await read_view(evm, dev.token, TEST_TOKEN, "balanceOf", account)
    return balance


def drop_sqlite(url: str) -> None:
    path = Path(url.split("///", 1)[1])
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    assert not path.exists()


@pytest.fixture
async def lost(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, evm: EvmClient
) -> AsyncIterator[Lost]:
    """Invoices created and paid through a service of their own, exported by the owner; then
    the service is stopped and its database deleted."""
    url, drop = new_database_url()
    await upgrade(url)
    settings = Settings(
        environment="development",
        database_url=url,
        run_workers=False,
        payment_page_url="http://pay.test",
        chains=[chain_config(anvil, dev)],
    )
    services = build_services(settings)
    owner = new_owner()
    try:
        async with (
            serve(create_app(services)) as base_url,
            httpx.AsyncClient(base_url=base_url, timeout=30) as http,
        ):
            key = await issue_api_key(services, owner)

            async def create(invoice_id: str, amount: str, token: str | None = None) -> str:
                body: dict[str, Any] = {
                    "ownerAddress": owner.address,
                    "chainId": dev.chain_id,
                    "amount": amount,
                    "invoiceId": invoice_id,
                    "tokenAddress": token,
                }
                response = await http.post(
                    "/integration/invoices", json=body, headers=key_headers(key)
                )
                assert response.status_code == 201, response.text
                address: str = response.json()["paymentAddress"]
                return address

            paid = await create("paid", "0.5")
            partial = await create("partial", "1")
            token_paid = await create("token-paid", "10", dev.token)
            overpaid = await create("token-overpaid", "5", dev.token)
            cancelled = await create("cancelled", "0.2")
            unpaid = await create("unpaid", "1")
            removed = await http.delete(
                "/integration/invoices",
                params={
                    "ownerAddress": owner.address,
                    "chainId": dev.chain_id,
                    "invoiceId": "cancelled",
                },
                headers=key_headers(key),
            )
            assert removed.status_code == 200
            await pay(evm, dev, paid, native=ETH // 2)
            await pay(evm, dev, partial, native=3 * ETH // 10)
            # Coin sent to a token invoice's escrow is recovered as well.
            await pay(evm, dev, token_paid, native=ETH // 100, token=10 * TUSD)
            await pay(evm, dev, overpaid, token=7 * TUSD)
            await pay(evm, dev, cancelled, native=2 * ETH // 10)

            exported = await signed_get(
                http,
                "/integration/escrows/export",
                owner,
                "escrow.export",
                {"ownerAddress": owner.address, "chainId": str(dev.chain_id)},
            )
            assert exported.status_code == 200, exported.text
    finally:
        await services.aclose()
        if url.startswith("sqlite"):
            drop_sqlite(url)
        else:
            drop()
    export = tmp_path / "escrows.ndjson"
    export.write_text(exported.text)
    escrows = [paid, partial, token_paid, overpaid, cancelled, unpaid]
    assert len(exported.text.splitlines()) == len(escrows)
    yield Lost(owner, export, escrows, native_held=101 * ETH // 100, token_held=17 * TUSD)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any of the service's configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")}
    env.update(extra)
    return env


def run_recover(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [INVOICING, "recover", *args],
        capture_output=True,
        text=True,
        env=env or clean_env(),
        cwd=cwd,
        timeout=120,
        check=False,
    )


def run_script(
    export: Path, anvil: AnvilProcess, dev: DevDeployment, owner: str, sender: LocalAccount
) -> subprocess.CompletedProcess[str]:
    """examples/recover.mjs, as an owner runs it (ethers from this repository)."""
    env = clean_env(
        RPC_URL=anvil.url, FACTORY=dev.factory, OWNER=owner, SENDER_KEY=sender.key.to_0x_hex()
    )
    return subprocess.run(
        ["node", str(SCRIPT), str(export)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )


async def new_sender(evm: EvmClient) -> LocalAccount:
    sender: LocalAccount = Account.create()
    assert (await evm.transact(PAYER, sender.address, b"", value=ETH))["status"] == 1
    return sender


async def escrow_holdings(evm: EvmClient, dev: DevDeployment, escrows: list[str]) -> list[int]:
    return [await evm.get_balance(e) + await token_balance(evm, dev, e) for e in escrows]


async def test_recover_sweeps_every_escrow_to_the_owner_without_the_service(
    lost: Lost, anvil: AnvilProcess, dev: DevDeployment, evm: EvmClient, tmp_path: Path
) -> None:
    sender = await new_sender(evm)
    env = clean_env(RECOVER_KEY=sender.key.to_0x_hex())
    common = ["--rpc-url", anvil.url, "--factory", dev.factory, "--owner", lost.owner.address]
    common += ["--from", str(lost.export)]

    # A dry run prints the plan and sends nothing.
    dry = run_recover(
        *common, "--sender-key", "env:RECOVER_KEY", "--dry-run", env=env, cwd=tmp_path
    )
    assert dry.returncode == 0, dry.stderr
    assert "would sweep native from 4 escrow(s): 1010000000000000000 raw" in dry.stdout
    assert f"would sweep token {dev.token} from 2 escrow(s): 17000000 raw" in dry.stdout
    assert "would sweep 5 escrow(s)" in dry.stdout
    assert await evm.get_transaction_count(sender.address) == 0
    assert await evm.get_balance(lost.owner.address) == 0

    swept = run_recover(
        *common, "--sender-key", "env:RECOVER_KEY", "--batch-size", "2", env=env, cwd=tmp_path
    )

    assert swept.returncode == 0, swept.stdout + swept.stderr
    progress = [line for line in swept.stdout.splitlines() if line.startswith("swept 2 escrow(s)")]
    assert len(progress) == 3  # native in two batches of 2, the token in one
    assert "swept 5 escrow(s) in 3 transaction(s)" in swept.stdout
    assert "  native: 1010000000000000000 raw" in swept.stdout.splitlines()
    assert f"  token {dev.token}: 17000000 raw" in swept.stdout.splitlines()
    # The owner, who paid no gas, received exactly what the escrows held; they are empty.
    assert await evm.get_balance(lost.owner.address) == lost.native_held
    assert await token_balance(evm, dev, lost.owner.address) == lost.token_held
    assert await escrow_holdings(evm, dev, lost.escrows) == [0] * 6
    assert await evm.get_transaction_count(sender.address) == 3
    assert sender.key.hex()[-40:] not in (swept.stdout + swept.stderr + dry.stdout).lower()

    # Funds that arrive later are recovered again, by examples/recover.mjs.
    await pay(evm, dev, lost.escrows[0], native=ETH // 4)
    await pay(evm, dev, lost.escrows[3], token=3 * TUSD)
    script = run_script(lost.export, anvil, dev, lost.owner.address, sender)
    assert script.returncode == 0, script.stderr
    assert await evm.get_balance(lost.owner.address) == lost.native_held + ETH // 4
    assert await token_balance(evm, dev, lost.owner.address) == lost.token_held + 3 * TUSD
    assert await escrow_holdings(evm, dev, lost.escrows) == [0] * 6


async def test_recover_splits_batches_that_do_not_fit_the_gas_limit(
    lost: Lost, anvil: AnvilProcess, dev: DevDeployment, evm: EvmClient
) -> None:
    sender = await new_sender(evm)
    env = clean_env(RECOVER_KEY=sender.key.to_0x_hex())
    block_gas_limit = int((await evm.get_block("latest"))["gasLimit"], 16)
    # A chain whose blocks take 200k gas: the four native escrows (about 220k) do not fit in
    # one withdraw, and balancesOf answers a few token balances per call.
    await evm.call_rpc("evm_setBlockGasLimit", [hex(200_000)])
    await evm.call_rpc("evm_mine")
    try:
        swept = run_recover(
            *("--rpc-url", anvil.url, "--factory", dev.factory, "--owner", lost.owner.address),
            *("--from", str(lost.export), "--sender-key", "env:RECOVER_KEY"),
            env=env,
        )
    finally:
        await evm.call_rpc("evm_setBlockGasLimit", [hex(block_gas_limit)])
        await evm.call_rpc("evm_mine")

    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert "swept 5 escrow(s) in 3 transaction(s)" in swept.stdout
    assert await evm.get_balance(lost.owner.address) == lost.native_held
    assert await token_balance(evm, dev, lost.owner.address) == lost.token_held
    assert await escrow_holdings(evm, dev, lost.escrows) == [0] * 6


async def test_unreadable_balances_are_reported_and_everything_else_swept(
    lost: Lost, anvil: AnvilProcess, dev: DevDeployment, evm: EvmClient, tmp_path: Path
) -> None:
    sender = await new_sender(evm)
    looping = await deploy_test_contract(evm, "HostileToken", ("uint256", 0))
    lines = [json.loads(line) for line in lost.export.read_text().splitlines()]
    lines[5]["tokenAddress"] = looping  # a token whose balanceOf never returns
    export = tmp_path / "hostile.ndjson"
    export.write_text("".join(json.dumps(line) + "\n" for line in lines))

    swept = run_recover(
        *("--rpc-url", anvil.url, "--factory", dev.factory, "--owner", lost.owner.address),
        *("--from", str(export), "--sender-key", "env:RECOVER_KEY"),
        env=clean_env(RECOVER_KEY=sender.key.to_0x_hex()),
    )

    assert swept.returncode == 1, swept.stdout + swept.stderr
    assert "swept 5 escrow(s) in 2 transaction(s)" in swept.stdout
    unreadable = [line for line in swept.stdout.splitlines() if "balance unreadable" in line]
    assert unreadable == [
        f"  not swept: {escrow}: token {looping} balance unreadable" for escrow in lost.escrows
    ]
    assert await evm.get_balance(lost.owner.address) == lost.native_held
    assert await token_balance(evm, dev, lost.owner.address) == lost.token_held
    assert await escrow_holdings(evm, dev, lost.escrows) == [0] * 6


async def test_recover_refuses_a_tampered_export_and_sends_nothing(
    lost: Lost, anvil: AnvilProcess, dev: DevDeployment, evm: EvmClient, tmp_path: Path
) -> None:
    sender = await new_sender(evm)
    lines = lost.export.read_text().splitlines()
    good_salt = lines[1].split('"salt":"')[1][:66]
    forged = good_salt[:-1] + ("0" if good_salt[-1] != "0" else "1")
    tampered = tmp_path / "tampered.ndjson"
    tampered.write_text("\n".join([lines[0], lines[1].replace(good_salt, forged), *lines[2:]]))
    env = clean_env(RECOVER_KEY=sender.key.to_0x_hex())
    args = ["--rpc-url", anvil.url, "--factory", dev.factory, "--owner", lost.owner.address]

    refused = run_recover(
        *args, "--from", str(tampered), "--sender-key", "env:RECOVER_KEY", env=env
    )
    wrong_owner = run_recover(
        "--rpc-url",
        anvil.url,
        "--factory",
        dev.factory,
        "--owner",
        new_owner().address,
        "--from",
        str(lost.export),
        "--sender-key",
        "env:RECOVER_KEY",
        env=env,
    )
    script = run_script(tampered, anvil, dev, lost.owner.address, sender)

    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr.startswith("error: line 2: paymentAddress ")
    assert "is not the escrow of owner" in refused.stderr
    assert refused.stderr.endswith("nothing was sent\n") and refused.stderr.count("\n") == 1
    assert wrong_owner.returncode == 1
    assert "line 1:" in wrong_owner.stderr and "(and 5 more line(s))" in wrong_owner.stderr
    assert script.returncode != 0 and "line 2" in script.stderr
    assert await evm.get_transaction_count(sender.address) == 0
    assert await escrow_holdings(evm, dev, lost.escrows) == [
        ETH // 2,
        3 * ETH // 10,
        ETH // 100 + 10 * TUSD,
        7 * TUSD,
        2 * ETH // 10,
        0,
    ]
    assert await evm.get_balance(lost.owner.address) == 0


def test_recover_bad_arguments_exit_with_one_line(tmp_path: Path) -> None:
    export = tmp_path / "escrows.ndjson"
    export.write_text("")
    key_file = tmp_path / "key"
    key_file.write_text("not a key")
    secret = DEV_PRIVATE_KEYS[5]
    base = ["--rpc-url", "http://127.0.0.1:9", "--factory", ZERO_ADDRESS]
    owner = ["--owner", new_owner().address]
    cases = {
        "--owner is required": [*base, "--from", str(export), "--sender-key", "env:K"],
        "--owner must be": [*base, "--owner", "0x123", "--from", str(export), "--dry-run"],
        "--from": [*base, *owner, "--from", str(tmp_path / "missing"), "--dry-run"],
        "--sender-key must be env:VAR or file:PATH": [
            *base,
            *owner,
            "--from",
            str(export),
            "--sender-key",
            secret,
        ],
        "environment variable K is not set": [
            *base,
            *owner,
            "--from",
            str(export),
            "--sender-key",
            "env:K",
        ],
        "is not a valid private key": [
            *base,
            *owner,
            "--from",
            str(export),
            "--sender-key",
            f"file:{key_file}",
        ],
        "--batch-size must be": [
            *base,
            *owner,
            "--from",
            str(export),
            "--batch-size",
            "0",
            "--dry-run",
        ],
        "--rpc-url must be": [
            "--rpc-url",
            "localhost",
            "--factory",
            ZERO_ADDRESS,
            *owner,
            "--from",
            str(export),
        ],
    }
    # The first through the installed command (its exit status and stderr as a process's);
    # the rest through the same command in this process, with the same clean environment (a
    # start-up of the command costs about 3 s of CPU).
    unset = {k: None for k in os.environ if k.startswith("INVOICING_") or k == "K"}
    for number, (expected, args) in enumerate(cases.items()):
        if number == 0:
            result = run_recover(*args)
            status, stderr = result.returncode, result.stderr
        else:
            ran = CliRunner().invoke(app, ["recover", *args], env=unset)
            status, stderr = ran.exit_code, ran.stderr
        assert status == 2, (expected, stderr)
        assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
        assert expected in stderr
        assert secret[2:] not in stderr and "not a key" not in stderr


async def test_operator_export_prints_what_the_owner_gets_from_the_api(
    app: RunningApp, dev: DevDeployment, database_url: str
) -> None:
    owner = new_owner()
    key = await issue_api_key(app.services, owner)
    for invoice_id in ("first", "second"):
        response = await app.http.post(
            "/integration/invoices",
            json={
                "ownerAddress": owner.address,
                "chainId": dev.chain_id,
                "amount": "1",
                "invoiceId": invoice_id,
            },
            headers=key_headers(key),
        )
        assert response.status_code == 201
    params = {"ownerAddress": owner.address, "chainId": str(dev.chain_id)}
    from_api = await app.http.get(
        "/integration/escrows/export", params=params, headers=key_headers(key)
    )

    result = await asyncio.to_thread(
        subprocess.run,
        [
            INVOICING,
            "escrows",
            "export",
            "--owner",
            owner.address.lower(),
            "--chain-id",
            str(dev.chain_id),
        ],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "INVOICING_DATABASE_URL": database_url,
            "INVOICING_ENVIRONMENT": "development",
            # The chain as the service has it: each line names the factory of its escrow.
            "INVOICING_CHAINS": json.dumps(
                [
                    {
                        "chain_id": dev.chain_id,
                        "name": "anvil",
                        "rpc_url": "http://unused",
                        "factory": dev.factory,
                    }
                ]  # fmt: skip
            ),
        },
        timeout=300,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == from_api.text
    assert [json.loads(line)["invoiceId"] for line in result.stdout.splitlines()] == [
        "first",
        "second",
    ]
