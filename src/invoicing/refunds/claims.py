"""Refund claim links (docs/integration/refunds.md#refund-claim-links): a payer who paid from
an exchange cannot receive a refund at the address the payment came from, so the owner sends
them a link to name their own address.

The owner creates the link on a paid or completed invoice's dashboard page: a random token
(32 bytes, URL-safe), stored only as its SHA-256, valid for ``CLAIM_TTL_MS``, one per invoice
(a new link replaces the old one); the owner may revoke it. Whoever opens the link names an
address (EIP-55 checked); naming another replaces it, until the owner approves. The owner's
signed refund to that address is the approval (``approve_in``, called where a refund is
recorded): from then on the address is fixed and the link only shows the state. Nothing is
ever sent to a claimed address without the owner's signature.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.db import Database
from invoicing.errors import Conflict, InvalidRequest, NotFound
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.tables.invoices import Invoice
from invoicing.tables.refunds import RefundClaim

CLAIM_TTL_MS = 14 * 24 * 3600 * 1000
TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)
MAX_ADDRESS_CHARS = 100
CLAIMABLE = (InvoiceStatus.PAID, InvoiceStatus.COMPLETED)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def parse_claim_address(text: str) -> str:
    """The checksummed address a payer typed (spaces around it ignored); InvalidRequest with
    ``details.field`` ``address`` for anything else, the zero address included."""
    value = text.strip()
    if not value or len(value) > MAX_ADDRESS_CHARS:
        raise InvalidRequest("address: required", {"field": "address"})
    try:
        address = normalize_address(value)
    except ValueError as exc:
        raise InvalidRequest(f"address: {exc}", {"field": "address"}) from None
    if address == ZERO_ADDRESS:
        raise InvalidRequest("address: must not be the zero address", {"field": "address"})
    return address


async def create_claim(db: Database, invoice: Invoice, now_ms: int) -> str:
    """A new link's token for ``invoice`` (shown once; only its hash is kept), replacing any
    link it had. 409 unless the invoice is paid or completed."""
    if invoice.status not in CLAIMABLE:
        raise Conflict(
            "a refund claim link is for a paid or completed invoice", {"status": invoice.status}
        )
    token = secrets.token_urlsafe(32)
    async with db.transaction() as session:
        row = await session.get(RefundClaim, invoice.id, with_for_update=True)
        if row is None:
            row = RefundClaim(invoice_id=invoice.id)
            session.add(row)
        row.token_hash = token_hash(token)
        row.created_at = now_ms
        row.expires_at = now_ms + CLAIM_TTL_MS
        row.address = row.claimed_at = row.approved_at = None
    return token


async def revoke_claim(db: Database, invoice_id: str) -> bool:
    """Delete the invoice's link; whether there was one."""
    async with db.transaction() as session:
        result = await session.execute(
            delete(RefundClaim).where(RefundClaim.invoice_id == invoice_id)
        )
    return bool(getattr(result, "rowcount", 0))


async def claim_of(db: Database, invoice_id: str) -> RefundClaim | None:
    async with db.sessions() as session:
        return await session.get(RefundClaim, invoice_id)


async def open_claim(db: Database, token: str, now_ms: int) -> RefundClaim:
    """The live claim of ``token``; 404 when unknown, revoked or expired."""
    async with db.sessions() as session:
        return await _live(session, token, now_ms, lock=False)


async def submit_address(db: Database, token: str, text: str, now_ms: int) -> RefundClaim:
    """Store the payer's address on the claim (replacing an earlier one); 404 as
    ``open_claim``, 400 for a bad address, 409 once the owner approved the claim."""
    async with db.transaction() as session:
        claim = await _live(session, token, now_ms, lock=True)
        address = parse_claim_address(text)
        if claim.approved_at is not None:
            raise Conflict("the merchant already approved this refund; the address is fixed")
        claim.address = address
        claim.claimed_at = now_ms
    return claim


async def _live(session: AsyncSession, token: str, now_ms: int, *, lock: bool) -> RefundClaim:
    if not TOKEN.fullmatch(token):
        raise NotFound("no such refund claim link")
    query = select(RefundClaim).where(RefundClaim.token_hash == token_hash(token))
    claim = await session.scalar(query.with_for_update() if lock else query)
    if claim is None or claim.expires_at <= now_ms:
        raise NotFound("no such refund claim link")
    return claim


async def approve_in(session: AsyncSession, invoice_id: str, to_address: str, now_ms: int) -> None:
    """Mark the invoice's claim approved when the owner's refund goes to its address (in the
    transaction that records the refund)."""
    await session.execute(
        update(RefundClaim)
        .where(
            RefundClaim.invoice_id == invoice_id,
            RefundClaim.address == to_address,
            RefundClaim.approved_at.is_(None),
        )
        .values(approved_at=now_ms)
    )
