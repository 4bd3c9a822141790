"""The settlement worker: follows relayer transactions and sends due withdrawals.

Every ``settlement_poll_interval_s`` it finishes or re-sends pending transactions and sends
full batches; every ``withdrawal_interval_s`` (and at start, so a restart catches up) it
runs a full pass. Each chain has a loop of its own: an unreachable node, a JSON-RPC error
or a database outage fails that chain's step, which is retried with exponential backoff
(up to ``settlement_backoff_max_s``) while the other chains go on; a batch that fails on an
RPC error waits alone (``withdrawals.sweep_with_backoff``). ``withdraw_now`` is the
operator's ``invoicing withdraw --now``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from invoicing import logs
from invoicing.chain.gateway import ChainGateway
from invoicing.db import is_connection_loss
from invoicing.errors import ChainUnavailable
from invoicing.invoices.capture import capture_expired
from invoicing.outage import wait_for_database
from invoicing.services import Services
from invoicing.settlement.backoff import REQUEST_ERRORS, Backoff, retry_delay_s
from invoicing.settlement.budget import Limits
from invoicing.settlement.claims import withdrawal_summary
from invoicing.settlement.parking import parked_escrows
from invoicing.settlement.relayer import Relayer, RelayerUnavailable
from invoicing.settlement.stranded import sweep_other_assets
from invoicing.settlement.tracking import track_pending
from invoicing.settlement.withdrawals import plan_withdrawals
from invoicing.tables.settlement import RelayerTransaction, TxStatus

log = logging.getLogger(__name__)

# What fails one settlement step on one chain: its node (unreachable, or answering errors)
# or the database.
STEP_ERRORS: tuple[type[Exception], ...] = (
    ChainUnavailable,
    *REQUEST_ERRORS,
    SQLAlchemyError,
    OSError,
)


def _relayer(services: Services, chain: ChainGateway) -> Relayer | None:
    try:
        return Relayer(chain, services.db, services.clock, Limits.of(services.settings))
    except RelayerUnavailable:
        return None


async def run(services: Services, stop: asyncio.Event) -> None:
    """Worker loop (registered in ``workers.all_workers``): one loop per chain with a relayer,
    so a chain whose node hangs or fails holds up no other."""
    senders = [(c, r) for c in services.chains.all() if (r := _relayer(services, c))]
    if not senders:
        await stop.wait()  # nothing to send on any chain; returning would be restarted at once
        return
    await asyncio.gather(*(settle_chain(services, c, r, stop) for c, r in senders))


async def settle_chain(
    services: Services, chain: ChainGateway, relayer: Relayer, stop: asyncio.Event
) -> None:
    """Follow and send withdrawals on one chain until ``stop`` is set. A step that fails is
    logged and retried with exponential backoff; it never ends the loop."""
    settings = services.settings
    logs.annotate(chain_id=relayer.chain_id)  # this loop runs in a task of its own
    poll_s = settings.settlement_poll_interval_s
    batches = Backoff(poll_s, settings.settlement_backoff_max_s)
    last_full_ms: int | None = None
    failures = 0
    while not stop.is_set():
        database_lost = False
        now_ms = services.clock.now_ms()
        full = (
            last_full_ms is None or now_ms - last_full_ms >= settings.withdrawal_interval_s * 1000
        )
        try:
            await settlement_step(services, chain, relayer, full, batches)
            failures, delay_s = 0, poll_s
            if full:
                last_full_ms = now_ms
                # The balance metric stays fresh even when nothing needs sending.
                await relayer.read_balance()
        except STEP_ERRORS as exc:
            failures += 1
            delay_s = retry_delay_s(failures + 1, poll_s, settings.settlement_backoff_max_s)
            database_lost = not isinstance(exc, ChainUnavailable) and is_connection_loss(exc)
            log.warning(
                "settlement on chain %s failed (%s); retrying in %.1f s",
                relayer.chain_id,
                exc,
                delay_s,
            )
        except Exception:  # noqa: BLE001 - one chain's fault must not stop the others
            failures += 1
            delay_s = retry_delay_s(failures + 1, poll_s, settings.settlement_backoff_max_s)
            log.exception(
                "settlement on chain %s crashed; retrying in %.1f s", relayer.chain_id, delay_s
            )
        if database_lost:  # or sooner, once the database answers again
            await wait_for_database(services.db, delay_s, stop)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay_s)


async def settlement_step(
    services: Services,
    chain: ChainGateway,
    relayer: Relayer,
    full: bool,
    batches: Backoff | None = None,
    owner_key: str | None = None,
) -> list[RelayerTransaction]:
    """Follow the pending transactions, then send what is due (on a full pass, the
    manual-capture invoices whose capture window is over and the other assets found in
    settled escrows too); returns what was sent."""
    await track_pending(services, chain, relayer)
    if full:  # manual-capture invoices whose capture window is over are swept from now on
        await capture_expired(services, relayer.chain_id, services.clock.now_ms())
    sent = await plan_withdrawals(
        services, chain, relayer, full=full, owner_key=owner_key, backoff=batches
    )
    if full:
        sent += await sweep_other_assets(
            services, chain, relayer, owner_key=owner_key, backoff=batches
        )
    return sent


async def withdraw_now(
    services: Services,
    echo: Callable[[str], None],
    chain_id: int | None = None,
    owner_key: str | None = None,
    timeout_s: float = 300.0,
) -> bool:
    """Sweep everything that is due now and wait until each transaction is final.

    Returns True when every chain answered and every withdrawal sent was confirmed."""
    chains = [services.chains.get(chain_id)] if chain_id is not None else services.chains.all()
    waiting: dict[str, tuple[ChainGateway, Relayer]] = {}
    failed = False
    for chain in chains:
        relayer = _relayer(services, chain)
        if relayer is None:
            echo(f"chain {chain.config.chain_id}: no relayer key configured, skipped")
            continue
        try:
            sent = await settlement_step(services, chain, relayer, True, owner_key=owner_key)
        except STEP_ERRORS as exc:
            echo(f"chain {relayer.chain_id}: failed ({exc}); other chains go on")
            failed = True
            continue
        echo(f"chain {relayer.chain_id}: {len(sent)} withdrawal transaction(s) sent")
        for row in sent:
            summary = await withdrawal_summary(services.db, row.id)
            count, owner = (summary[1], summary[0].owner_address) if summary else (0, "?")
            echo(f"  sent {row.tx_hash} (nonce {row.nonce}): {count} escrow(s) of {owner}")
            waiting[row.id] = (chain, relayer)
        if parked := await parked_escrows(services.db, relayer.chain_id):
            echo(f"chain {relayer.chain_id}: {len(parked)} escrow(s) parked (invoicing parked)")
    confirmed = await _wait_final(services, waiting, echo, timeout_s)
    return confirmed and not failed


async def _wait_final(
    services: Services,
    waiting: dict[str, tuple[ChainGateway, Relayer]],
    echo: Callable[[str], None],
    timeout_s: float,
) -> bool:
    all_confirmed = True
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while waiting:
        for chain, relayer in {id(r): (c, r) for c, r in waiting.values()}.values():
            try:
                await track_pending(services, chain, relayer)
            except STEP_ERRORS as exc:
                echo(f"chain {relayer.chain_id}: following transactions failed ({exc})")
        # Read the outcome back: another process may have finished a transaction first.
        async with services.db.sessions() as session:
            rows = await session.scalars(
                select(RelayerTransaction).where(
                    RelayerTransaction.id.in_(list(waiting)),
                    RelayerTransaction.status != TxStatus.PENDING,
                )
            )
            for row in rows:
                waiting.pop(row.id)
                all_confirmed &= row.status == TxStatus.CONFIRMED
                echo(f"  {row.status} {row.mined_hash or row.tx_hash} in block {row.block_number}")
        if waiting and loop.time() > deadline:
            echo(f"timed out with {len(waiting)} withdrawal(s) still pending; the worker goes on")
            return False
        if waiting:
            await asyncio.sleep(min(0.5, services.settings.settlement_poll_interval_s))
    return all_confirmed
