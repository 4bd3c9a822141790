"""The invoice lifecycle's decisions (pure: no database, no clock) and how a step is written."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from invoicing.invoices.lifecycle import (
    Effect,
    InvoiceEvent,
    InvoiceStatus,
    Step,
    apply_step,
    awaits_payment,
    late_window_over,
    least_paid_raw,
    on_delete,
    on_reading,
    on_withdrawal_confirmed,
    reading_changes,
    step_events,
)
from invoicing.tables.invoices import Invoice

PENDING, PAID, COMPLETED = InvoiceStatus.PENDING, InvoiceStatus.PAID, InvoiceStatus.COMPLETED
CANCELLED, EXPIRED = InvoiceStatus.CANCELLED, InvoiceStatus.EXPIRED
REQUIRED = 100
EXPIRES_AT = 10_000
WINDOW_MS = 7 * 24 * 3600 * 1000
BALANCE = Effect.RECORD_BALANCE | Effect.TOUCH
BECOMES_PAID = BALANCE | Effect.MARK_PAID | Effect.NOTIFY_PAID | Effect.STOP_WATCHING
DELETED = Effect.MARK_DELETED | Effect.STOP_WATCHING | Effect.TOUCH


@dataclass(frozen=True)
class State:
    """An InvoiceState as the monitor's Core rows carry it (statuses as stored: plain str)."""

    status: str
    balance_raw: str = "0"
    required_raw: str = str(REQUIRED)
    expires_at: int = EXPIRES_AT
    id: str = "invoice-1"
    payment_address: str = "0x" + "ab" * 20
    token_address: str | None = None
    last_checked_at: int = 0
    tolerance_bps: int = 0


def test_statuses_are_the_stored_and_shown_strings() -> None:
    assert [str(status) for status in InvoiceStatus] == [
        "pending",
        "paid",
        "completed",
        "cancelled",
        "expired",
    ]
    assert json.dumps({"status": InvoiceStatus.PAID}) == '{"status": "paid"}'
    assert InvoiceStatus.EXPIRED == "expired"


@pytest.mark.parametrize(
    ("status", "balance", "now_ms", "step"),
    [
        # pending: a full (or larger) payment makes it paid, before and after expiry
        ("pending", REQUIRED, 1, Step(PAID, BECOMES_PAID)),
        ("pending", REQUIRED + 1, 1, Step(PAID, BECOMES_PAID)),
        ("pending", REQUIRED, EXPIRES_AT + 5, Step(PAID, BECOMES_PAID)),
        # pending: a partial payment is recorded; nothing new changes nothing
        ("pending", REQUIRED - 1, 1, Step(PENDING, BALANCE)),
        ("pending", 0, EXPIRES_AT - 1, Step(PENDING)),
        # pending at or past expiry without full payment expires
        ("pending", 0, EXPIRES_AT, Step(EXPIRED, BALANCE)),
        ("pending", REQUIRED - 1, EXPIRES_AT + 1, Step(EXPIRED, BALANCE)),
        # expired: a late full payment makes it paid; a partial one is recorded
        ("expired", REQUIRED, EXPIRES_AT + WINDOW_MS, Step(PAID, BECOMES_PAID)),
        ("expired", REQUIRED - 1, EXPIRES_AT + 1, Step(EXPIRED, BALANCE)),
        ("expired", 0, EXPIRES_AT + 1, Step(EXPIRED)),
        # paid and completed invoices ignore readings
        ("paid", REQUIRED * 2, 1, Step(PAID)),
        ("paid", 0, EXPIRES_AT + 1, Step(PAID)),
        ("completed", REQUIRED, EXPIRES_AT + 1, Step(COMPLETED)),
        ("completed", 5, 1, Step(COMPLETED)),
        # cancelled: the balance is recorded (the escrow is still swept), never paid
        ("cancelled", REQUIRED, 1, Step(CANCELLED, BALANCE)),
        ("cancelled", 0, EXPIRES_AT + 1, Step(CANCELLED)),
    ],
)
def test_a_reading_takes_the_lifecycle_step(
    status: str, balance: int, now_ms: int, step: Step
) -> None:
    invoice = State(status)

    assert on_reading(invoice, balance, now_ms) == step
    assert reading_changes(invoice, balance, now_ms) is (step.effects != Effect.NONE)


def test_a_reading_of_an_unchanged_balance_is_no_change() -> None:
    invoice = State("pending", balance_raw="40")

    assert on_reading(invoice, 40, 1) == Step(PENDING)
    assert on_reading(invoice, 41, 1) == Step(PENDING, BALANCE)
    assert on_reading(State("cancelled", balance_raw="40"), 40, 1) == Step(CANCELLED)


@pytest.mark.parametrize("status", ["pending", "expired"])
def test_a_deleted_invoice_with_a_full_balance_does_not_become_paid(status: str) -> None:
    invoice = State(status)

    assert on_reading(invoice, REQUIRED, 1, deleted=True) == Step(InvoiceStatus(status), BALANCE)
    assert on_reading(invoice, REQUIRED, EXPIRES_AT, deleted=True) == Step(EXPIRED, BALANCE)


@pytest.mark.parametrize(
    ("status", "now_ms", "over"),
    [
        ("expired", EXPIRES_AT + WINDOW_MS, False),
        ("expired", EXPIRES_AT + WINDOW_MS + 1, True),
        ("pending", EXPIRES_AT + WINDOW_MS + 1, False),
        ("paid", EXPIRES_AT + WINDOW_MS + 1, False),
        ("cancelled", EXPIRES_AT + WINDOW_MS + 1, False),
    ],
)
def test_the_monitor_stops_watching_once_the_late_window_is_over(
    status: str, now_ms: int, over: bool
) -> None:
    assert late_window_over(State(status), now_ms, WINDOW_MS) is over


@pytest.mark.parametrize(
    ("status", "step"),
    [
        ("pending", Step(CANCELLED, DELETED)),
        ("expired", Step(CANCELLED, DELETED)),
        ("paid", Step(PAID, DELETED)),
        ("completed", Step(COMPLETED, DELETED)),
        ("cancelled", Step(CANCELLED, DELETED)),
    ],
)
def test_delete_cancels_only_invoices_awaiting_payment(status: str, step: Step) -> None:
    assert on_delete(State(status)) == step


@pytest.mark.parametrize(
    ("status", "step"),
    [
        ("paid", Step(COMPLETED, Effect.MARK_WITHDRAWN | Effect.TOUCH)),
        ("completed", Step(COMPLETED)),
        ("cancelled", Step(CANCELLED)),
        ("expired", Step(EXPIRED)),
    ],
)
def test_a_confirmed_withdrawal_completes_only_paid_invoices(status: str, step: Step) -> None:
    assert on_withdrawal_confirmed(State(status)) == step


@pytest.mark.parametrize(
    ("status", "awaits"),
    [
        ("pending", True),
        ("expired", True),
        ("paid", False),
        ("completed", False),
        ("cancelled", False),
    ],
)
def test_only_pending_and_expired_invoices_await_payment(status: str, awaits: bool) -> None:
    assert awaits_payment(State(status)) is awaits


def row(**fields: object) -> Invoice:
    values: dict[str, object] = {
        "status": "pending",
        "balance_raw": "0",
        "required_raw": str(REQUIRED),
        "paid": False,
        "paid_at": None,
        "withdrawn": False,
        "withdrawn_at": None,
        "deleted_at": None,
        "watch": True,
        "updated_at": 1,
    }
    values.update(fields)
    return Invoice(**values)


def test_apply_step_writes_the_paid_transition() -> None:
    invoice = row()

    apply_step(invoice, on_reading(State("pending"), 150, 500), 500, 150)

    assert (invoice.status, invoice.paid, invoice.paid_at) == ("paid", True, 500)
    assert (invoice.balance_raw, invoice.updated_at, invoice.watch) == ("150", 500, False)
    assert (invoice.deleted_at, invoice.withdrawn) == (None, False)


def test_apply_step_writes_a_delete_and_a_withdrawal() -> None:
    deleted, withdrawn = row(status="expired"), row(status="paid", paid=True, paid_at=3)

    apply_step(deleted, on_delete(deleted), 700)
    apply_step(withdrawn, on_withdrawal_confirmed(withdrawn), 800)

    assert (deleted.status, deleted.deleted_at, deleted.watch) == ("cancelled", 700, False)
    assert (deleted.updated_at, deleted.balance_raw, deleted.paid) == (700, "0", False)
    assert (withdrawn.status, withdrawn.withdrawn, withdrawn.withdrawn_at) == (
        "completed",
        True,
        800,
    )
    assert (withdrawn.updated_at, withdrawn.paid_at, withdrawn.watch) == (800, 3, True)


def test_apply_step_without_effects_changes_nothing() -> None:
    invoice = row(status="paid", balance_raw="150")

    apply_step(invoice, on_reading(invoice, 999, 900), 900, 999)

    assert (invoice.status, invoice.balance_raw, invoice.updated_at) == ("paid", "150", 1)


PAID_E, PARTIAL_E, OVER_E = InvoiceEvent.PAID, InvoiceEvent.PARTIALLY_PAID, InvoiceEvent.OVERPAID
LATE_E, EXPIRED_E = InvoiceEvent.LATE_PAID, InvoiceEvent.EXPIRED


@pytest.mark.parametrize(
    ("status", "balance", "reading", "now", "events"),
    [
        ("pending", "0", 100, 500, (PAID_E,)),
        ("pending", "40", 150, 500, (PAID_E, OVER_E)),
        ("expired", "0", 100, 20_000, (PAID_E, LATE_E)),
        ("expired", "30", 101, 20_000, (PAID_E, LATE_E, OVER_E)),
        ("pending", "0", 40, 500, (PARTIAL_E,)),
        ("pending", "40", 60, 500, (PARTIAL_E,)),
        ("expired", "40", 60, 20_000, (PARTIAL_E,)),
        ("pending", "60", 40, 500, ()),  # a reorg took some back: recorded, no event
        ("pending", "40", 40, 500, ()),
        ("pending", "0", 0, EXPIRES_AT, (EXPIRED_E,)),
        ("pending", "10", 40, EXPIRES_AT, (EXPIRED_E, PARTIAL_E)),
        ("expired", "10", 10, 20_000, ()),
        ("cancelled", "0", 500, 500, ()),
        ("paid", "100", 500, 500, ()),
        ("completed", "100", 500, 500, ()),
    ],
)
def test_each_reading_names_its_events(
    status: str, balance: str, reading: int, now: int, events: tuple[InvoiceEvent, ...]
) -> None:
    invoice = State(status, balance_raw=balance)

    assert step_events(invoice, on_reading(invoice, reading, now), reading) == events


def test_delete_and_withdrawal_name_their_events() -> None:
    for status, events in [
        ("pending", (InvoiceEvent.CANCELLED,)),
        ("expired", (InvoiceEvent.CANCELLED,)),
        ("paid", ()),  # keeps its status: nothing to tell
        ("completed", ()),
    ]:
        invoice = State(status)
        assert step_events(invoice, on_delete(invoice)) == events
    for status, events in [("paid", (InvoiceEvent.COMPLETED,)), ("cancelled", ())]:
        invoice = State(status)
        assert step_events(invoice, on_withdrawal_confirmed(invoice)) == events


def test_apply_step_returns_the_events_of_the_row_before_the_step() -> None:
    invoice = row(status="expired", balance_raw="20")

    events = apply_step(invoice, on_reading(invoice, 130, 20_000), 20_000, 130)

    assert events == (PAID_E, LATE_E, OVER_E)
    assert [str(event) for event in events] == [
        "invoice.paid",
        "invoice.late_paid",
        "invoice.overpaid",
    ]
    assert (invoice.status, invoice.balance_raw) == ("paid", "130")


# ---- underpayment tolerance -------------------------------------------------------------


@pytest.mark.parametrize(
    ("required", "bps", "least"),
    [(100, 0, 100), (100, 100, 99), (100, 500, 95), (10_000, 150, 9_850), (199, 100, 198)],
)
def test_the_least_paying_reading_is_required_less_the_tolerance_rounded_down(
    required: int, bps: int, least: int
) -> None:
    state = State(PENDING, required_raw=str(required), tolerance_bps=bps)
    assert least_paid_raw(state) == least
    assert on_reading(state, least, 0).status == PAID
    assert on_reading(state, least - 1, 0).status == PENDING


def test_an_expired_invoice_is_paid_late_within_its_tolerance() -> None:
    state = State(EXPIRED, tolerance_bps=200)
    assert on_reading(state, 98, EXPIRES_AT + 1) == Step(PAID, BECOMES_PAID)
    assert on_reading(state, 97, EXPIRES_AT + 1).status == EXPIRED


def test_a_payment_under_tolerance_records_its_shortfall_and_a_full_one_none() -> None:
    short = row(tolerance_bps=300)
    apply_step(short, Step(PAID, BECOMES_PAID), 5_000, 97)
    assert (short.status, short.balance_raw, short.shortfall_raw) == (PAID, "97", "3")
    full = row(tolerance_bps=300)
    events = apply_step(full, Step(PAID, BECOMES_PAID), 5_000, 101)
    assert (full.shortfall_raw, events) == (None, (InvoiceEvent.PAID, InvoiceEvent.OVERPAID))
