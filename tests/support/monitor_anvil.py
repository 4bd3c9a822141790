"""Invoices paid on anvil while the monitor and webhook workers run, on short intervals."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from eth_account.signers.local import LocalAccount

from invoicing.auth.guard import Caller
from invoicing.chain.abi import encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.artifacts import TEST_TOKEN
from invoicing.chain.evm import EvmClient
from invoicing.invoices.create import NewInvoice, create_invoice
from invoicing.monitor import worker as monitor_worker
from invoicing.notifications import worker as webhook_worker
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.workers import run_workers

PAYER_KEY = DEV_PRIVATE_KEYS[6]
FAST = {
    "monitor_interval_s": 1.0,
    "monitor_poll_interval_s": 0.1,
    "monitor_expired_interval_s": 0.5,
    "webhook_poll_interval_s": 0.05,
    "webhook_retry_delay_s": 0.3,
}


@contextlib.asynccontextmanager
async def running_workers(services: Services) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_workers(services, stop, [monitor_worker.run, webhook_worker.run])
    )
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def open_invoice(
    services: Services,
    owner: LocalAccount,
    amount: str,
    webhook_url: str | None,
    token: str | None = None,
    expires_in_ms: int = 3600_000,
) -> Invoice:
    chain = services.chains.all()[0]
    now_ms = services.clock.now_ms()
    invoice, created = await create_invoice(
        services.db,
        chain,
        NewInvoice(
            owner_address=owner.address,
            chain_id=chain.config.chain_id,
            amount=amount,
            token_address=token,
            webhook_url=webhook_url,
            expires_at=now_ms + expires_in_ms,
        ),
        Caller(owner.address.lower(), "signature", signature="0x" + "ab" * 65, timestamp="17"),
        now_ms,
        86400,
    )
    assert created
    return invoice


async def pay_native(evm: EvmClient, to: str, value: int) -> int:
    receipt = await evm.transact(PAYER_KEY, to, value=value)
    assert receipt["status"] == 1
    return int(receipt["blockNumber"])


async def pay_token(evm: EvmClient, token: str, to: str, amount: int) -> None:
    receipt = await evm.transact(PAYER_KEY, token, encode_call(TEST_TOKEN, "transfer", to, amount))
    assert receipt["status"] == 1


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout_s: float = 15.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
