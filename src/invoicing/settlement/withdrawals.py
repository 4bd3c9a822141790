"""Batched withdrawals: sweep escrows to their owner through ``PaymentFactory.withdraw``.

What is swept is chosen in ``settlement.candidates``. Only escrows whose balance is known and
not zero are swept, and parked ones only when due (``settlement.parking``). A batch whose
withdraw does not simulate is split in halves, down to single escrows; a single escrow that
still fails is parked with the reason while the rest of the batch goes on. An RPC error fails
one batch (or, for an unreachable node, the pass on that chain), never the others.

A pending withdrawal claims its invoices (``settlement.claims``), so an escrow is never swept
twice. What a final withdrawal moved is applied by ``settlement.swept``, registered here as
the withdrawal's handler (``settlement.finality``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import ZERO_ADDRESS
from invoicing.chain.answers import ContractRevert, RpcError
from invoicing.chain.calldata import encode_withdraw
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.reverts import revert_name
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.services import Services
from invoicing.settlement.assets import mark_attempted
from invoicing.settlement.backoff import REQUEST_ERRORS, Backoff
from invoicing.settlement.budget import (
    TX_GAS_MIN,
    BudgetExhausted,
    SetAside,
    Spender,
    check,
    sweep_spender,
)
from invoicing.settlement.candidates import (
    Batch,
    by_owner_and_token,
    escrow_balances,
    group_batches,
    max_batch,
    paid_candidates,
    settled_candidates,
    waiting_candidates,
)
from invoicing.settlement.claims import AlreadyClaimed, claim_invoices, sweep_counts, taken_since
from invoicing.settlement.finality import on_final
from invoicing.settlement.gas import TX_GAS_CAP
from invoicing.settlement.parking import is_due, park, parked_of
from invoicing.settlement.relayer import Call, Relayer
from invoicing.settlement.swept import SWEEP_FINAL
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import (
    ParkedEscrow,
    ParkKind,
    RelayerTransaction,
    TxPurpose,
)

log = logging.getLogger(__name__)

_EMPTY = "the escrow holds nothing to sweep (swept outside this service?)"

# What a sweep should cost, and so the most its transaction may use (``sweep_gas_cap``):
# bench/gas.py measures ~78,000 gas for one native escrow and ~39,000 per escrow at batch 100
# (~89,000 and ~43,000 for TestToken); real tokens cost more per transfer, hence the room.
SWEEP_BASE_GAS = 200_000
SWEEP_ESCROW_GAS = {"native": 60_000, "token": 120_000}
# What one native send to an owner or payout address may cost: the factory's stipend
# (PaymentFactory.NATIVE_SEND_GAS, checked against the contract by
# tests/integration/test_withdraw_recipients.py; a Safe proxy and its `receive` event take
# about 6,300 of it), the call itself (value, cold account, new account) and the credit
# written when the coin is refused. A native sweep makes at most two sends, to the payout
# address and to the owner (with the owner's credit); a token sweep sends native coin found
# beside the token to the same two. A previous factory version's sends are not bounded: there
# the cap alone stops a recipient that burns gas (its sweep is parked).
NATIVE_SEND_GAS = 50_000
NATIVE_SEND_OVERHEAD_GAS = 9_000 + 2_600 + 25_000 + 22_100 + 2_000
NATIVE_SENDS_PER_SWEEP = 2

on_final(TxPurpose.WITHDRAW, SWEEP_FINAL)


@dataclass(frozen=True)
class Planning:
    """One pass on one chain, and what it read before sending anything: how many
    withdrawals each candidate has been part of, the balances, the parked escrows."""

    services: Services
    chain: ChainGateway
    relayer: Relayer
    now_ms: int
    seen: dict[str, int]
    balances: dict[str, int | None]
    parked: dict[str, ParkedEscrow]
    # Set when the pass sweeps another asset found in the escrows (``settlement.stranded``):
    # its asset key. Such an escrow that fails alone is not parked (the invoice's own sweeps
    # go on) but waits for the asset's next read.
    other_asset: str | None = None

    def is_due(self, invoice_id: str) -> bool:
        return is_due(self.balances[invoice_id], self.parked.get(invoice_id), self.now_ms)

    def stale_paid(self, invoices: Sequence[Invoice]) -> list[tuple[Invoice, str, str]]:
        """Paid invoices whose escrow is empty (swept outside this service) or unreadable,
        not parked or due again: parked, so passes stop reading them until they are due."""
        stale = []
        for invoice in invoices:
            balance = self.balances[invoice.id]
            parked = self.parked.get(invoice.id)
            if invoice.status != InvoiceStatus.PAID or (balance is not None and balance > 0):
                continue
            if parked is not None and self.now_ms < parked.next_retry_at:
                continue
            reason = "its balance is unreadable" if balance is None else _EMPTY
            stale.append((invoice, ParkKind.NO_EFFECT, reason))
        return stale


async def plan_withdrawals(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    *,
    full: bool,
    owner_key: str | None = None,
    backoff: Backoff | None = None,
) -> list[RelayerTransaction]:
    """Send the withdrawals that are due on ``chain`` from its relayer; returns their
    relayer transactions.

    A full pass sweeps every waiting paid invoice and settled escrows holding funds; other
    passes only send full batches (``withdrawal_batch_size`` paid invoices of one owner and
    token). A batch that failed on an RPC error waits as ``backoff`` says (one per worker)."""
    settings = services.settings
    size = max_batch(settings.withdrawal_batch_size)
    now_ms = services.clock.now_ms()
    chain_id = chain.config.chain_id
    invoices = await paid_candidates(services.db, chain_id, now_ms, owner_key)
    if full:
        invoices += await settled_candidates(services, chain_id, now_ms, owner_key)
        invoices += await waiting_candidates(services, chain_id, now_ms, owner_key)
    else:
        full_size = settings.withdrawal_batch_size
        invoices = [i for g in by_owner_and_token(invoices) if len(g) >= full_size for i in g]
    if not invoices:
        return []
    planning = await read_planning(services, chain, relayer, invoices, now_ms)
    due = [i for i in invoices if planning.is_due(i.id)]
    if stale := planning.stale_paid(invoices):
        await park_escrows(planning, stale)
    batches = group_batches(chain, due, size)
    if not full:
        batches = [b for b in batches if len(b.invoices) >= settings.withdrawal_batch_size]
    if batches and await relayer.balance_shortfall() is not None:
        return []  # the relayer is under its balance threshold: withdrawals wait (logged)
    if backoff is None:
        backoff = Backoff(settings.settlement_poll_interval_s, settings.settlement_backoff_max_s)
    sent = []
    for batch in batches:
        sent.extend(await sweep_with_backoff(planning, batch, backoff))
    return sent


async def read_planning(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    invoices: Sequence[Invoice],
    now_ms: int,
) -> Planning:
    ids = [invoice.id for invoice in invoices]
    # Counted before the balances are read: a claim checks nothing was swept in between.
    async with services.db.sessions() as session:
        seen = await sweep_counts(session, ids)
        parked = await parked_of(session, ids)
    balances = await escrow_balances(chain, invoices)
    return Planning(services, chain, relayer, now_ms, seen, balances, parked)


async def sweep_with_backoff(
    planning: Planning, batch: Batch, backoff: Backoff
) -> list[RelayerTransaction]:
    """Sweep one batch; an RPC error fails it alone, and it waits before its next try."""
    key = (batch.owner_address.lower(), (batch.token_address or ZERO_ADDRESS).lower())
    if not backoff.ready(key, planning.now_ms):
        return []
    spender = await spender_of(planning, batch)
    refused = await over_budget(planning, batch, spender)
    if refused is not None:
        # Passes run every second: the batch waits until then, logged once.
        backoff.hold(key, planning.now_ms + refused.retry_after_s * 1000)
        return []
    try:
        sent = await sweep_batch(planning, batch, spender)
    except REQUEST_ERRORS as exc:
        delay_s = backoff.failed(key, planning.now_ms)
        log.warning(
            "withdrawal of %s escrow(s) of %s on chain %s failed (%s); retrying in %.1f s",
            len(batch.invoices),
            batch.owner_address,
            planning.relayer.chain_id,
            exc,
            delay_s,
        )
        return []
    backoff.succeeded(key)
    return sent


async def spender_of(planning: Planning, batch: Batch) -> Spender:
    """Whose budget a sweep of ``batch`` spends: the owner's share, which a batch of paid
    invoices may take further by the owner's invoices paid in the last 24 hours
    (``settlement.budget.sweep_spender``)."""
    if not batch.paid:
        return Spender.owner(batch.owner_address)
    relayer = planning.relayer
    async with planning.services.db.sessions() as session:
        return await sweep_spender(
            session, relayer.limits, relayer.chain_id, batch.owner_address, planning.now_ms
        )


async def sweep_batch(
    planning: Planning, batch: Batch, spender: Spender
) -> list[RelayerTransaction]:
    """Simulate and send one withdraw. A batch that does not simulate, or needs more gas
    than it should cost (``sweep_gas_cap``), is split in halves; a single escrow that fails
    is parked."""
    token = batch.token_address or ZERO_ADDRESS
    salts = [bytes.fromhex(i.salt[2:]) for i in batch.invoices]
    call = Call(
        TxPurpose.WITHDRAW,
        batch.factory,
        encode_withdraw(batch.owner_address, token, salts),
        spender=spender,
    )
    try:
        gas = await planning.relayer.simulate(call)
    except RpcError as exc:
        if not fails_in_execution(exc):
            raise
        return await split_or_park(planning, batch, spender, failure_reason(exc))
    cap = sweep_gas_cap(len(batch.invoices), native=token == ZERO_ADDRESS)
    if gas > cap or gas >= TX_GAS_CAP:
        reason = f"needs {gas} gas, more than a sweep of it should cost ({cap})"
        return await split_or_park(planning, batch, spender, reason)
    return await send_batch(planning, batch, call, gas)


def sweep_gas_cap(escrows: int, *, native: bool) -> int:
    """The most gas a sweep of ``escrows`` escrows may use, and its transaction's limit: what
    such a batch should cost, each native send counted at its stipend. An owner or payout
    address that burns gas on receipt costs the relayer at most the stipend per send (the
    factory credits what it refuses); through a previous factory version, a sweep whose
    simulation needs more is parked, and one whose recipient burns more only once mined stops
    at its limit (docs/security.md)."""
    per_escrow = SWEEP_ESCROW_GAS["native" if native else "token"]
    sends = NATIVE_SENDS_PER_SWEEP * (NATIVE_SEND_GAS + NATIVE_SEND_OVERHEAD_GAS)
    return min(TX_GAS_CAP, SWEEP_BASE_GAS + escrows * per_escrow + sends)


def fails_in_execution(exc: RpcError) -> bool:
    """Whether a failed simulation is the call's own failure (a revert, out of gas), as
    opposed to the node's trouble (rate limits, a relayer without funds…)."""
    message = exc.message.lower()
    return isinstance(exc, ContractRevert) or "out of gas" in message or "gas required" in message


def failure_reason(exc: RpcError) -> str:
    """What an operator reads about a failed simulation (node text kept short)."""
    if isinstance(exc, ContractRevert):
        name = revert_name(exc.revert_data)
        if name is not None:
            return f"withdraw reverts with {name}"
        if exc.revert_data:
            return f"withdraw reverts with 0x{exc.revert_data[:36].hex()}"
        return f"withdraw reverts: {exc.message[:200]}"
    return f"withdraw fails: {exc.message[:200]}"


async def split_or_park(
    planning: Planning, batch: Batch, spender: Spender, reason: str
) -> list[RelayerTransaction]:
    if len(batch.invoices) == 1:
        if planning.other_asset is not None:
            await _set_aside(planning, batch.invoices[0], reason)
        else:
            await park_escrows(planning, [(batch.invoices[0], ParkKind.FAILING, reason)])
        return []
    log.info(
        "withdrawal of %s escrow(s) of %s on chain %s: %s; splitting it",
        len(batch.invoices),
        batch.owner_address,
        planning.relayer.chain_id,
        reason,
    )
    half = len(batch.invoices) // 2
    first, rest = batch.part(batch.invoices[:half]), batch.part(batch.invoices[half:])
    return [
        *await sweep_batch(planning, first, spender),
        *await sweep_batch(planning, rest, spender),
    ]


async def _set_aside(planning: Planning, invoice: Invoice, reason: str) -> None:
    assert planning.other_asset is not None
    log.warning(
        "withdrawals on chain %s: asset %s of escrow %s (invoice %s) cannot be swept (%s); "
        "tried again once the lifetime pass reads it again",
        invoice.chain_id,
        planning.other_asset,
        invoice.payment_address,
        invoice.id,
        reason,
    )
    async with planning.services.db.transaction() as session:
        now_ms = planning.services.clock.now_ms()
        await mark_attempted(session, invoice.id, planning.other_asset, now_ms)


async def park_escrows(planning: Planning, parks: Sequence[tuple[Invoice, str, str]]) -> None:
    """Park escrows, each (invoice, ``ParkKind``, reason), in one transaction; one that
    another process swept, claimed or parked since this pass read it is left alone."""
    services = planning.services
    async with services.db.transaction() as session:
        taken = await taken_since(session, [invoice for invoice, _, _ in parks], planning.seen)
        for invoice, kind, reason in parks:
            if invoice.id in taken:
                continue
            await park(
                session,
                services.db.dialect,
                services.settings,
                invoice,
                kind,
                reason,
                planning.balances[invoice.id] or 0,
                planning.now_ms,
                seen=planning.parked.get(invoice.id),
            )


async def send_batch(
    planning: Planning, batch: Batch, call: Call, gas: int
) -> list[RelayerTransaction]:
    """Send a simulated withdraw, claiming its invoices as the transaction is recorded."""

    async def claim(session: AsyncSession, row: RelayerTransaction) -> None:
        now_ms = planning.services.clock.now_ms()
        await claim_invoices(session, batch, row, planning.seen, planning.balances, now_ms)

    try:
        return [await planning.relayer.send(call, gas, claim)]
    except AlreadyClaimed:
        log.info("withdrawal batch for %s was claimed by another process", batch.owner_address)
        return []
    except (BudgetExhausted, SetAside) as exc:
        _waits(planning, batch, exc)
        return []


async def over_budget(
    planning: Planning, batch: Batch, spender: Spender
) -> BudgetExhausted | SetAside | None:
    """Why a sweep of ``batch`` for ``spender`` is refused now (the day's budget has no room,
    or its owner is set aside), or None: read before simulating, so a batch that would be
    refused costs no node call (the send checks again, under the relayer account lock)."""
    relayer = planning.relayer
    try:
        async with planning.services.db.sessions() as session:
            now_ms = planning.now_ms
            await check(session, relayer.limits, relayer.chain_id, spender, TX_GAS_MIN, now_ms)
    except (BudgetExhausted, SetAside) as exc:
        _waits(planning, batch, exc)
        return exc
    return None


def _waits(planning: Planning, batch: Batch, exc: BudgetExhausted | SetAside) -> None:
    log.warning(
        "withdrawal of %s escrow(s) of %s on chain %s waits %s s: %s",
        len(batch.invoices),
        batch.owner_address,
        planning.relayer.chain_id,
        exc.retry_after_s,
        exc,
    )
