"""Relaying owner-signed meta-transactions (SetFee, SetPayout and Refund).

The relayer pays their gas, so what one owner can make it spend is bounded
(docs/architecture.md#relayer-spend-rules):

- gas: each call is estimated with at most ``relayer_meta_gas_limit`` gas before anything is
  sent, and sent with no more. An EIP-1271 wallet whose ``isValidSignature`` burns gas fails
  the estimate and is refused (``invalid_owner_signature``);
- repeats: while a transaction for (chain, owner, nonce) is pending, the same request gets
  that transaction back and any other request with the nonce is refused (``nonce_mismatch``).
  The row that holds the nonce is written under the relayer's account lock, which every
  send on the chain takes in every process, and a partial unique index backs it;
- volume: at most ``relayer_meta_per_owner_per_day`` per owner and chain in a UTC day
  (``rate_limited`` with the seconds until the next day), and every send within the relayer's
  daily budget (``settlement.budget``): a signer with no invoice paid on the chain spends
  the newcomers' share, so a flood of fresh wallets shares one owner's share.

Callers check their own rules first (signature, nonce); a revert of the estimate comes back
as ``ContractRevert`` for them to name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import address_bytes
from invoicing.chain.answers import ContractRevert
from invoicing.errors import InvalidOwnerSignature, NonceMismatch, RateLimited
from invoicing.hashing import keccak256
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.settlement.budget import TX_GAS_MIN, check, spender_of
from invoicing.settlement.relayer import Call, GasCapExceeded, OnRecord, relayer_for
from invoicing.tables.settlement import MetaTransaction, RelayerTransaction, TxStatus

DAY_MS = 86_400_000


@dataclass(frozen=True)
class MetaCall:
    """A call an owner signed for the relayer to send, under the owner's factory nonce."""

    chain_id: int
    owner_address: str
    nonce: int
    call: Call

    @property
    def owner_key(self) -> str:
        return self.owner_address.lower()

    @property
    def request_hash(self) -> str:
        """The same for an identical request (target and calldata, signature included)."""
        return "0x" + keccak256(address_bytes(self.call.to) + self.call.data).hex()


class _AlreadySent(Exception):
    """Abandons a send: the identical request is pending as ``row``."""

    def __init__(self, row: RelayerTransaction) -> None:
        super().__init__(row.tx_hash)
        self.row = row


async def relay_meta(
    services: Services, meta: MetaCall, on_hold: OnRecord | None = None
) -> RelayerTransaction:
    """Send ``meta`` from the chain's relayer within the spend limits above; returns its
    transaction, or the pending one of an identical earlier request. Nothing is sent when it
    is refused.

    ``on_hold`` runs under the relayer account lock once the nonce is held, only for a new
    send (it may add rows, or raise to abandon the send)."""
    settings = services.settings
    relayer = relayer_for(services, meta.chain_id)
    async with services.db.sessions() as session:
        held = await _pending_holder(session, meta)
        if held is not None:
            return _same_request(held, meta)
        meta = await _within_budget(session, services, meta)
    try:
        gas = await _simulate(services, meta)
    except ContractRevert:
        # A request for this nonce sent since the check above (by another process) makes the
        # estimate revert against the pending state: answer as that request's holder would.
        async with services.db.sessions() as session:
            held = await _pending_holder(session, meta)
        if held is not None:
            return _same_request(held, meta)
        raise
    now_ms = services.clock.now_ms()

    async def hold_nonce(session: AsyncSession, row: RelayerTransaction) -> None:
        # Under the relayer account lock: the checks above again, now final.
        held = await _pending_holder(session, meta)
        if held is not None:
            sent = _same_request(held, meta)
            session.expunge(sent)  # kept loaded through the rollback that abandons this send
            raise _AlreadySent(sent)
        await _check_budget(session, meta, settings, now_ms)
        await _release_finished(session, meta)
        session.add(
            MetaTransaction(
                relayer_tx_id=row.id,
                chain_id=meta.chain_id,
                owner_key=meta.owner_key,
                nonce=str(meta.nonce),
                request_hash=meta.request_hash,
                holds_nonce=True,
                created_at=now_ms,
            )
        )
        if on_hold is not None:
            await on_hold(session, row)

    try:
        return await relayer.send(meta.call, gas, hold_nonce)
    except _AlreadySent as sent:
        return sent.row


async def dry_run_meta(services: Services, meta: MetaCall) -> None:
    """What ``relay_meta`` would refuse before its send, with nothing sent: the day's
    counts, the budget, and the simulation under the gas cap with the send's fee fields."""
    async with services.db.sessions() as session:
        held = await _pending_holder(session, meta)
        if held is not None:
            _same_request(held, meta)
        meta = await _within_budget(session, services, meta)
    await _simulate(services, meta)


async def _within_budget(session: AsyncSession, services: Services, meta: MetaCall) -> MetaCall:
    """``meta`` with its spender, or 429 when the day's counts or budget have no room."""
    relayer = relayer_for(services, meta.chain_id)
    await _check_budget(session, meta, services.settings, services.clock.now_ms())
    # The call's own spender (a payer's authorization spends its payee owner's share), or
    # the signer's.
    spender = meta.call.spender or await spender_of(session, meta.chain_id, meta.owner_address)
    # Read before the estimate, so a refused flood costs no node call; the send checks
    # again under the relayer account lock.
    now_ms = services.clock.now_ms()
    await check(session, relayer.limits, meta.chain_id, spender, TX_GAS_MIN, now_ms)
    return replace(meta, call=replace(meta.call, spender=spender))


async def _simulate(services: Services, meta: MetaCall) -> int:
    """The gas to send ``meta`` with: its simulation under the gas cap (a revert raises
    ``ContractRevert``)."""
    relayer = relayer_for(services, meta.chain_id)
    try:
        return await relayer.simulate(meta.call, services.settings.relayer_meta_gas_limit)
    except GasCapExceeded as exc:
        raise InvalidOwnerSignature(
            "the owner's signature check needs more gas than the relayer gives",
            {"gasLimit": exc.gas_cap},
        ) from exc


async def pending_duplicate(services: Services, meta: MetaCall) -> RelayerTransaction | None:
    """The pending transaction of an identical earlier request, if there is one (it may be
    mined already, and not yet final)."""
    async with services.db.sessions() as session:
        held = await _pending_holder(session, meta)
    if held is None or held[0].request_hash != meta.request_hash:
        return None
    return held[1]


async def _pending_holder(
    session: AsyncSession, meta: MetaCall
) -> tuple[MetaTransaction, RelayerTransaction] | None:
    found = await session.execute(
        select(MetaTransaction, RelayerTransaction)
        .join(RelayerTransaction, RelayerTransaction.id == MetaTransaction.relayer_tx_id)
        .where(
            MetaTransaction.chain_id == meta.chain_id,
            MetaTransaction.owner_key == meta.owner_key,
            MetaTransaction.nonce == str(meta.nonce),
            MetaTransaction.holds_nonce.is_(True),
            RelayerTransaction.status == TxStatus.PENDING,
        )
        .execution_options(populate_existing=True)
    )
    row = found.first()
    return None if row is None else (row[0], row[1])


def _same_request(
    held: tuple[MetaTransaction, RelayerTransaction], meta: MetaCall
) -> RelayerTransaction:
    """The pending transaction when ``meta`` is the request it carries; 409 otherwise."""
    holder, sent = held
    if holder.request_hash == meta.request_hash:
        return sent
    raise NonceMismatch(
        f"nonce {meta.nonce} is taken by a pending request ({sent.tx_hash}); sign the next one",
        {"expected": str(meta.nonce + 1)},
    )


async def _release_finished(session: AsyncSession, meta: MetaCall) -> None:
    """A final (mined, failed or dropped) transaction no longer holds its nonce."""
    finished = select(RelayerTransaction.id).where(RelayerTransaction.status != TxStatus.PENDING)
    await session.execute(
        update(MetaTransaction)
        .where(
            MetaTransaction.chain_id == meta.chain_id,
            MetaTransaction.owner_key == meta.owner_key,
            MetaTransaction.nonce == str(meta.nonce),
            MetaTransaction.holds_nonce.is_(True),
            MetaTransaction.relayer_tx_id.in_(finished),
        )
        .values(holds_nonce=False)
    )


async def _check_budget(
    session: AsyncSession, meta: MetaCall, settings: Settings, now_ms: int
) -> None:
    """429 when the owner has used the day's meta-transactions on this chain."""
    per_day = settings.relayer_meta_per_owner_per_day
    day_start = now_ms - now_ms % DAY_MS
    used = await session.scalar(
        select(func.count())
        .select_from(MetaTransaction)
        .where(
            MetaTransaction.chain_id == meta.chain_id,
            MetaTransaction.owner_key == meta.owner_key,
            MetaTransaction.created_at >= day_start,
        )
    )
    if int(used or 0) >= per_day:
        retry_after_s = max(1, -(-(day_start + DAY_MS - now_ms) // 1000))
        raise RateLimited(
            f"this owner's relayed transactions on chain {meta.chain_id} are used up for today "
            f"(at most {per_day} a day)",
            retry_after_s,
        )
