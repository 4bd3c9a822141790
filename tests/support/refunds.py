"""Refunds on the test chain: the signed refund-meta body, the recorded refunds, an invoice
moved past its expiry."""

from __future__ import annotations

import time
from typing import Any

from eth_account.signers.local import LocalAccount
from sqlalchemy import select, update

from invoicing.chain.deploy import DevDeployment
from invoicing.chain.eip712 import refund_typed_data, set_refund_delegate_typed_data
from invoicing.chain.evm import EvmClient
from invoicing.monitor.check import recheck_invoice
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.refunds import Refund
from tests.conftest import RunningApp
from tests.support.api import key_headers
from tests.support.withdrawals import reload, settle_all, sign_typed

REFUND = "/integration/invoices/refund-meta"
DELEGATE = "/integration/refund-delegate"
INVOICE_TOKEN = object()  # tokenAddress left out of the body: the invoice's token


async def deadline(evm: EvmClient, offset_s: int = 3600) -> int:
    """In the future for both the service's clock and the chain's."""
    block = await evm.get_block("latest")
    return max(int(time.time()), int(block["timestamp"], 16)) + offset_s


async def refund_body(
    evm: EvmClient,
    dev: DevDeployment,
    owner: LocalAccount,
    invoice: Invoice,
    to: str,
    amount: int,
    *,
    token: Any = INVOICE_TOKEN,
    nonce: int = 0,
    deadline_s: int | None = None,
    signer: LocalAccount | None = None,
) -> dict[str, Any]:
    """A refund-meta body with the EIP-712 Refund signed by ``signer`` (the owner)."""
    deadline_s = await deadline(evm) if deadline_s is None else deadline_s
    signed_token = invoice.token_address if token is INVOICE_TOKEN else token
    typed = refund_typed_data(
        dev.chain_id, dev.factory, owner.address, bytes.fromhex(invoice.salt[2:]),
        signed_token, to, amount, nonce, deadline_s,
    )  # fmt: skip
    body: dict[str, Any] = {
        "ownerAddress": owner.address,
        "chainId": dev.chain_id,
        "paymentAddress": invoice.payment_address,
        "to": to,
        "amountRaw": str(amount),
    }
    if token is not INVOICE_TOKEN:
        body["tokenAddress"] = token
    body.update(
        nonce=str(nonce),
        deadline=str(deadline_s),
        signature="0x" + sign_typed(signer or owner, typed).hex(),
    )
    return body


async def refund_rows(services: Services, *invoice_ids: str) -> list[Refund]:
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(Refund).where(Refund.invoice_id.in_(invoice_ids)).order_by(Refund.created_at)
        )
        return list(rows)


async def expire(services: Services, invoice: Invoice) -> Invoice:
    """Move the invoice's expiry into the past; the live re-check marks it expired."""
    async with services.db.transaction() as session:
        await session.execute(
            update(Invoice)
            .where(Invoice.id == invoice.id)
            .values(expires_at=services.clock.now_ms() - 1000)
        )
    await recheck_invoice(services, await reload(services, invoice.id))
    expired = await reload(services, invoice.id)
    assert expired.status == "expired"
    return expired


async def set_delegate(
    app: RunningApp, evm: EvmClient, dev: DevDeployment, owner: LocalAccount, api_key: str,
    delegate: str, nonce: int,
) -> None:  # fmt: skip
    """The owner names ``delegate`` its refund delegate (the zero address revokes); relayed
    and settled."""
    deadline_s = await deadline(evm)
    typed = set_refund_delegate_typed_data(
        dev.chain_id, dev.factory, owner.address, delegate, nonce, deadline_s
    )
    answer = await app.http.post(
        DELEGATE,
        json={
            "ownerAddress": owner.address,
            "chainId": dev.chain_id,
            "delegate": delegate,
            "nonce": str(nonce),
            "deadline": str(deadline_s),
            "signature": "0x" + sign_typed(owner, typed).hex(),
        },
        headers=key_headers(api_key),
    )
    assert answer.status_code == 202, answer.text
    await settle_all(app.services)
