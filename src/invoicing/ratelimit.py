"""Fixed-window request counters in the database, so a limit holds across processes.

``hit`` counts one request against each of its keys in the window that holds ``now_ms``
and raises ``RateLimited`` (429, with ``Retry-After`` until the window ends) when a key is
over its limit. A key names who is counted and for what (``pay-ip:203.0.113.7``,
``api-owner:0xab…``); the window length is the caller's (a minute for requests, an hour for
API-key issuance, a day for a budget).

Two ways to count, both adding in the database so every process sees every other's hits:

- ``hit``: exact. Concurrent hits of a process are counted together (one transaction adds
  each key's hits with one upsert and reads the new totals back) and the request waits for
  that transaction; every hit gets its own place in its window's count, across processes
  too. For limits on costly or rare actions (relayed transactions, API-key issuance).
- ``hit_deferred``: for the high-volume routes (the whole authenticated API, the payment
  page). The request decides at once on this process's view, the database's total as of
  its last write plus the hits since, and never waits for a write: a background write every
  ``FLUSH_INTERVAL_S`` adds the hits. Measured with ``bench/api.py``, waiting for the exact
  count cost the create route about a third of its throughput; deferred, the cost is within
  the bench's noise. The trade-off: a process learns the other processes' hits on a key
  when it writes its own (each write reads the total back), so they are seen up to one
  flush late; N processes can together let about N x (rate x ``FLUSH_INTERVAL_S``) more
  requests through, and a process that dies loses its last unflushed hits.

Rows of windows that are over are deleted by housekeeping (``purge_windows``), never on the
request path.

Public routes count per client network: the web layer's ``client_network``
(``invoicing.web.context``), an IPv4 address or an IPv6 /64.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Connection, Table, delete

from invoicing.coalescer import Coalescer
from invoicing.db import Database, ProcessLocal, upsert
from invoicing.errors import RateLimited
from invoicing.tables.ratelimit import MAX_KEY_LENGTH, RateLimitWindow

log = logging.getLogger(__name__)

WINDOW_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000


async def hit(
    db: Database, keys: Sequence[str], limit: int, now_ms: int, window_ms: int = WINDOW_MS
) -> None:
    """Count one request against each key; 429 when any key is over ``limit`` per window.

    A ``limit`` of 0 or less turns the limit off (nothing is counted)."""
    if limit <= 0 or not keys:
        return
    start = now_ms - now_ms % window_ms
    end = start + window_ms
    counter = _COUNTER.of(db)
    counts = await asyncio.gather(
        *(counter.submit((key[:MAX_KEY_LENGTH], start, end)) for key in keys)
    )
    _refuse_over(max(counts), limit, window_ms, end - now_ms)


async def hit_deferred(
    db: Database, keys: Sequence[str], limit: int, now_ms: int, window_ms: int = WINDOW_MS
) -> Counted:
    """Like ``hit``, deciding on this process's view and writing the count in the background
    (see the module docstring). Returns what it counted, to take back (``Counted.undo``)
    when the request turns out not to be the owner's (a replayed signed request)."""
    if limit <= 0 or not keys:
        return Counted(db, [])
    start = now_ms - now_ms % window_ms
    end = start + window_ms
    counts = _DEFERRED.of(db)
    windows = [(key[:MAX_KEY_LENGTH], start) for key in keys]
    worst = max(counts.add(key, start, end, now_ms) for key, start in windows)
    _refuse_over(worst, limit, window_ms, end - now_ms)
    return Counted(db, windows)


class Counted:
    """The hits one ``hit_deferred`` counted."""

    def __init__(self, db: Database, windows: list[tuple[str, int]]) -> None:
        self._db = db
        self._windows = windows

    def undo(self) -> None:
        """Take the hits back (once): the next write subtracts them if they were written."""
        counts = _DEFERRED.of(self._db)
        for window in self._windows:
            counts.remove(window)
        self._windows = []


def _refuse_over(count: int, limit: int, window_ms: int, left_ms: int) -> None:
    """429 ``rate_limited`` when ``count`` is over ``limit``: retry once the window is over."""
    if count > limit:
        retry_after_s = max(1, -(-left_ms // 1000))
        raise RateLimited(
            f"too many requests; at most {limit} per {_window_text(window_ms)}", retry_after_s
        )


FLUSH_INTERVAL_S = 0.05
_Window = tuple[str, int]  # key, window start


class _DeferredCounts:
    """This process's hits not yet written, and each window's total as last written."""

    MAX_WINDOWS = 50_000

    def __init__(self, db: Database) -> None:
        self._db = db
        self._pending: Counter[_Window] = Counter()
        self._in_flight: Counter[_Window] = Counter()
        self._stored: dict[_Window, int] = {}
        self._ends: dict[_Window, int] = {}
        self._now_ms = 0
        self._flusher: asyncio.Task[None] | None = None

    def add(self, key: str, start: int, end: int, now_ms: int) -> int:
        """Count one hit; returns its place in the window as this process sees it."""
        window = (key, start)
        self._pending[window] += 1
        self._ends[window] = end
        self._now_ms = max(self._now_ms, now_ms)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon())
        return self._stored.get(window, 0) + self._in_flight[window] + self._pending[window]

    def remove(self, window: _Window) -> None:
        """Take back one hit counted with ``add``."""
        self._pending[window] -= 1
        if not self._pending[window]:
            del self._pending[window]
        elif self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon())

    async def flush(self) -> None:
        """Write the pending hits now (and wait for a write under way)."""
        flusher = self._flusher
        if flusher is not None and not flusher.done():
            await asyncio.shield(flusher)
        await self._write_pending()

    async def aclose(self) -> None:
        """Write what is pending before the database goes (``Database.dispose``)."""
        try:
            await self.flush()
        except Exception:  # noqa: BLE001 - shutting down: the counts are only lost
            log.warning("rate-limit counts lost at shutdown", exc_info=True)

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_INTERVAL_S)
        await self._write_pending()

    async def _write_pending(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, Counter()
            self._in_flight = batch
            rows = [
                {"key": k, "window_start_ms": s, "count": n, "expires_at_ms": self._ends[(k, s)]}
                for (k, s), n in sorted(batch.items())
            ]
            try:
                self._stored.update(await _write_counts(self._db, rows))
            except Exception:  # noqa: BLE001 - kept for the next flush, never lost silently
                log.warning("rate-limit counts not written; retrying", exc_info=True)
                self._pending.update(batch)
                return
            finally:
                self._in_flight = Counter()
            self._forget_windows_that_are_over()

    def _forget_windows_that_are_over(self) -> None:
        if len(self._ends) < self.MAX_WINDOWS:
            return
        over = [
            w for w, end in self._ends.items() if end <= self._now_ms and w not in self._pending
        ]
        for window in over:
            self._ends.pop(window, None)
            self._stored.pop(window, None)


async def flush_deferred(db: Database) -> None:
    """Write this process's deferred hits now (tests, and before a process exits)."""
    await _DEFERRED.of(db).flush()


_DEFERRED: ProcessLocal[_DeferredCounts] = ProcessLocal(_DeferredCounts)


def _window_text(window_ms: int) -> str:
    names = {WINDOW_MS: "minute", HOUR_MS: "hour", 24 * HOUR_MS: "day"}
    return names.get(window_ms, f"{window_ms // 1000} s")


async def purge_windows(db: Database, now_ms: int) -> int:
    """Delete the counters of windows that are over (housekeeping); returns how many."""
    async with db.transaction() as session:
        result = await session.execute(
            delete(RateLimitWindow).where(RateLimitWindow.expires_at_ms <= now_ms)
        )
    return int(getattr(result, "rowcount", 0) or 0)


_Hit = tuple[str, int, int]  # key, window start, window end


_COUNTER: ProcessLocal[Coalescer[_Hit, int]] = ProcessLocal(
    lambda db: Coalescer(functools.partial(_count_hits, db))
)


async def _count_hits(db: Database, hits: Sequence[_Hit]) -> list[int | Exception]:
    """Each hit's place in its window's count: the batch adds every key's hits at once."""
    added = Counter((key, start) for key, start, _end in hits)
    ends = {(key, start): end for key, start, end in hits}
    rows = [
        {"key": key, "window_start_ms": start, "count": n, "expires_at_ms": ends[(key, start)]}
        for (key, start), n in sorted(added.items())  # one lock order for every process
    ]
    totals = await _write_counts(db, rows)
    seen: Counter[tuple[str, int]] = Counter()
    places: list[int | Exception] = []
    for key, start, _end in hits:
        seen[(key, start)] += 1
        places.append(totals[(key, start)] - added[(key, start)] + seen[(key, start)])
    return places


# Rows one statement adds (4 parameters each, well under both databases' limits).
_ROWS_PER_STATEMENT = 1000


async def _write_counts(db: Database, rows: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """Add the rows' counts: one statement, without BEGIN and COMMIT, when they fit in one;
    otherwise one transaction of several."""
    if len(rows) <= _ROWS_PER_STATEMENT:
        return await db.run_statement(functools.partial(_add_counts, rows=rows))
    return await db.run_batch(functools.partial(_add_counts_in_parts, rows=rows))


def _add_counts_in_parts(
    connection: Connection, rows: list[dict[str, Any]]
) -> dict[tuple[str, int], int]:
    totals: dict[tuple[str, int], int] = {}
    for start in range(0, len(rows), _ROWS_PER_STATEMENT):
        totals.update(_add_counts(connection, rows[start : start + _ROWS_PER_STATEMENT]))
    return totals


def _add_counts(connection: Connection, rows: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """Add every row's count in one statement (``Database.run_statement``: atomic on its own,
    one round trip); the new totals by (key, window start). The rows come sorted, so
    concurrent writers lock the rows in one order: SQLAlchemy sends an executemany with
    RETURNING as one multi-row statement, the rows in the order given ("insertmanyvalues")."""
    returned = connection.execute(_add_statement(connection.dialect.name), rows)
    return {(str(key), int(start)): int(total) for key, start, total in returned}


@functools.cache
def _add_statement(dialect: str) -> Any:
    """The counting upsert, built once (building a statement of the batch's rows, and its
    cache key, cost more than the flush's other work)."""
    table = cast(Table, RateLimitWindow.__table__)
    insert = upsert(dialect, table)
    return insert.on_conflict_do_update(
        index_elements=[table.c.key, table.c.window_start_ms],
        set_={"count": table.c.count + insert.excluded.count},
    ).returning(table.c.key, table.c.window_start_ms, table.c.count)
