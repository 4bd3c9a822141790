"""Application metrics (Prometheus, ``invoicing_*``): every metric the service exports is
defined here, and the code that does the work calls one small function of this module.

Two kinds of figures:

- Counters and histograms of what this process did (invoices created, transitions, webhook
  attempts, RPC requests, HTTP requests, monitor passes, detection lag, gas per swept
  invoice) and the relayer balance it last read. Each process exports its own; Prometheus
  scrapes every process (``invoicing serve`` on its port, ``invoicing worker --metrics-port``)
  and PromQL sums them (docs/operations/metrics.md).
- Gauges of the shared state (webhooks pending and the oldest of them, watched invoices,
  pending relayer transactions) are read from the database when ``/metrics`` is scraped
  (:mod:`invoicing.gauges`, which sits above the domains whose tables it reads), so every
  process answers the same.

This module imports nothing of the service's, so the code at the bottom (the JSON-RPC
client) counts its work here as the domains do.

Counts that belong to a database transaction (transitions, gas per swept invoice) are taken
only once it commits (:func:`after_commit`): a rolled-back attempt is not counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import Counter, Gauge, Histogram
from sqlalchemy import event
from sqlalchemy.orm import Session, object_session

# The transitions an invoice can make (pending is only ever the start).
TRANSITION_TARGETS = ("paid", "expired", "cancelled", "completed")
# Webhook attempt outcomes (``notifications.client.Outcome.kind``).
WEBHOOK_OUTCOMES = ("success", "http_error", "timeout", "refused", "connect_error")
# HTTP requests no route matched share this one label (never the raw path).
UNMATCHED_ROUTE = "unmatched"

_SECONDS_FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
_SECONDS_SLOW = (0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800)

INVOICES_CREATED = Counter(
    "invoicing_invoices_created", "Invoices created (identical retries not counted)", ["chain_id"]
)
INVOICE_TRANSITIONS = Counter(
    "invoicing_invoice_transitions",
    "Invoice status changes, by the status moved to (counted once committed)",
    ["chain_id", "to"],
)
PAYMENT_DETECTION = Histogram(
    "invoicing_payment_detection_seconds",
    "From the paying block's timestamp to the invoice marked paid",
    buckets=_SECONDS_SLOW,
)
MONITOR_PASS = Histogram(
    "invoicing_monitor_pass_seconds",
    "Duration of completed monitor passes (kind: block, due, lifetime)",
    ["chain_id", "kind"],
    buckets=_SECONDS_FAST[3:] + (30, 60, 120),
)
MONITOR_WATCHED = Gauge(
    "invoicing_monitor_watched",
    "Invoices the monitor watches (read from the database at scrape time)",
    ["chain_id"],
)
WEBHOOK_ATTEMPTS = Counter(
    "invoicing_webhook_attempts", "Webhook delivery attempts, by outcome", ["outcome"]
)
WEBHOOK_PENDING = Gauge(
    "invoicing_webhook_pending",
    "Webhook events not yet delivered nor given up (read from the database at scrape time)",
)
WEBHOOK_OLDEST_PENDING = Gauge(
    "invoicing_webhook_oldest_pending_seconds",
    "Age of the oldest pending webhook event, 0 when none (read at scrape time)",
)
RPC_REQUESTS = Counter(
    "invoicing_rpc_requests",
    "JSON-RPC HTTP requests to chain nodes (each attempt), by method and outcome",
    ["chain_id", "method", "outcome"],
)
RPC_SECONDS = Histogram(
    "invoicing_rpc_request_seconds",
    "Duration of JSON-RPC HTTP requests (each attempt)",
    ["chain_id", "method"],
    buckets=_SECONDS_FAST,
)
RELAYER_BALANCE = Gauge(
    "invoicing_relayer_balance_wei",
    "The relayer account's native balance as last read by this process",
    ["chain_id"],
)
RELAYER_PENDING = Gauge(
    "invoicing_relayer_pending_transactions",
    "Relayer transactions sent and not final (read from the database at scrape time)",
    ["chain_id"],
)
WITHDRAWAL_GAS = Histogram(
    "invoicing_withdrawal_gas_per_invoice",
    "Gas used by a confirmed withdrawal divided by the escrows it swept",
    ["chain_id"],
    buckets=(15_000, 25_000, 35_000, 40_000, 45_000, 50_000, 60_000, 80_000, 120_000, 250_000),
)
HTTP_REQUESTS = Counter(
    "invoicing_http_requests",
    "HTTP requests served, by route template, method and status",
    ["route", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "invoicing_http_request_seconds",
    "Duration of HTTP requests, by route template",
    ["route"],
    buckets=_SECONDS_FAST,
)
RELAYER_FEE_CEILING = Counter(
    "invoicing_relayer_fee_ceiling",
    "Relayer transactions left unmined at the chain's max fee per gas (counted once each)",
    ["chain_id"],
)

_AFTER_COMMIT = "invoicing.metrics.after_commit"


def after_commit(session: Session | None, count: Callable[[], None]) -> None:
    """Run ``count`` once ``session``'s transaction commits (dropped on rollback); at once
    when there is no session (a row built outside the database)."""
    if session is None:
        count()
        return
    session.info.setdefault(_AFTER_COMMIT, []).append(count)


@event.listens_for(Session, "after_commit")
def _counted_on_commit(session: Session) -> None:
    for count in session.info.pop(_AFTER_COMMIT, ()):
        count()


@event.listens_for(Session, "after_rollback")
def _dropped_on_rollback(session: Session) -> None:
    session.info.pop(_AFTER_COMMIT, None)


def invoice_created(chain_id: int) -> None:
    INVOICES_CREATED.labels(str(chain_id)).inc()


def invoice_moved(invoice: Any, to: str) -> None:
    """An invoice row's status changed to ``to``: counted when its transaction commits."""
    if to in TRANSITION_TARGETS:
        counter = INVOICE_TRANSITIONS.labels(str(invoice.chain_id), to)
        after_commit(object_session(invoice), counter.inc)


def payment_detected(lag_s: float, count: int = 1) -> None:
    """``count`` invoices were marked paid ``lag_s`` after the paying block's timestamp
    (never negative: a node's clock may run ahead)."""
    for _ in range(count):
        PAYMENT_DETECTION.observe(max(0.0, lag_s))


@contextmanager
def monitor_pass(chain_id: int, kind: str) -> Iterator[None]:
    """Times one monitor pass; a pass that raises is not observed."""
    started = time.perf_counter()
    yield
    MONITOR_PASS.labels(str(chain_id), kind).observe(time.perf_counter() - started)


def webhook_attempt(outcome: str) -> None:
    WEBHOOK_ATTEMPTS.labels(outcome).inc()


def rpc_request(chain_id: int, method: str, outcome: str, seconds: float) -> None:
    chain = str(chain_id)
    RPC_REQUESTS.labels(chain, method, outcome).inc()
    RPC_SECONDS.labels(chain, method).observe(seconds)


def relayer_balance(chain_id: int, balance_wei: int) -> None:
    RELAYER_BALANCE.labels(str(chain_id)).set(balance_wei)


def withdrawal_confirmed(
    session: Session | None, chain_id: int, gas_used: int, escrows: int
) -> None:
    if escrows > 0:
        histogram = WITHDRAWAL_GAS.labels(str(chain_id))
        after_commit(session, lambda: histogram.observe(gas_used / escrows))


def relayer_fee_ceiling(chain_id: int) -> None:
    RELAYER_FEE_CEILING.labels(str(chain_id)).inc()


def http_request(route: str, method: str, status: int, seconds: float) -> None:
    HTTP_REQUESTS.labels(route, method, str(status)).inc()
    HTTP_SECONDS.labels(route).observe(seconds)
