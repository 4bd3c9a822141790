"""Withdrawals through the service: gas per swept invoice and wall time per batch.

Starts anvil and a fresh SQLite database, creates N paid invoices for one owner (native
coin, then TestToken), sweeps them with the settlement code (plan → simulate → relayer →
confirmation → completed) and prints one line per case, e.g.::

    withdraw native batch=100 per_invoice=38900 plain_transfer=21000 ratio=1.85 wall_ms=310

``plain_transfer`` is measured in the same run (a transfer to a fresh address).

    .venv/bin/python bench/withdrawals.py [--batches 1,10,100]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time

from eth_account import Account
from pydantic import SecretStr

from invoicing.auth.guard import Caller
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_ADDRESSES, DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.config import ChainConfig, TokenConfig
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import ChainGateway
from invoicing.invoices.create import NewInvoice, create_invoice
from invoicing.migrate import upgrade
from invoicing.monitor.check import read_balances, store_balances
from invoicing.services import Services, build_services
from invoicing.settings import Settings
from invoicing.settlement.budget import Limits
from invoicing.settlement.relayer import Relayer
from invoicing.settlement.tracking import track_pending
from invoicing.settlement.withdrawals import plan_withdrawals

SMOKE_HELP = "tiny sizes, seconds in all: that the bench runs, its goals not enforced"

PAYER_KEY = DEV_PRIVATE_KEYS[2]
OWNER = DEV_ADDRESSES[5]  # an existing wallet, as a merchant's would be


async def paid_invoices(services: Services, evm: EvmClient, count: int, token: str | None) -> None:
    chain = services.chains.all()[0]
    invoices = []
    for _ in range(count):
        invoice, _created = await create_invoice(
            services.db,
            chain,
            NewInvoice(OWNER, chain.config.chain_id, "0.001", token_address=token),
            Caller(owner_key=OWNER.lower(), mode="api_key"),
            services.clock.now_ms(),
            3600,
        )
        invoices.append(invoice)
    sent = []
    for invoice in invoices:
        raw = int(invoice.required_raw)
        if token is None:
            tx = await evm.transact(PAYER_KEY, invoice.payment_address, value=raw, wait=False)
        else:
            data = encode_call(TEST_TOKEN, "transfer", invoice.payment_address, raw)
            tx = await evm.transact(PAYER_KEY, token, data, gas=80_000, wait=False)
        sent.append(tx["transactionHash"])
    for tx_hash in sent:
        assert (await evm.wait_for_receipt(tx_hash))["status"] == 1
    block = await evm.block_number()
    balances = await read_balances(chain, invoices, block)
    stored = await store_balances(services, [i.id for i in invoices], balances, block)
    assert all(i.status == "paid" for i in stored.rows)


async def sweep(services: Services, chain: ChainGateway, relayer: Relayer) -> tuple[int, float]:
    """(gas used, wall ms) of sweeping everything that is paid, until confirmed."""
    started = time.perf_counter()
    sent = await plan_withdrawals(services, chain, relayer, full=True)
    assert len(sent) == 1, f"expected one batch, got {len(sent)}"
    finished = await track_pending(services, chain, relayer)
    for _ in range(1000):
        if finished:
            break
        await asyncio.sleep(0.01)
        finished = await track_pending(services, chain, relayer)
    (row,) = finished
    assert row.status == "confirmed" and row.gas_used is not None
    return row.gas_used, (time.perf_counter() - started) * 1000


async def run(batches: list[int]) -> None:
    with AnvilProcess() as anvil:
        evm = EvmClient.connect(anvil.url)
        dev = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])
        url = f"sqlite+aiosqlite:///{tempfile.mkdtemp(prefix='bench-withdraw-')}/bench.db"
        await upgrade(url)
        chain = ChainConfig(
            chain_id=dev.chain_id,
            name="anvil",
            rpc_url=anvil.url,
            factory=dev.factory,
            relayer_key=SecretStr(DEV_PRIVATE_KEYS[0]),
            tokens=(TokenConfig(dev.token, dev.token_symbol, dev.token_decimals),),
        )
        settings = Settings(
            environment="development", database_url=url, chains=[chain], withdrawal_batch_size=1000
        )
        services = build_services(settings)
        gateway = services.chains.all()[0]
        relayer = Relayer(gateway, services.db, services.clock, Limits.of(services.settings))
        plain = {
            "native": (await evm.transact(PAYER_KEY, Account.create().address, value=1))["gasUsed"],
            "erc20": (
                await evm.transact(
                    PAYER_KEY,
                    dev.token,
                    encode_call(TEST_TOKEN, "transfer", Account.create().address, 1),
                )
            )["gasUsed"],
        }
        try:
            for kind, token in (("native", None), ("erc20", dev.token)):
                for batch in batches:
                    await paid_invoices(services, evm, batch, token)
                    gas, wall_ms = await sweep(services, gateway, relayer)
                    per = round(gas / batch)
                    print(
                        f"withdraw {kind} batch={batch} per_invoice={per} "
                        f"plain_transfer={plain[kind]} ratio={per / plain[kind]:.2f} "
                        f"wall_ms={wall_ms:.0f}"
                    )
        finally:
            await services.aclose()
            await evm.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default="1,10,100")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    if args.smoke:
        args.batches = "1,2"
    asyncio.run(run([int(b) for b in args.batches.split(",")]))


if __name__ == "__main__":
    main()
