"""Two operator processes (`invoicing withdraw --now`) racing never sweep an escrow twice,
nor park a failing one twice."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.evm import EvmClient
from invoicing.tables.settlement import RelayerTransaction, Withdrawal, WithdrawalItem
from tests.conftest import MakeServices
from tests.support.signing import new_owner
from tests.support.withdrawals import (
    balance_of,
    deploy_blocking_token,
    paid_in,
    paid_invoice,
    parked_of,
    reload,
    token_call,
    with_token,
    withdrawals_of,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INVOICING = str(Path(sys.executable).parent / "invoicing")


def chains_file(tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment) -> Path:
    path = tmp_path / "chains.toml"
    path.write_text(
        "[[chain]]\n"
        f"chain_id = {dev.chain_id}\n"
        'name = "Anvil"\n'
        f'rpc_url = "{anvil.url}"\n'
        f'factory = "{dev.factory}"\n'
        "confirmations = 1\n"
        'relayer_key = "env:TEST_RELAYER_KEY"\n'
        "[[chain.token]]\n"
        f'address = "{dev.token}"\n'
        f'symbol = "{dev.token_symbol}"\n'
        f"decimals = {dev.token_decimals}\n"
    )
    return path


async def run_withdraw(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        INVOICING,
        "withdraw",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_two_processes_sweep_each_escrow_once(
    make_services: MakeServices,
    evm: EvmClient,
    anvil: AnvilProcess,
    dev: DevDeployment,
    database_url: str,
    tmp_path: Path,
) -> None:
    services = await make_services()
    owner = new_owner().address
    invoices = [await paid_invoice(services, evm, owner, "0.0002") for _ in range(6)]
    env = {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_ENVIRONMENT": "development",
        "INVOICING_CHAINS_FILE": str(chains_file(tmp_path, anvil, dev)),
        "INVOICING_WITHDRAWAL_BATCH_SIZE": "2",
        "TEST_RELAYER_KEY": services.chains.all()[0].config.relayer_private_key() or "",
    }

    results = await asyncio.gather(
        *(
            run_withdraw(env, "--now", "--owner", owner, "--chain-id", str(dev.chain_id))
            for _ in range(2)
        )
    )

    assert [code for code, _, _ in results] == [0, 0], results
    output = "".join(out for _, out, _ in results)
    assert output.count("escrow(s) of") == 3  # three batches of two, between both processes
    assert output.count("confirmed 0x") == 3
    assert await balance_of(evm, owner) == 6 * 2 * 10**14
    async with services.db.sessions() as session:
        items = await session.scalar(
            select(func.count())
            .select_from(WithdrawalItem)
            .where(WithdrawalItem.invoice_id.in_([i.id for i in invoices]))
        )
        sent = await session.scalar(
            select(func.count())
            .select_from(Withdrawal)
            .join(RelayerTransaction, RelayerTransaction.id == Withdrawal.relayer_tx_id)
            .where(Withdrawal.owner_address == owner)
        )
    assert (items, sent) == (6, 3)
    for invoice in invoices:
        assert (await reload(services, invoice.id)).status == "completed"


async def test_withdraw_command_refuses_bad_options(database_url: str) -> None:
    env = {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_ENVIRONMENT": "development",
    }

    without_now = await run_withdraw(env)
    bad_owner = await run_withdraw(env, "--now", "--owner", "0x1234")
    unknown_chain = await run_withdraw(env, "--now", "--chain-id", "999999")

    assert without_now[0] == 2 and "--now" in without_now[2]
    assert bad_owner[0] == 2 and "--owner" in bad_owner[2]
    assert unknown_chain[0] == 1 and "999999" in unknown_chain[2]


async def test_two_processes_park_each_failing_escrow_once_and_sweep_the_rest_once(
    make_services: MakeServices,
    evm: EvmClient,
    anvil: AnvilProcess,
    dev: DevDeployment,
    database_url: str,
    tmp_path: Path,
) -> None:
    token = await deploy_blocking_token(evm)
    services = await make_services(chain=with_token(dev, token))
    owner = new_owner().address
    failing = [await paid_in(services, evm, owner, "1", token) for _ in range(4)]
    swept = [await paid_invoice(services, evm, owner, "0.0003") for _ in range(2)]
    await token_call(evm, token, "setBlocked", dev.factory, True)  # every withdraw reverts
    env = {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_ENVIRONMENT": "development",
        "INVOICING_CHAINS_FILE": str(chains_file(tmp_path, anvil, dev)),
        "TEST_RELAYER_KEY": services.chains.all()[0].config.relayer_private_key() or "",
    }

    results = await asyncio.gather(
        *(
            run_withdraw(env, "--now", "--owner", owner, "--chain-id", str(dev.chain_id))
            for _ in range(2)
        )
    )

    assert [code for code, _, _ in results] == [0, 0], results
    parked = {p.invoice_id: p for p in await parked_of(services, owner)}
    assert sorted(parked) == sorted(i.id for i in failing)
    assert {(p.kind, p.attempts) for p in parked.values()} == {("failing", 1)}
    assert await balance_of(evm, owner) == 2 * 3 * 10**14
    assert await balance_of(evm, owner, token) == 0
    for invoice in swept:
        assert (await reload(services, invoice.id)).status == "completed"
        assert len(await withdrawals_of(services, invoice.id)) == 1
    for invoice in failing:
        assert (await reload(services, invoice.id)).status == "paid"
        assert await withdrawals_of(services, invoice.id) == []
