"""Sweeping the other assets found in escrows: a token or native coin sent to an escrow
whatever its invoice's own token (``settlement.assets`` finds and records them).

On each full pass, the escrows with another asset waiting (``escrow_assets``, not tried
since it was last seen) whose invoice no payment can change any more (completed, cancelled,
or expired with its late-payment window over: ``candidates.settled_for_good``) are read
again for that asset and swept in batches of one owner and that asset through the same
``withdraw(owner, token, salts)``, with the same claims, splitting and per-batch backoff as
the invoices' own sweeps. A confirmed sweep updates the rows (``swept.settle_withdrawal``);
an escrow that cannot be swept on its own waits for the asset's next read instead of being
parked, so the invoice's own sweeps go on.
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select

from invoicing.chain.gateway import ChainGateway
from invoicing.services import Services
from invoicing.settlement.assets import (
    Escrow,
    Reading,
    asset_token,
    record_readings,
    waiting_to_sweep,
)
from invoicing.settlement.backoff import Backoff
from invoicing.settlement.candidates import (
    MAX_CANDIDATES_PER_PASS,
    batches_of,
    candidates,
    max_batch,
    settled_for_good,
)
from invoicing.settlement.claims import sweep_counts
from invoicing.settlement.relayer import Relayer
from invoicing.settlement.withdrawals import Planning, sweep_with_backoff
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import EscrowAsset, RelayerTransaction


async def waiting_assets(
    services: Services, chain_id: int, now_ms: int, owner_key: str | None = None
) -> dict[str, list[str]]:
    """Invoice ids by asset key: other assets waiting to be swept from settled escrows."""
    window_ms = int(services.settings.late_payment_window_s * 1000)
    conditions = [
        EscrowAsset.chain_id == chain_id,
        waiting_to_sweep(),
        settled_for_good(now_ms, window_ms),
    ]
    if owner_key is not None:
        conditions.append(Invoice.owner_key == owner_key)
    async with services.db.sessions() as session:
        rows = await session.execute(
            select(EscrowAsset.token_address, EscrowAsset.invoice_id)
            .join(Invoice, Invoice.id == EscrowAsset.invoice_id)
            .where(*conditions)
            .order_by(EscrowAsset.token_address, EscrowAsset.invoice_id)
            .limit(MAX_CANDIDATES_PER_PASS)
        )
        found: dict[str, list[str]] = defaultdict(list)
        for key, invoice_id in rows:
            found[key].append(invoice_id)
    return found


async def sweep_other_assets(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    *,
    owner_key: str | None = None,
    backoff: Backoff | None = None,
) -> list[RelayerTransaction]:
    """Send the sweeps of other assets found in settled escrows on ``chain``."""
    settings = services.settings
    if backoff is None:
        backoff = Backoff(settings.settlement_poll_interval_s, settings.settlement_backoff_max_s)
    chain_id = chain.config.chain_id
    sent = []
    now_ms = services.clock.now_ms()
    window_ms = int(settings.late_payment_window_s * 1000)
    for key, ids in (await waiting_assets(services, chain_id, now_ms, owner_key)).items():
        # Read again as candidates: none that a pending withdrawal holds.
        condition = Invoice.id.in_(ids) & settled_for_good(now_ms, window_ms)
        invoices = await candidates(services.db, chain_id, condition, owner_key)
        if invoices:
            sent += await _sweep_asset(services, chain, relayer, key, invoices, backoff)
    return sent


async def _sweep_asset(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    key: str,
    invoices: list[Invoice],
    backoff: Backoff,
) -> list[RelayerTransaction]:
    """Read ``key`` in each escrow now and sweep those holding it, per owner."""
    now_ms = services.clock.now_ms()
    ids = [invoice.id for invoice in invoices]
    async with services.db.sessions() as session:
        seen = await sweep_counts(session, ids)
    token = asset_token(key)
    values = await chain.balances(token, [i.payment_address for i in invoices])
    balances = dict(zip(ids, values, strict=True))
    await _forget_emptied(services, chain.config.chain_id, key, invoices, balances)
    planning = Planning(services, chain, relayer, now_ms, seen, balances, {}, other_asset=key)
    by_owner: dict[str, list[Invoice]] = defaultdict(list)
    for invoice in invoices:
        if balances[invoice.id]:
            by_owner[invoice.owner_key].append(invoice)
    size = max_batch(services.settings.withdrawal_batch_size)
    if by_owner and await relayer.balance_shortfall() is not None:
        return []  # the relayer is under its balance threshold: withdrawals wait (logged)
    sent = []
    for group in by_owner.values():
        for batch in batches_of(chain, group, token, size):
            sent += await sweep_with_backoff(planning, batch, backoff)
    return sent


async def _forget_emptied(
    services: Services,
    chain_id: int,
    key: str,
    invoices: list[Invoice],
    balances: dict[str, int | None],
) -> None:
    """Escrows found empty now (swept elsewhere, refunded) lose their row; the others keep
    theirs as it is until the sweep's outcome."""
    readings = [
        Reading(Escrow(i.id, i.payment_address, i.token_address, i.status), key, 0)
        for i in invoices
        if balances[i.id] == 0
    ]
    if readings:
        now_ms = services.clock.now_ms()
        async with services.db.transaction() as session:
            await record_readings(session, services.db.dialect, chain_id, readings, now_ms)
