"""When a watched invoice was last checked: the record of the pass that covered it.

The monitor does not write a row per invoice per pass. A chain's watched invoices fall into
``SHARDS`` shards by the last two hex digits of their id (random in a version 7 UUID; stored
as ``Invoice.shard``), and each shard has one ``MonitorShard`` row: who leases it
(``monitor.shards``) and when a pass last read every pending (``pending_at``) and every
expired watched invoice (``expired_at``) in it. An invoice's ``lastCheckedAt`` is the later
of its own ``last_checked_at`` (written at creation, when a reading changed it, or when it
stopped being watched) and the time the last pass of its kind over its shard started,
unless:

- its balance was unreadable at its last reading (``Invoice.unreadable``): unknown, so its
  own ``last_checked_at`` (from before) stands;
- it is no longer watched: its ``last_checked_at`` was set when watching stopped.

An invoice created after a pass started shows its own, later, creation time. One created
just before a pass selected its rows but committed just after is not in that pass, yet
nobody could have paid it then: its address is not known outside until its create commits.

The shard rows are few (``SHARDS`` per chain), so showing invoices costs at most one small
query per page of them, and none for invoices that are not watched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.tables.monitor import MonitorShard, shard_of

_PENDING = "pending"


class Covered(Protocol):
    """What deciding an invoice's ``lastCheckedAt`` needs (an ``Invoice``, an
    ``InvoiceRow`` or a monitor pass's Core row)."""

    @property
    def id(self) -> str: ...

    @property
    def chain_id(self) -> int: ...

    @property
    def status(self) -> str: ...

    @property
    def watch(self) -> bool: ...

    @property
    def unreadable(self) -> bool: ...

    @property
    def last_checked_at(self) -> int: ...


def covered_by_passes(invoice: Covered) -> bool:
    """Whether the invoice's ``lastCheckedAt`` can come from its shard's passes."""
    return invoice.watch and not invoice.unreadable


def last_checked(invoice: Covered, record: MonitorShard | None) -> int:
    """The invoice's ``lastCheckedAt`` given its shard's record (None: no pass yet)."""
    own = invoice.last_checked_at
    if record is None or not covered_by_passes(invoice):
        return own
    return max(own, passed_at(record, invoice.status))


def passed_at(record: MonitorShard | None, status: str) -> int:
    """When the last pass over the shard's watched invoices of ``status`` started (0: none)."""
    if record is None:
        return 0
    return record.pending_at if status == _PENDING else record.expired_at


async def shard_records(
    session: AsyncSession, invoices: Sequence[Covered]
) -> dict[tuple[int, int], MonitorShard]:
    """The records of the shards of those ``invoices`` that passes cover (one query; none
    when there are no such invoices)."""
    keys = {(i.chain_id, shard_of(i.id)) for i in invoices if covered_by_passes(i)}
    if not keys:
        return {}
    rows = await session.scalars(
        select(MonitorShard).where(
            tuple_(MonitorShard.chain_id, MonitorShard.shard).in_(sorted(keys))
        )
    )
    return {(row.chain_id, row.shard): row for row in rows}


def last_checked_of(invoice: Covered, records: Mapping[tuple[int, int], MonitorShard]) -> int:
    """The invoice's ``lastCheckedAt`` given ``shard_records``."""
    return last_checked(invoice, records.get((invoice.chain_id, shard_of(invoice.id))))
