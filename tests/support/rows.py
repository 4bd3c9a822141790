"""Invoice rows written straight into the database, for tokens the create route would not
accept (hostile test tokens): the tests that need them do not depend on the token rules."""

from __future__ import annotations

import os

from invoicing.chain.gateway import ChainGateway
from invoicing.invoices.insert import time_ordered_id
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.services import Services
from invoicing.tables.invoices import Invoice


async def insert_invoice(
    services: Services,
    chain: ChainGateway,
    owner_address: str,
    token_address: str | None,
    required_raw: int,
    *,
    decimals: int = 6,
    expires_in_ms: int = 3600_000,
    webhook_url: str | None = None,
) -> Invoice:
    """A pending, watched invoice of ``owner_address`` as the create route would store it."""
    now_ms = services.clock.now_ms()
    salt = os.urandom(32)
    async with services.db.transaction() as session:
        invoice_id = str(int.from_bytes(os.urandom(6), "big"))
        invoice = Invoice(
            id=time_ordered_id(now_ms),
            owner_address=owner_address,
            owner_key=owner_address.lower(),
            chain_id=chain.config.chain_id,
            invoice_id=f"row-{invoice_id}",
            payment_address=chain.escrow_address(owner_address, salt),
            salt="0x" + salt.hex(),
            amount=str(required_raw),
            token_address=token_address,
            decimals=decimals,
            required_raw=str(required_raw),
            webhook_url=webhook_url,
            expires_at=now_ms + expires_in_ms,
            status=InvoiceStatus.PENDING,
            paid=False,
            withdrawn=False,
            balance_raw="0",
            last_checked_at=now_ms,
            created_at=now_ms,
            updated_at=now_ms,
            auth_mode="signature",
            auth_signature="0x" + "cd" * 65,
            auth_timestamp="1",
            request_hash="0" * 64,
            watch=True,
            swept_raw="0",
        )
        session.add(invoice)
    return invoice
