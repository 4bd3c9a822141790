"""The settlement worker: follows relayer transactions and sends due withdrawals.

Every ``settlement_poll_interval_s`` it finishes or re-sends pending transactions and sends
full batches; every ``withdrawal_interval_s`` (and at start, so a restart catches up) it
runs a full pass. ``withdraw_now`` is the operator's ``invoicing withdraw --now``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from sqlalchemy import select

from invoicing.chain.gateway import ChainGateway
from invoicing.errors import ChainUnavailable
from invoicing.services import Services
from invoicing.settlement.models import RelayerTransaction, TxStatus
from invoicing.settlement.relayer import Relayer, RelayerUnavailable
from invoicing.settlement.tracking import track_pending
from invoicing.settlement.withdrawals import plan_withdrawals, withdrawal_summary

log = logging.getLogger(__name__)


def _relayer(services: Services, chain: ChainGateway) -> Relayer | None:
    try:
        return Relayer(chain, services.db, services.clock)
    except RelayerUnavailable:
        return None


async def run(services: Services, stop: asyncio.Event) -> None:
    """Worker loop (registered in ``workers.all_workers``)."""
    settings = services.settings
    senders = [(c, r) for c in services.chains.all() if (r := _relayer(services, c))]
    last_full_ms: dict[int, int] = {}
    while not stop.is_set():
        for chain, relayer in senders:
            now_ms = services.clock.now_ms()
            last = last_full_ms.get(relayer.chain_id)
            full = last is None or now_ms - last >= settings.withdrawal_interval_s * 1000
            try:
                await track_pending(services, chain, relayer)
                await plan_withdrawals(services, chain, relayer, full=full)
            except ChainUnavailable as exc:
                log.warning("settlement on chain %s: %s", relayer.chain_id, exc)
                continue
            if full:
                last_full_ms[relayer.chain_id] = now_ms
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=settings.settlement_poll_interval_s)


async def withdraw_now(
    services: Services,
    echo: Callable[[str], None],
    chain_id: int | None = None,
    owner_key: str | None = None,
    timeout_s: float = 300.0,
) -> bool:
    """Sweep everything that is due now and wait until each transaction is final.

    Returns True when every withdrawal sent was confirmed."""
    chains = [services.chains.get(chain_id)] if chain_id is not None else services.chains.all()
    waiting: dict[str, tuple[ChainGateway, Relayer]] = {}
    for chain in chains:
        relayer = _relayer(services, chain)
        if relayer is None:
            echo(f"chain {chain.config.chain_id}: no relayer key configured, skipped")
            continue
        await track_pending(services, chain, relayer)
        sent = await plan_withdrawals(services, chain, relayer, full=True, owner_key=owner_key)
        echo(f"chain {relayer.chain_id}: {len(sent)} withdrawal transaction(s) sent")
        for row in sent:
            summary = await withdrawal_summary(services.db, row.id)
            count, owner = (summary[1], summary[0].owner_address) if summary else (0, "?")
            echo(f"  sent {row.tx_hash} (nonce {row.nonce}): {count} escrow(s) of {owner}")
            waiting[row.id] = (chain, relayer)
    return await _wait_final(services, waiting, echo, timeout_s)


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
            await track_pending(services, chain, relayer)
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
