"""The per-owner cap on watched invoices (``INVOICING_MAX_WATCHED_INVOICES_PER_OWNER``).

An invoice is watched while the monitor still reads its escrow: pending, or expired within
the late-payment window (``Invoice.watch``). Each one costs every monitor pass on its chain,
so one owner must not grow that work without bound: a create that would take the owner past
the cap is refused with 429 ``rate_limited``.

The count is an index count (``ix_invoices_owner_watched`` holds only watched rows, and the
count stops at the cap) made inside the create transaction, once per owner and batch. An
owner far below the cap is not counted on every batch: the last count, plus what this
process created since, is used for up to ``FRESH_S`` while it stays under ``MARGIN`` of
the cap. Near the cap every batch counts, so the cap holds exactly within a process; other
processes' creates during those few seconds can take an owner at most that far past it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sqlalchemy import Connection, text

FRESH_S = 5.0
MARGIN = 0.9
MAX_OWNERS = 10_000

# ``AND watch`` is the partial index's own predicate, so both databases use it.
_COUNT_WATCHED = text(
    "SELECT count(*) FROM (SELECT 1 FROM invoices WHERE owner_key = :owner_key AND watch "
    "LIMIT :cap) AS watched"
)


def count_watched(connection: Connection, owner_key: str, cap: int) -> int:
    """The owner's watched invoices, counted up to ``cap``."""
    result = connection.execute(_COUNT_WATCHED, {"owner_key": owner_key, "cap": cap})
    return int(result.scalar_one())


@dataclass
class WatchedCounts:
    """This process's recent count of each owner's watched invoices (see module doc)."""

    _counts: dict[str, tuple[int, float]] = field(default_factory=dict)

    def room(self, connection: Connection, owner_key: str, cap: int, wanted: int) -> int:
        """How many of ``wanted`` new invoices the owner may have under ``cap``."""
        now = time.monotonic()
        known = self._counts.get(owner_key)
        if known is None or now - known[1] > FRESH_S or known[0] + wanted > cap * MARGIN:
            if len(self._counts) >= MAX_OWNERS:
                self._counts.clear()
            known = (count_watched(connection, owner_key, cap), now)
            self._counts[owner_key] = known
        return max(0, min(wanted, cap - known[0]))

    def created(self, owner_key: str, count: int) -> None:
        """``count`` invoices of the owner were created (an over-estimate if rolled back,
        which only makes the next count come sooner)."""
        known = self._counts.get(owner_key)
        if known is not None and count:
            self._counts[owner_key] = (known[0] + count, known[1])
