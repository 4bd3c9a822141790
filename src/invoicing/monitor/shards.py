"""Shards of a chain's watched invoices: their pass records, and the leases that split them
between workers.

Every worker watching a chain says it is alive (``MonitorWorker``, renewed with its leases)
and leases an even share of the chain's ``SHARDS`` shards: ceil(shards / live workers). It
renews its leases every third of ``monitor_lease_s``; a worker holding more than its share
(another one has started) hands the extra shards back, and a worker below its share takes
free or expired ones. A killed worker's shards are free once its lease runs out, so its
invoices go unread for at most one lease period; a worker that stops cleanly hands its
shards back at once. No invoice row is locked for this: a lease is a row per shard.

Two workers may still read one shard for a moment (a lease that ran out under a stalled
worker): readings are stored under row locks and the lifecycle decides on the locked row
(``monitor.check.store_balances``), so a payment is marked once.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.db import ProcessLocal, upsert
from invoicing.invoices.lifecycle import InvoiceStatus
from invoicing.services import Services
from invoicing.tables.monitor import SHARDS, MonitorShard, MonitorWorker

# A worker not heard from for this long is forgotten (its row deleted).
FORGET_AFTER_MS = 3600_000


async def load_records(
    services: Services, chain_id: int, shards: Sequence[int]
) -> dict[int, MonitorShard]:
    """The records of ``shards`` that have one, by shard."""
    async with services.db.sessions() as session:
        rows = await session.scalars(
            select(MonitorShard).where(
                MonitorShard.chain_id == chain_id, MonitorShard.shard.in_(list(shards))
            )
        )
        return {row.shard: row for row in rows}


async def record_pass(
    services: Services,
    chain_id: int,
    shards: Sequence[int],
    status: InvoiceStatus,
    at_ms: int,
) -> None:
    """A pass that started at ``at_ms`` read every watched invoice of ``status`` in
    ``shards``: one update (of rows made on first use)."""
    if not shards:
        return
    if status == InvoiceStatus.PENDING:
        values = {"pending_at": at_ms}
        later = MonitorShard.pending_at < at_ms
    else:
        values = {"expired_at": at_ms}
        later = MonitorShard.expired_at < at_ms
    async with services.db.transaction() as session:
        await _ensure_shards(services, session, chain_id)
        await session.execute(
            update(MonitorShard)
            .where(MonitorShard.chain_id == chain_id, MonitorShard.shard.in_(list(shards)), later)
            .values(**values)
            .execution_options(synchronize_session=False)
        )


# The chains whose shard rows this process has seen made, per Database.
_MADE: ProcessLocal[set[int]] = ProcessLocal(lambda _db: set())


async def _ensure_shards(services: Services, session: AsyncSession, chain_id: int) -> None:
    """Make the chain's shard rows unless this process knows they are there (a concurrent
    maker's rows are the same: the insert skips them)."""
    made = _MADE.of(services.db)
    if chain_id in made:
        return
    await session.execute(
        upsert(services.db.dialect, MonitorShard).on_conflict_do_nothing(),
        [
            {
                "chain_id": chain_id,
                "shard": shard,
                "holder": None,
                "lease_until": 0,
                "pending_at": 0,
                "expired_at": 0,
            }
            for shard in range(SHARDS)
        ],
    )
    made.add(chain_id)


class ShardLeases:
    """One worker's leases on one chain's shards."""

    def __init__(self, services: Services, chain_id: int) -> None:
        self.services = services
        self.chain_id = chain_id
        self.worker = uuid.uuid4().hex
        self.lease_ms = int(services.settings.monitor_lease_s * 1000)
        self.shards: tuple[int, ...] = ()
        self._valid_until = 0

    def held(self) -> tuple[int, ...]:
        """The shards this worker may read now (none once its leases may have run out
        without a renewal)."""
        return self.shards if self.services.clock.now_ms() < self._valid_until else ()

    async def renew(self) -> tuple[int, ...]:
        """Say this worker is alive, keep its fair share of shards, hand back the rest and
        take free ones up to the share; returns the shards held."""
        now_ms = self.services.clock.now_ms()
        until = now_ms + self.lease_ms
        chain_id = self.chain_id
        shards = MonitorShard
        async with self.services.db.transaction() as session:
            await _ensure_shards(self.services, session, chain_id)
            await self._alive(session, now_ms, until)
            live = await session.scalar(
                select(func.count())
                .select_from(MonitorWorker)
                .where(MonitorWorker.chain_id == chain_id, MonitorWorker.alive_until >= now_ms)
            )
            share = math.ceil(SHARDS / max(1, int(live or 1)))
            mine = sorted(
                await session.scalars(
                    update(shards)
                    .where(shards.chain_id == chain_id, shards.holder == self.worker)
                    .values(lease_until=until)
                    .returning(shards.shard)
                    .execution_options(synchronize_session=False)
                )
            )
            if len(mine) > share:
                await session.execute(
                    update(shards)
                    .where(shards.chain_id == chain_id, shards.shard.in_(mine[share:]))
                    .values(holder=None, lease_until=0)
                    .execution_options(synchronize_session=False)
                )
                mine = mine[:share]
            elif len(mine) < share:
                free = or_(shards.holder.is_(None), shards.lease_until < now_ms)
                wanted = list(
                    await session.scalars(
                        select(shards.shard)
                        .where(shards.chain_id == chain_id, free)
                        .order_by(shards.shard)
                        .limit(share - len(mine))
                    )
                )
                if wanted:
                    taken = await session.scalars(
                        update(shards)
                        .where(shards.chain_id == chain_id, shards.shard.in_(wanted), free)
                        .values(holder=self.worker, lease_until=until)
                        .returning(shards.shard)
                        .execution_options(synchronize_session=False)
                    )
                    mine = sorted([*mine, *taken])
        self.shards = tuple(mine)
        self._valid_until = until
        return self.shards

    async def _alive(self, session: AsyncSession, now_ms: int, until: int) -> None:
        workers = MonitorWorker
        this = (workers.chain_id == self.chain_id, workers.worker == self.worker)
        updated = await session.execute(update(workers).where(*this).values(alive_until=until))
        if getattr(updated, "rowcount", 0) == 0:
            await session.execute(
                insert(workers).values(
                    chain_id=self.chain_id, worker=self.worker, alive_until=until
                )
            )
            await session.execute(
                delete(workers).where(
                    workers.chain_id == self.chain_id,
                    workers.alive_until < now_ms - FORGET_AFTER_MS,
                )
            )

    async def release(self) -> None:
        """Hand every shard back and stop counting as alive (a clean stop)."""
        async with self.services.db.transaction() as session:
            await session.execute(
                update(MonitorShard)
                .where(MonitorShard.chain_id == self.chain_id, MonitorShard.holder == self.worker)
                .values(holder=None, lease_until=0)
            )
            await session.execute(
                delete(MonitorWorker).where(
                    MonitorWorker.chain_id == self.chain_id, MonitorWorker.worker == self.worker
                )
            )
        self.shards = ()
        self._valid_until = 0
