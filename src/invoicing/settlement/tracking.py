"""Following the relayer's transactions to the end: confirm, re-send, replace or drop.

Everything is read back from the database, so a restarted process resumes where the last
one stopped. Transactions of an earlier relayer key (before a rotation) are followed too, to
the end: re-broadcast when a node forgot them, but never replaced (that needs their key).
A transaction is final only at the chain's confirmation depth; what it then means is up to
its purpose's handler (``settlement.finality``). One is dropped when another transaction
took its nonce, once that one has the confirmation depth and a block over it.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select

from invoicing import logs
from invoicing.chain.answers import RpcError
from invoicing.chain.gateway import ChainGateway
from invoicing.db import Database
from invoicing.services import Services
from invoicing.settlement.backoff import REQUEST_ERRORS
from invoicing.settlement.budget import Limits, after_final
from invoicing.settlement.finality import Final, handler_of
from invoicing.settlement.relayer import Relayer
from invoicing.tables.settlement import RelayerTransaction, TxStatus

log = logging.getLogger(__name__)


async def pending_transactions(
    db: Database, chain_id: int, sender: str | None = None
) -> list[RelayerTransaction]:
    """The pending transactions on ``chain_id`` by nonce: of ``sender``, or of every sender."""
    query = select(RelayerTransaction).where(
        RelayerTransaction.chain_id == chain_id,
        RelayerTransaction.status == TxStatus.PENDING,
    )
    if sender is not None:
        query = query.where(RelayerTransaction.sender == sender)
    async with db.sessions() as session:
        rows = await session.scalars(
            query.order_by(RelayerTransaction.sender, RelayerTransaction.nonce)
        )
        return list(rows)


async def track_pending(
    services: Services, chain: ChainGateway, relayer: Relayer
) -> list[RelayerTransaction]:
    """One pass over the relayer's pending transactions on ``chain``; returns those that
    became final. A JSON-RPC error about one transaction leaves it for the next pass and goes
    on with the others; an unreachable node (ChainUnavailable) ends the pass."""
    rows = await pending_transactions(services.db, chain.config.chain_id)
    if not rows:
        return []
    head = await chain.block_number()
    mined_counts: dict[str, int] = {}
    finished = []
    for row in rows:
        try:
            if row.sender not in mined_counts:
                # Read before the receipts: a nonce below this count whose hashes have no
                # receipt was taken by a transaction that is not ours.
                mined_counts[row.sender] = await chain.transaction_count(row.sender, "latest")
            with logs.bind(tx_hash=row.tx_hash):
                done = await track_one(
                    services, chain, relayer, row, head, mined_counts[row.sender]
                )
        except REQUEST_ERRORS as exc:
            log.warning(
                "relayer chain %s: following %s failed (%s); retrying next pass",
                row.chain_id,
                row.tx_hash,
                exc,
            )
            continue
        if done is not None:
            finished.append(done)
    return finished


async def track_one(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    row: RelayerTransaction,
    head: int,
    mined_count: int,
) -> RelayerTransaction | None:
    receipt = await find_receipt(chain, row.hashes)
    if receipt is not None:
        return await mined(services, chain, row, head, receipt)
    if row.nonce < mined_count:
        # Dropped only when no URL holds a receipt and one reports the nonce mined in the
        # same answer: a URL that lags or hides receipts never fails a mined refund or sweep.
        # And mined by a block with ``confirmations`` blocks over it, not merely at the head:
        # a node may show a new block's state before it serves the block's receipts (anvil
        # under load answers the count past the nonce with no receipt, in one batch, for a
        # transaction it is mining), and a mined sweep dropped is an invoice never completed.
        under = max(0, head - chain.config.confirmations)
        hashes = [str(h) for h in row.hashes]
        use = await chain.nonce_use(row.sender, row.nonce, hashes, under)
        if use.receipt is not None:
            return await mined(services, chain, row, head, use.receipt)
        return await finalize(services, row.id, None) if use.taken else None
    await keep_alive(services, chain, relayer, row)
    return None


async def mined(
    services: Services,
    chain: ChainGateway,
    row: RelayerTransaction,
    head: int,
    receipt: dict[str, Any],
) -> RelayerTransaction | None:
    """Finalize a mined transaction once its receipt's block is at the confirmation depth."""
    if head - receipt["blockNumber"] + 1 < chain.config.confirmations:
        return None
    handler = handler_of(row.purpose)
    readings = None
    if handler is not None and handler.read is not None and receipt["status"] == 1:
        readings = await handler.read(services, chain, row, int(receipt["blockNumber"]))
    return await finalize(services, row.id, receipt, readings)


async def find_receipt(chain: ChainGateway, hashes: list[Any]) -> dict[str, Any] | None:
    """The receipt of whichever signed version was mined (newest first)."""
    for tx_hash in reversed(hashes):
        receipt = await chain.receipt(str(tx_hash))
        if receipt is not None:
            return receipt
    return None


async def keep_alive(
    services: Services, chain: ChainGateway, relayer: Relayer, row: RelayerTransaction
) -> None:
    """Replace a transaction that waited too long; re-send one the node has forgotten. One of
    an earlier relayer key is only re-sent as it was signed."""
    waited_ms = services.clock.now_ms() - row.sent_at
    ours = row.sender == relayer.address
    if ours and waited_ms >= services.settings.relayer_resend_after_s * 1000:
        await relayer.replace(row.id, row.sent_at)
        return
    try:
        known = await chain.is_known_transaction(row.tx_hash)
    except RpcError:
        known = False
    if not known:
        log.info("relayer chain %s: re-sending %s", row.chain_id, row.tx_hash)
        await relayer.broadcast(row)


async def finalize(
    services: Services,
    row_id: str,
    receipt: dict[str, Any] | None,
    readings: Any = None,
) -> RelayerTransaction | None:
    """Mark a transaction confirmed, failed (reverted) or dropped (receipt None), and apply
    what it means by its purpose's handler in the same database transaction (``readings``:
    what that handler read at the receipt's block). A revert sets the transaction's owner
    aside (``settlement.budget``). None if another process got there first."""
    now_ms = services.clock.now_ms()
    async with services.db.transaction() as session:
        row = await session.scalar(
            select(RelayerTransaction)
            .where(RelayerTransaction.id == row_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        if row is None or row.status != TxStatus.PENDING:
            return None
        if receipt is None:
            row.status = TxStatus.DROPPED
        else:
            row.status = TxStatus.CONFIRMED if receipt["status"] == 1 else TxStatus.FAILED
            row.mined_hash = str(receipt["transactionHash"])
            row.block_number = int(receipt["blockNumber"])
            row.gas_used = int(receipt["gasUsed"])
        row.updated_at = now_ms
        limits = Limits.of(services.settings)
        await after_final(session, services.db.dialect, limits, row, now_ms)
        handler = handler_of(row.purpose)
        if handler is not None:
            # The factory is the transaction's own target: a sweep or refund of an escrow a
            # previous factory made went there (``chain.versions``).
            final = Final(row, receipt, row.to_address, now_ms, readings)
            await handler.settle(session, services, final)
    log.info(
        "relayer chain %s: %s nonce %s is %s (%s)",
        row.chain_id,
        row.purpose,
        row.nonce,
        row.status,
        row.mined_hash or row.tx_hash,
    )
    return row
