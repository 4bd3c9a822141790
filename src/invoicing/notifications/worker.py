"""The webhook worker: keeps up to ``webhook_concurrency`` deliveries in flight.

Each delivery runs as its own task, so a slow endpoint (up to the 10 s timeout) holds one
slot and never the others; one owner has at most ``webhook_per_host_concurrency`` attempts
in flight to one host (each owner its own, so one owner cannot hold a host others use; a
host that answers fast as many again claimed and queued behind them, so its slots never
wait for the database) and one owner at most ``webhook_per_owner_concurrency`` slots;
failing endpoints are tried after the others (``claims.claim_events``). Each round writes
the finished attempts and claims the next ones in one transaction
(``Dispatcher.round``). Database outages are logged and retried with backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)

from invoicing.db import is_connection_loss
from invoicing.notifications.claims import (
    Batch,
    ClaimedEvent,
    InFlight,
    OwnerHost,
    claim_batch,
    claim_in,
    signed_delivery,
)
from invoicing.notifications.client import HttpWebhookClient, Outcome, WebhookClient
from invoicing.notifications.delivery import (
    AttemptResult,
    count_results,
    record_results,
    unrecorded,
    write_results,
)
from invoicing.notifications.outbox import OUTBOX_BELL
from invoicing.outage import wait_for_database
from invoicing.outbound.http11 import PoolBounds
from invoicing.services import Services

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
# After a wake-up, results that finish within this window are written in the same batch.
BATCH_WINDOW_S = 0.01
# An attempt delivered within this many milliseconds says its host answers fast: it may
# have attempts queued behind its cap (``claims.Caps.held``).
FAST_MS = 1000


# What a write of results may raise: a database outage (``is_outage``: kept, retried) or
# a refusal of the values (a number out of range, a deleted row: written one by one).
REFUSALS = (SQLAlchemyError, OSError, ValueError, OverflowError)


def is_outage(exc: BaseException) -> bool:
    """Whether a failed write says the database is unreachable, not that it refused a value."""
    if isinstance(exc, OSError | DisconnectionError | OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


def _reason(exc: BaseException) -> str:
    """The first line of an error, short enough for an attempt row and a log line."""
    first = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {first}"[:200]


def client_for(services: Services) -> HttpWebhookClient:
    settings = services.settings
    return HttpWebhookClient(
        timeout_s=settings.webhook_timeout_s,
        allow_private=settings.webhook_allow_private,
        dns_cache_s=settings.webhook_dns_cache_s,
        dns_failure_cache_s=settings.webhook_dns_failure_cache_s,
        dns_threads=settings.webhook_dns_threads,
        dns_timeout_s=settings.webhook_dns_timeout_s,
        pool_bounds=PoolBounds(
            idle_s=settings.webhook_idle_connection_s,
            max_idle=settings.webhook_max_idle_connections,
            max_idle_per_owner=settings.webhook_max_idle_connections_per_owner,
        ),
    )


async def run(services: Services, stop: asyncio.Event) -> None:
    """Deliver due webhook events until ``stop`` is set."""
    client = client_for(services)
    try:
        await Dispatcher(services, client).run(stop)
    finally:
        await client.aclose()


class Dispatcher:
    """Claims events as slots free up, sends each in its own task, records results."""

    def __init__(self, services: Services, client: WebhookClient) -> None:
        self.services = services
        self.client = client
        self.slots = services.settings.webhook_concurrency
        self.in_flight: set[asyncio.Task[None]] = set()
        self.counted = InFlight()  # by owner and host and by owner, for the caps
        self.per_host = services.settings.webhook_per_host_concurrency
        # By (owner, host): at most per_host of one owner's attempts sending to one host.
        self.gates: dict[OwnerHost, asyncio.Semaphore] = {}
        self.results: list[AttemptResult] = []
        self.wake = asyncio.Event()
        self.queued = asyncio.Event()  # the outbox bell's listener while ``run`` runs
        self.more = False  # the last claim may have left due events it could take

    async def run(self, stop: asyncio.Event) -> None:
        # Deliveries committed by this process (a payment the monitor just marked) ring the
        # outbox bell: they are claimed at once rather than at the next poll.
        bell = OUTBOX_BELL.of(self.services.db)
        self.queued = bell.listen()
        try:
            await self._run(stop)
        finally:
            bell.forget(self.queued)
            # Cancelled (a stop past its grace, ``workers``): the attempts still in flight
            # end with it rather than outlive the client; their claims lapse and they are
            # attempted again, as after a crash.
            late = list(self.in_flight)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)

    async def _run(self, stop: asyncio.Event) -> None:
        poll_s = self.services.settings.webhook_poll_interval_s
        failures = 0
        while not stop.is_set():
            # Cleared before looking for work, never after: a delivery that finishes while
            # this round writes and claims wakes the next wait at once (cleared in the wait,
            # its wake-up was lost and the free slots idled for a whole poll interval).
            self.wake.clear()
            self.queued.clear()
            try:
                await self.round()
                failures = 0
                delay = 0.0 if self.more else poll_s
            except (SQLAlchemyError, OSError) as exc:
                failures += 1
                delay = min(MAX_BACKOFF_S, poll_s * 2**failures)
                log.warning("webhook worker: database error (%s); retrying in %.1f s", exc, delay)
                if is_connection_loss(exc):  # or sooner, once the database answers again
                    await wait_for_database(self.services.db, delay, stop)
                    continue
            if delay:
                await self._sleep(stop, delay)
                await asyncio.sleep(BATCH_WINDOW_S)
        await self.drain()

    async def round(self) -> None:
        """Write the finished attempts and claim for the free slots, in one transaction
        (one round trip of the database per round, not two: with a host's slots all busy
        at its cap, the rounds are what its deliveries wait for). A batch of results the
        database refuses is written as ``flush`` does, then the claim runs alone."""
        free = self.slots - len(self.in_flight)
        if not self.results or free <= 0:
            await self.flush()
            await self.claim()
            return
        results, self.results = self.results, []
        self.more = False
        services = self.services
        try:
            async with services.db.transaction() as session:
                await write_results(session, services, results)
                batch = await claim_in(
                    session, services, services.clock.now_ms(), free, self.counted
                )
        except REFUSALS as exc:
            self.results = results + self.results
            if is_outage(exc):
                raise
            await self.flush()
            await self.claim()
            return
        except BaseException:
            self.results = results + self.results
            raise
        count_results(results)
        self.start(batch)

    async def claim(self) -> int:
        """Claim as many events as there are free slots and start sending them; ``more``
        says whether claiming again at once may find more (``claims.Batch``)."""
        free = self.slots - len(self.in_flight)
        self.more = False
        if free <= 0:
            return 0
        now_ms = self.services.clock.now_ms()
        batch = await claim_batch(self.services, now_ms, free, self.counted)
        return self.start(batch)

    def start(self, batch: Batch) -> int:
        """Send each claimed event in a task of its own."""
        self.more, claimed = batch.more, batch.claimed
        for event in claimed:
            self.counted.add(event)
            task = asyncio.create_task(self._deliver(event))
            self.in_flight.add(task)
            task.add_done_callback(self._done)
        return len(claimed)

    async def flush(self) -> None:
        """Write the finished attempts. A database outage keeps them for the next flush; a
        batch the database refuses is written one result at a time (``_record_each``)."""
        results, self.results = self.results, []
        try:
            await record_results(self.services, results)
        except REFUSALS as exc:
            if is_outage(exc):
                self.results = results + self.results
                raise
            log.warning("webhook worker: a batch of results was refused (%s)", _reason(exc))
            await self._record_each(results)
        except BaseException:
            self.results = results + self.results
            raise

    async def _record_each(self, results: list[AttemptResult]) -> None:
        """Write each result on its own; one the database refuses is written as a failed
        attempt with the reason, and one refused even so is dropped (logged): its lease
        ends and it is attempted again, as after a crash, with the next attempt number."""
        for index, result in enumerate(results):
            try:
                refused = await self._record_one(result)
                if refused is not None:
                    refused = await self._record_one(unrecorded(result, _reason(refused)))
            except REFUSALS:  # an outage: this result and the rest wait for the next flush
                self.results = results[index:] + self.results
                raise
            if refused is not None:
                log.error(
                    "webhook event %s attempt %d: result not stored (%s)",
                    result.event_id,
                    result.attempt,
                    _reason(refused),
                )

    async def _record_one(self, result: AttemptResult) -> BaseException | None:
        """Write one result; the error when the database refuses it (an outage raises)."""
        try:
            await record_results(self.services, [result])
        except REFUSALS as exc:
            if is_outage(exc):
                raise
            return exc
        return None

    async def drain(self) -> None:
        """Let attempts in flight finish and record them (on shutdown)."""
        if self.in_flight:
            await asyncio.wait(set(self.in_flight))
        with contextlib.suppress(SQLAlchemyError, OSError):
            await self.flush()

    async def _deliver(self, event: ClaimedEvent) -> None:
        host, pair = event.endpoint_host, (event.owner_key, event.endpoint_host)
        gate = self.gates.get(pair)
        if gate is None:
            gate = self.gates[pair] = asyncio.Semaphore(self.per_host)
        outcome = None
        try:
            async with gate:  # queued (``claims.Caps.held``) until one of the host's slots frees
                attempted_at = self.services.clock.now_ms()
                try:
                    outcome = await self.client.send(signed_delivery(event, attempted_at))
                except Exception as exc:  # a client defect: a failed attempt, never a lost one
                    log.exception("webhook event %s: the client raised", event.event_id)
                    outcome = Outcome(error=f"{type(exc).__name__}: {exc}"[:500])
        finally:
            if outcome is not None:
                self.counted.answered(host, outcome.delivered and outcome.duration_ms < FAST_MS)
            self.counted.remove(event)
            if pair not in self.counted.owner_hosts:
                self.gates.pop(pair, None)  # nothing of its claimed is left to wait on it
        assert outcome is not None  # set, or the exception went on
        log.debug(
            "webhook event %s attempt %d to %s: %s in %d ms",
            event.event_id,
            event.attempt,
            event.endpoint_host,
            outcome.kind,
            outcome.duration_ms,
        )
        self.results.append(AttemptResult.of(event, attempted_at, outcome))

    def _done(self, task: asyncio.Task[None]) -> None:
        self.in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("webhook delivery task failed", exc_info=task.exception())
        self.wake.set()

    async def _sleep(self, stop: asyncio.Event, delay: float) -> None:
        """Wait until the delay passes, a delivery finishes (free slot), new deliveries are
        committed in this process, or stop is set; one of those since the round began ends
        it at once."""
        waiters = [
            asyncio.ensure_future(stop.wait()),
            asyncio.ensure_future(self.wake.wait()),
            asyncio.ensure_future(self.queued.wait()),
        ]
        try:
            await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
