"""The shared-state gauges of :mod:`invoicing.metrics` (webhooks pending and the oldest of
them, watched invoices, pending relayer transactions), read from the database when
``/metrics`` is scraped, so every process answers the same.

It reads the invoice, settlement and webhook tables, so it sits above those domains, while
the metrics themselves stay at the bottom for every layer to count into.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from invoicing import metrics
from invoicing.db import ProcessLocal
from invoicing.services import Services
from invoicing.tables.invoices import Invoice
from invoicing.tables.notifications import EventStatus, WebhookEvent
from invoicing.tables.settlement import RelayerTransaction, TxStatus


class _GaugeReads:
    """The reading of the database gauges in flight in this process, if any."""

    def __init__(self) -> None:
        self.running: asyncio.Future[None] | None = None


_GAUGE_READS: ProcessLocal[_GaugeReads] = ProcessLocal(lambda _db: _GaugeReads())


async def refresh_database_gauges(services: Services) -> None:
    """Read the shared-state gauges from the database (on every scrape, so every process
    answers the same). Scrapes that arrive during a reading share it: however many requests
    /metrics gets at once, one reading at a time runs per process."""
    reads = _GAUGE_READS.of(services.db)
    if reads.running is None or reads.running.done():
        reads.running = asyncio.ensure_future(_read_database_gauges(services))
    await asyncio.shield(reads.running)


async def _read_database_gauges(services: Services) -> None:
    """Three indexed aggregate queries."""
    chains = [str(chain.config.chain_id) for chain in services.chains.all()]
    async with services.db.sessions() as session:
        pending, oldest_ms = (
            await session.execute(
                select(func.count(), func.min(WebhookEvent.created_at)).where(
                    WebhookEvent.status == EventStatus.PENDING
                )
            )
        ).one()
        watched: dict[int, int] = dict(
            (
                await session.execute(
                    select(Invoice.chain_id, func.count())
                    .where(Invoice.watch.is_(True))
                    .group_by(Invoice.chain_id)
                )
            ).all()
        )
        relayer_pending: dict[int, int] = dict(
            (
                await session.execute(
                    select(RelayerTransaction.chain_id, func.count())
                    .where(RelayerTransaction.status == TxStatus.PENDING)
                    .group_by(RelayerTransaction.chain_id)
                )
            ).all()
        )
    now_ms = services.clock.now_ms()
    metrics.WEBHOOK_PENDING.set(pending)
    metrics.WEBHOOK_OLDEST_PENDING.set(
        0 if oldest_ms is None else max(0, now_ms - oldest_ms) / 1000
    )
    for chain_id in {*chains, *map(str, watched), *map(str, relayer_pending)}:
        metrics.MONITOR_WATCHED.labels(chain_id).set(watched.get(int(chain_id), 0))
        metrics.RELAYER_PENDING.labels(chain_id).set(relayer_pending.get(int(chain_id), 0))
