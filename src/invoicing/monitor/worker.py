"""The monitor worker: one loop per chain, polling the head and running passes over the
shards this worker leases.

Beside the loop a task renews the worker's leases (``monitor.shards``) every third of
``monitor_lease_s``; the passes read the shards held at the time. Every
``monitor_poll_interval_s`` the loop reads ``eth_blockNumber`` (one cheap call). When the
head moved, a block pass reads the pending invoices of those shards so that a payment is
seen within one block; then the due pass reads the shards no pass read within the interval
(pending every 20 s when the head stands still, expired at the lower rate), and every
``lifetime_poll_interval_s`` the lifetime pass reads the escrows whose low-rate lifetime
check is due (``monitor.lifetime``), and the invoices paid since are given their rate at
payment in their owner's reporting currency (``invoices.fiat``). Beside the passes, in a task
of its own, the payments-of-record step (``monitor.records``) reads the transfers behind the
balance changes the passes saw, once per new block; a stop cancels a run under way rather
than wait for it (what it had not written stays queued for the next start).

On a chain whose blocks come at a steady pace (12 s on Ethereum) the head is not polled
every ``monitor_poll_interval_s`` but once the next block is due (``HeadPacer``), so at rest
a block costs about one ``eth_blockNumber`` plus one EscrowReader call for every asset
(``chain.reader``).
An RPC or database outage is logged and retried with exponential backoff; it never ends
the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import statistics
import time
from collections.abc import Sequence

from sqlalchemy.exc import SQLAlchemyError

from invoicing import logs, metrics
from invoicing.chain.gateway import ChainGateway
from invoicing.db import is_connection_loss
from invoicing.errors import ChainUnavailable
from invoicing.invoices.fiat import record_paid_rates
from invoicing.monitor.check import confirmed_at
from invoicing.monitor.lifetime import run_lifetime_pass
from invoicing.monitor.passes import run_block_pass, run_due_pass
from invoicing.monitor.records import run_records_step
from invoicing.monitor.shards import ShardLeases
from invoicing.outage import wait_for_database
from invoicing.services import Services

log = logging.getLogger(__name__)

RECORDS_STOP_WAIT_S = 1.0  # how long a stop waits for a records run under way

MAX_BACKOFF_S = 30.0
# The wait after a failed read of the chain grows to this, no further: the head read is the
# cheapest call there is and the node's return must be noticed at once (payments made
# meanwhile wait for it), while the RPC layer already retries each call and rests a failing
# URL (``INVOICING_RPC_COOLDOWN_S``). Grown to 30 s, a 20 s cut of the node was followed by
# up to 13 s of nothing.
MAX_CHAIN_BACKOFF_S = 2.0


class HeadPacer:
    """When to read the head next, from when it was seen to move.

    Block intervals are estimated from the last ``STEADY_BLOCKS`` head changes (their
    median). When all but one agree with it within ``STEADY_SPREAD`` and they are long (at
    least ``MIN_PACED_POLLS`` polls), the next read waits until the next block is due.
    Otherwise, and after a read that found no new block, it polls every ``poll_s``. A chain
    mining on demand (a dev node) is never steady, so it keeps the plain poll.

    A long pace is set in whole seconds (12 s on Ethereum, 2 s or 5 s elsewhere; block
    timestamps are whole seconds): an estimate within ``WHOLE_SHARE`` of a poll of one is
    taken as that exact pace, and the blocks' phase as the earliest any head was seen since
    the pace was found, counted back at that pace (``_phase_s``; a head is seen after its
    block came, so every sighting is an upper bound and the earliest is the closest). The
    next read is then made ``LATE_SHARE`` of a poll after the next block is due: it finds
    that block, one head read a block, however late reads or passes are (a late read is
    only late, never early). The phase never moves later, so reads do not creep after the
    blocks. (Read a little early, as before, a read found no block as often as not, and a
    second read followed a poll later: up to 2.5 calls a block at rest.) A pace of no whole
    second is read a little early (``EARLY_SHARE`` of a poll).

    A steady pace shorter than that (a block every second) is paced too, by chasing: the
    read waits until a chase step before the next block is due, and when it finds none it
    looks again every ``CHASE_SHARE`` of a poll (for at most one poll, then every poll).
    When a block is due is counted from the recent changes (``_next_due_s``), so a read that
    lagged does not make the next one late. The plain poll, whose
    phase against the blocks is chance, sees a block up to a whole poll late; chasing sees
    it within a fraction of a poll, for about the same number of calls (two per block at 1 s
    blocks and the default 0.5 s poll).
    """

    STEADY_BLOCKS = 4
    STEADY_SPREAD = 0.25
    MIN_PACED_POLLS = 4
    EARLY_SHARE = 0.1
    LATE_SHARE = 0.5
    WHOLE_SHARE = 0.5
    CHASE_SHARE = 0.2

    def __init__(self, poll_s: float, max_wait_s: float) -> None:
        self.poll_s = poll_s
        self.max_wait_s = max_wait_s
        self._changes: list[tuple[int, float]] = []  # (block, time seen), oldest first
        # A whole-second pace and the earliest phase seen at it (block 0's time).
        self._phase: tuple[int, float] | None = None
        self._first: int | None = None  # the first head seen since a start or a gap

    def seen(self, block: int, now_s: float) -> None:
        """The head read at ``now_s`` (monotonic seconds)."""
        if self._changes and block <= self._changes[-1][0]:
            return
        if self._changes and block > self._changes[-1][0] + 1:
            self._changes.clear()  # blocks were missed: the times say nothing of the pace
            self._phase = None
        if not self._changes:
            self._first = block
        self._changes = [*self._changes[-self.STEADY_BLOCKS :], (block, now_s)]

    def interval_s(self) -> float | None:
        """The steady block interval of at least ``MIN_PACED_POLLS`` polls, or None while
        the pace is unknown, uneven or shorter (see ``short_interval_s``)."""
        interval = self._steady_s()
        return interval if interval and interval >= self.MIN_PACED_POLLS * self.poll_s else None

    def short_interval_s(self) -> float | None:
        """The steady block interval when it is shorter than ``MIN_PACED_POLLS`` polls (and
        longer than a chase step); else None."""
        interval = self._steady_s()
        if interval is None or interval <= self.CHASE_SHARE * self.poll_s:
            return None
        return interval if interval < self.MIN_PACED_POLLS * self.poll_s else None

    def _next_due_s(self, interval: float, early_s: float) -> float:
        """When to read for the block after the last one seen, ``early_s`` early.

        Each change was seen some time after its block came (the read's phase against the
        blocks, a pass that held the loop up). Counted back from each change at the pace,
        the last block came no later than the earliest of those estimates: the read that lagged
        least tells the blocks' phase, and a late read is not carried on to the next."""
        last_block = self._changes[-1][0]
        came = min(seen + (last_block - block) * interval for block, seen in self._changes)
        return came + interval - early_s

    def _phase_s(self, interval: float) -> tuple[int, float] | None:
        """A whole-second pace near ``interval`` and when block 0 came at it (the earliest
        estimate since the pace was found); None when the pace is no whole second."""
        # The first head seen after a start or a gap came some time before: not a change.
        changes = [(b, seen) for b, seen in self._changes if b != self._first]
        if len(changes) > 1:  # over the span, a read's lag counts once, not per interval
            interval = (changes[-1][1] - changes[0][1]) / (changes[-1][0] - changes[0][0])
        whole = round(interval)
        if not changes or abs(interval - whole) > self.WHOLE_SHARE * self.poll_s:
            self._phase = None
            return None
        came = min(seen - b * whole for b, seen in changes)
        if self._phase is not None and self._phase[0] == whole:
            came = min(came, self._phase[1])
        self._phase = (whole, came)
        return self._phase

    def _steady_s(self) -> float | None:
        if len(self._changes) <= self.STEADY_BLOCKS:
            return None
        times = [seen for _block, seen in self._changes]
        intervals = [later - earlier for earlier, later in itertools.pairwise(times)]
        typical = statistics.median(intervals)
        # A head read held up by a long pass sees one interval longer than the others: all
        # but one must agree. Reads a poll apart see a block up to a poll late; a chased
        # short pace sees it within a chase step.
        long = typical >= self.MIN_PACED_POLLS * self.poll_s
        jitter = self.poll_s if long else self.CHASE_SHARE * self.poll_s
        spread = self.STEADY_SPREAD * typical + jitter
        agreeing = sum(1 for interval in intervals if abs(interval - typical) <= spread)
        return typical if agreeing >= len(intervals) - 1 else None

    def delay_s(self, now_s: float) -> float:
        """Seconds until the next head read."""
        interval = self.interval_s()
        if interval is not None:
            phase = self._phase_s(interval)
            if phase is None:
                due = self._next_due_s(interval, self.EARLY_SHARE * self.poll_s)
            else:
                whole, came = phase
                due = came + (self._changes[-1][0] + 1) * whole + self.LATE_SHARE * self.poll_s
            return min(self.max_wait_s, max(self.poll_s, due - now_s))
        short = self.short_interval_s()
        if short is None:
            return self.poll_s
        due = self._next_due_s(short, self.CHASE_SHARE * self.poll_s)
        if now_s < due:
            return due - now_s
        # The read that was due found no new block: chase it, for at most one poll.
        return self.CHASE_SHARE * self.poll_s if now_s - due < self.poll_s else self.poll_s


async def run(services: Services, stop: asyncio.Event) -> None:
    """Monitor every configured chain until ``stop`` is set."""
    await asyncio.gather(*(watch_chain(services, chain, stop) for chain in services.chains.all()))


async def watch_chain(services: Services, chain: ChainGateway, stop: asyncio.Event) -> None:
    leases = ShardLeases(services, chain.config.chain_id)
    logs.annotate(chain_id=chain.config.chain_id)  # this loop runs in a task of its own
    renewing = asyncio.create_task(_renew_leases(leases, stop))
    recording: set[asyncio.Task[None]] = set()  # the payments-of-record run under way
    try:
        await _watch(services, chain, leases, stop, recording)
    finally:
        # A stop waits for the records run only briefly: it may have hundreds of queued
        # scans to read, a block (or more) per call, and a call that hangs takes the RPC
        # client's timeout times its attempts. A run that writes finishes within the wait
        # (a cancelled write could leave SQLite's write lock taken); one held up by the node
        # is cancelled. It is resumable: a scan leaves the queue only in the transaction
        # that writes its records, so the next start reads it again.
        if recording:
            await asyncio.wait(set(recording), timeout=RECORDS_STOP_WAIT_S)
        for task in (renewing, *recording):
            task.cancel()
        await asyncio.gather(renewing, *recording, return_exceptions=True)
        with contextlib.suppress(SQLAlchemyError, OSError):
            await leases.release()


async def _renew_leases(leases: ShardLeases, stop: asyncio.Event) -> None:
    every_s = leases.lease_ms / 3000
    while not stop.is_set():
        try:
            await leases.renew()
            delay = every_s
        except (SQLAlchemyError, OSError) as exc:
            log.warning("monitor leases on chain %s not renewed (%s)", leases.chain_id, exc)
            delay = min(every_s, 1.0)
            if is_connection_loss(exc):  # or sooner, once the database answers again
                await wait_for_database(leases.services.db, delay, stop)
                continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)


async def _watch(
    services: Services,
    chain: ChainGateway,
    leases: ShardLeases,
    stop: asyncio.Event,
    recording: set[asyncio.Task[None]],
) -> None:
    poll_s = services.settings.monitor_poll_interval_s
    lifetime_poll_ms = services.settings.lifetime_poll_interval_s * 1000
    chain_id = chain.config.chain_id
    pacer = HeadPacer(poll_s, max_wait_s=services.settings.monitor_interval_s)
    last_block: int | None = None
    last_shards: tuple[int, ...] = ()
    last_lifetime_ms: int | None = None
    recorded_at: int | None = None
    recorded_s = 0.0
    interval_s = services.settings.monitor_interval_s
    changed = False
    failures = 0
    while not stop.is_set():
        database_lost = False
        try:
            head = await chain.block_number()
            pacer.seen(head, time.monotonic())
            block = confirmed_at(chain, head)
            shards = leases.held()
            # Shards just taken over are read at once, like a new block.
            if shards and (block != last_block or not set(shards) <= set(last_shards)):
                # After a start the first block unread is unknown (None: the pass decides).
                first_unread = None if last_block is None else last_block + 1
                with metrics.monitor_pass(chain_id, "block"):
                    passed = await run_block_pass(services, chain, block, first_unread, shards)
                last_block = block
                changed = changed or passed.updated > 0
            last_shards = shards
            result = None
            if shards:
                with metrics.monitor_pass(chain_id, "due"):
                    result = await run_due_pass(services, chain, block, shards)
                changed = changed or result.updated > 0
            # The payments of record, beside the passes (never before them): at a new block,
            # after a pass wrote a change, and every monitor interval (scans a live re-check
            # queued).
            now_s = time.monotonic()
            due = changed or block != recorded_at or now_s - recorded_s >= interval_s
            if due and not recording:
                recorded_at, recorded_s, changed = block, now_s, False
                run = asyncio.create_task(_record_payments(services, chain, block, shards))
                recording.add(run)
                run.add_done_callback(recording.discard)
            now_ms = services.clock.now_ms()
            if last_lifetime_ms is None or now_ms - last_lifetime_ms >= lifetime_poll_ms:
                with metrics.monitor_pass(chain_id, "lifetime"):
                    lifetime = await run_lifetime_pass(services, chain, block)
                # A backlog goes on at the next tick; otherwise wait for the next poll.
                last_lifetime_ms = None if lifetime.more else now_ms
                await record_paid_rates(services.db, chain, now_ms)
            if result is not None and result.unreadable:
                log.info(
                    "monitor pass on chain %s: %d escrow balances unreadable (token balanceOf "
                    "failed); those invoices are left as they were",
                    chain.config.chain_id,
                    result.unreadable,
                )
            failures = 0
            delay = pacer.delay_s(time.monotonic())
        except (ChainUnavailable, SQLAlchemyError, OSError) as exc:
            failures += 1
            cap = MAX_CHAIN_BACKOFF_S if isinstance(exc, ChainUnavailable) else MAX_BACKOFF_S
            delay = min(cap, poll_s * 2**failures)
            database_lost = not isinstance(exc, ChainUnavailable) and is_connection_loss(exc)
            log.warning(
                "monitor pass on chain %s failed (%s); retrying in %.1f s",
                chain.config.chain_id,
                exc,
                delay,
            )
        if database_lost:  # or sooner, once the database answers again
            await wait_for_database(services.db, delay, stop)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)


async def _record_payments(
    services: Services, chain: ChainGateway, block: int, shards: Sequence[int]
) -> None:
    """One run of the payments-of-record step (``monitor.records``); a failure is logged and
    the scans wait for the next run."""
    try:
        await run_records_step(services, chain, block, shards)
    except (ChainUnavailable, SQLAlchemyError, OSError) as exc:
        log.warning("payments of record on chain %s not read (%s)", chain.config.chain_id, exc)
