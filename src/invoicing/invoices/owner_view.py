"""The owner's view of an invoice: the Invoice object with its ``payments`` of record, its
``refunds`` and the ``otherBalances`` found in its escrow.

The owner routes answer with it, and every event carries it as ``data.invoice`` (the invoice
as the move left it). Both read the refund and settlement tables here, through their models
only: the refund and settlement services record events themselves, so reading through them
would bring the services back into the recording of events.

Only invoices flagged ``has_extras`` can have either; the others cost no query.

Those tables come from the tables layer (``tables.refunds``, ``tables.settlement``), below
every package: the refund and settlement packages themselves sit above invoices because
their services move invoices.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.invoices.coverage import last_checked_of, shard_records
from invoicing.invoices.payments import payments_in
from invoicing.invoices.views import invoice_to_dict
from invoicing.tables.invoices import Invoice
from invoicing.tables.refunds import Refund, WalletRefund
from invoicing.tables.settlement import EscrowAsset

# Invoices per statement (bound parameters stay far under both databases' limits).
_CHUNK = 1000


async def owner_views(
    session: AsyncSession,
    payment_page_url: str,
    invoices: Sequence[Invoice],
    x402: frozenset[tuple[int, str]] = frozenset(),
) -> list[dict[str, Any]]:
    """The owner's view of each invoice, in order, within an open session (with the
    ``lastCheckedAt`` of its shard's passes)."""
    records = await shard_records(session, invoices)
    with_extras = sorted({invoice.id for invoice in invoices if invoice.has_extras})
    payments: dict[str, list[dict[str, Any]]] = {}
    refunds: dict[str, list[dict[str, Any]]] = {}
    others: dict[str, list[dict[str, Any]]] = {}
    if with_extras:
        payments = await payments_in(session, with_extras)
        refunds = await refunds_in(session, with_extras)
        others = await other_balances_in(session, with_extras)
    return [
        invoice_to_dict(
            invoice,
            payment_page_url,
            payments=payments.get(invoice.id),
            refunds=refunds.get(invoice.id),
            other_balances=others.get(invoice.id),
            last_checked_at=last_checked_of(invoice, records),
            x402=x402,
        )
        for invoice in invoices
    ]


async def refunds_in(
    session: AsyncSession, invoice_ids: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """The ``refunds`` of each invoice that has some, oldest first, by invoice id: those
    from its escrow and those paid from the owner's wallet after the sweep, in one shape."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    rows = await session.scalars(
        select(Refund)
        .where(Refund.invoice_id.in_(list(invoice_ids)))
        .order_by(Refund.created_at, Refund.relayer_tx_id)
    )
    for refund in rows:
        found[refund.invoice_id].append(refund_view(refund))
    from_wallets = await session.scalars(
        select(WalletRefund)
        .where(WalletRefund.invoice_id.in_(list(invoice_ids)))
        .order_by(WalletRefund.created_at, WalletRefund.tx_hash)
    )
    for paid in from_wallets:
        found[paid.invoice_id].append(wallet_refund_view(paid))
    for listed in found.values():
        listed.sort(key=lambda refund: refund["createdAt"])
    return found


def refund_view(refund: Refund) -> dict[str, Any]:
    """One refund as the owner's view lists it (and ``invoice.refunded`` carries it)."""
    return {
        "txHash": refund.tx_hash,
        "to": refund.to_address,
        "tokenAddress": refund.token_address,
        "amountRaw": refund.amount_raw,
        "status": refund.status,
        "createdAt": refund.created_at,
    }


async def other_balances_in(
    session: AsyncSession, invoice_ids: Sequence[str]
) -> dict[str, list[dict[str, Any]]]:
    """The ``otherBalances`` of each invoice that has some: other allow-listed tokens and
    native coin found in its escrow and not swept yet (``settlement.assets``)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for start in range(0, len(invoice_ids), _CHUNK):
        rows = await session.execute(
            select(EscrowAsset.invoice_id, EscrowAsset.token_address, EscrowAsset.balance_raw)
            .where(
                EscrowAsset.invoice_id.in_(list(invoice_ids[start : start + _CHUNK])),
                EscrowAsset.own.is_(False),
            )
            .order_by(EscrowAsset.invoice_id, EscrowAsset.token_address)
        )
        for invoice_id, key, balance_raw in rows:
            entry = {"tokenAddress": _shown_token(key), "balanceRaw": balance_raw}
            found.setdefault(invoice_id, []).append(entry)
    return found


def wallet_refund_view(refund: WalletRefund) -> dict[str, Any]:
    """A refund paid from the owner's wallet (``refunds.wallet``), in the shape of an escrow
    refund: confirmed, since it is recorded only once mined."""
    return {
        "txHash": refund.tx_hash,
        "to": refund.to_address,
        "tokenAddress": refund.token_address,
        "amountRaw": refund.amount_raw,
        "status": "confirmed",
        "createdAt": refund.created_at,
    }


def _shown_token(key: str) -> str | None:
    return None if key == ZERO_ADDRESS else normalize_address(key)
