"""The invoice lifecycle (docs/architecture.md#invoice-lifecycle): its states, what moves an
invoice between them, and what goes with each move. "When is an invoice paid?" is answered
here and only here.

::

      POST /integration/invoices
                │
                ▼        full balance read                    withdrawal confirmed
            pending ──────────────────────────────▶ paid ──────────────────────────▶ completed
             │   │                                   ▲
             │   │ expiresAt passed                  │ full balance read (a late payment,
             │   ▼                                   │ until the late-payment window closes)
             │  expired ─────────────────────────────┘
             │   │  └── late-payment window over: the monitor stops reading it
      DELETE │   │ DELETE
             ▼   ▼
            cancelled

===========  ==================================================  ===========  ================
from         event (who triggers it)                              to           also
===========  ==================================================  ===========  ================
pending,     reading >= requiredRaw less the tolerance (monitor       paid         balance, paid,
expired      pass, or the status lookup's and the payment page's               paidAt, stop
             live re-check), the invoice not deleted                           watching, paid
                                                                               webhook;
                                                                               shortfall if
                                                                               under
                                                                               requiredRaw
pending      reading short of paid at or after expiresAt          expired      balance
pending,     any other reading                                    (same)       balance if it
expired                                                                        changed
cancelled    reading                                              cancelled    balance if it
                                                                               changed
paid,        reading                                              (same)       nothing
completed
expired      monitor claim after expiresAt + late-payment window  expired      stop watching
pending,     DELETE /integration/invoices                         cancelled    deletedAt, stop
expired                                                                        watching
paid,        DELETE /integration/invoices                         (same)       deletedAt, stop
completed                                                                      watching
paid         a confirmed withdrawal moved the escrow's funds      completed    withdrawn,
             (one that moved nothing leaves it paid, parked)                   withdrawnAt
others       a withdrawal sweeping late funds is confirmed        (same)       nothing
paid         POST /integration/invoices/capture, or the end of    (same)       capturedAt
(manual)     the owner's capture window (``invoices.capture``)
paid         a confirmed void (the payment refunded to the payer) cancelled    voidedAt
(manual)
===========  ==================================================  ===========  ================

An invoice created with ``capture: "manual"`` is swept only once captured: until then its
paid funds wait in the escrow, and its owner may void it instead (``invoices.capture``).

Each move also names the events it writes (docs/architecture.md#events; :func:`apply_step` returns
them, the caller records them in the same transaction with ``invoices.notify.record_events``):

====================================================  ==========================================
move                                                  events
====================================================  ==========================================
pending → paid                                        ``invoice.paid``
expired → paid (a late full payment)                  ``invoice.paid``, ``invoice.late_paid``
→ paid with more than requiredRaw                     also ``invoice.overpaid``
pending/expired: a higher balance below requiredRaw   ``invoice.partially_paid``
pending → expired                                     ``invoice.expired`` (and ``partially_paid``
                                                      if the same reading raised the balance)
pending/expired → cancelled (DELETE)                  ``invoice.cancelled``
paid → completed (a confirmed sweep)                  ``invoice.completed``
a confirmed refund (``refunds.service``)              ``invoice.refunded`` (no status move)
transfers recorded (``monitor.records``)              ``invoice.payment_recorded`` (no move)
paid (manual): captured                               ``invoice.captured``
paid (manual) → cancelled: a confirmed void           ``invoice.refunded``, ``invoice.voided``
====================================================  ==========================================

Nothing but the payer moves a pending invoice's reading: a refund is refused while the
invoice is pending (``refunds.service``, 409 ``invoice_pending``), and its escrow is not swept
before it is paid.

"Less the tolerance": an invoice keeps its owner's underpayment tolerance from creation
(``tolerance_bps``, 0 to 500 basis points); a reading short of ``requiredRaw`` by at most
that share of it (rounded down to a raw unit) is paid, and the invoice records the shortfall
(:func:`least_paid_raw`; docs/integration/pricing.md#tolerance).

``invoice.paid`` goes with every move to paid, like the paid webhook; ``late_paid``
and ``overpaid`` tell the same move's circumstances, for receivers that treat them apart.

Every move that changes something also moves ``updatedAt``; every reading moves
``lastCheckedAt`` (the monitor's bookkeeping, in ``monitor.check``). The payment page shows
a pending invoice past its expiry as expired before the monitor records it
(:func:`shown_status`). Funds reaching a settled escrow are swept too
(``settlement.candidates.settled_candidates``): completed and cancelled ones within the
late-payment window since their withdrawal or deletion, expired ones once that window is over
(until then a late full payment can still make the invoice paid). After those windows every
escrow that ever held funds is still read for life at a low rate (``monitor.lifetime``) and
what it holds is swept (``settlement.assets``).

The functions below are pure: they take the invoice as it is (``InvoiceState``), the event
and the time, and return a :class:`Step`. Callers load the row under a lock, ask for the step
and write it with :func:`apply_step` in the same transaction.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from invoicing import metrics
from invoicing.tables.invoices import Invoice, InvoiceRow, InvoiceState


class InvoiceStatus(enum.StrEnum):
    """The status values of an invoice (docs/reference/api.md), stored and shown as is."""

    PENDING = "pending"
    PAID = "paid"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class InvoiceEvent(enum.StrEnum):
    """The event types (docs/architecture.md#events), stored and sent as these exact strings."""

    PAID = "invoice.paid"
    PARTIALLY_PAID = "invoice.partially_paid"
    OVERPAID = "invoice.overpaid"
    LATE_PAID = "invoice.late_paid"
    EXPIRED = "invoice.expired"
    CANCELLED = "invoice.cancelled"
    COMPLETED = "invoice.completed"
    REFUNDED = "invoice.refunded"
    PAYMENT_RECORDED = "invoice.payment_recorded"
    CAPTURED = "invoice.captured"
    VOIDED = "invoice.voided"


class Capture(enum.StrEnum):
    """When a paid invoice's funds go to its owner (``capture`` at creation)."""

    AUTOMATIC = "automatic"  # swept once paid
    MANUAL = "manual"  # held in the escrow until captured, or voided


class Effect(enum.Flag):
    """What goes with a step besides its status (:func:`apply_step` writes them)."""

    NONE = 0
    RECORD_BALANCE = enum.auto()  # balanceRaw = the reading
    TOUCH = enum.auto()  # updatedAt = now
    MARK_PAID = enum.auto()  # paid = true, paidAt = now
    NOTIFY_PAID = enum.auto()  # the paid webhook goes into the outbox (docs/architecture.md#outbox)
    STOP_WATCHING = enum.auto()  # the monitor no longer reads the escrow
    MARK_DELETED = enum.auto()  # deletedAt = now
    MARK_WITHDRAWN = enum.auto()  # withdrawn = true, withdrawnAt = now
    MARK_CAPTURED = enum.auto()  # capturedAt = now (manual capture)
    MARK_VOIDED = enum.auto()  # voidedAt = now (manual capture)


@dataclass(frozen=True, slots=True)
class Step:
    """An invoice's status after an event, and the effects that go with it."""

    status: InvoiceStatus
    effects: Effect = Effect.NONE


# Module-level names: an enum member looked up on its class costs ~100 ns, and the monitor
# decides on every invoice it reads.
_PENDING, _PAID, _EXPIRED = InvoiceStatus.PENDING, InvoiceStatus.PAID, InvoiceStatus.EXPIRED
_CANCELLED = InvoiceStatus.CANCELLED
_NO_EFFECT = Effect.NONE
_BALANCE = Effect.RECORD_BALANCE | Effect.TOUCH
_BECOMES_PAID = Step(_PAID, _BALANCE | Effect.MARK_PAID | Effect.NOTIFY_PAID | Effect.STOP_WATCHING)
_EXPIRES = Step(_EXPIRED, _BALANCE)
_DELETED = Effect.MARK_DELETED | Effect.STOP_WATCHING | Effect.TOUCH
# The steps that change nothing and those that only record a new balance, by status: the
# monitor asks about every invoice it reads, so the common answers are built once.
_STAYS: dict[str, Step] = {status: Step(status) for status in InvoiceStatus}
_RECORDS: dict[str, Step] = {status: Step(status, _BALANCE) for status in InvoiceStatus}


def awaits_payment(invoice: InvoiceState) -> bool:
    """Whether a full payment would still make the invoice paid (pending or expired)."""
    return invoice.status == _PENDING or invoice.status == _EXPIRED


def least_paid_raw(invoice: InvoiceState) -> int:
    """The lowest reading that pays the invoice: ``requiredRaw`` less its tolerance's share."""
    required = int(invoice.required_raw)
    tolerance_bps = invoice.tolerance_bps
    if not tolerance_bps:
        return required
    return required - required * tolerance_bps // 10_000


def on_reading(
    invoice: InvoiceState, balance_raw: int, now_ms: int, *, deleted: bool = False
) -> Step:
    """The step a balance reading of the escrow takes (by the monitor or a live re-check).
    A full payment wins over expiry; a ``deleted`` invoice (known to the ORM row only) never
    becomes paid."""
    status = invoice.status
    if status == _PENDING or status == _EXPIRED:
        if balance_raw >= least_paid_raw(invoice) and not deleted:
            return _BECOMES_PAID
        if status == _PENDING and now_ms >= invoice.expires_at:
            return _EXPIRES
    elif status != _CANCELLED:
        return _STAYS[status]
    if str(balance_raw) != invoice.balance_raw:
        return _RECORDS[status]
    return _STAYS[status]


def reading_changes(invoice: InvoiceState, balance_raw: int, now_ms: int) -> bool:
    """Whether a reading changes the invoice beyond its lastCheckedAt: the monitor and the
    re-check write only those (deciding again on the row they lock, which may have moved on)."""
    return on_reading(invoice, balance_raw, now_ms).effects is not _NO_EFFECT


def late_window_over(invoice: InvoiceState, now_ms: int, late_window_ms: int) -> bool:
    """Whether an expired invoice's late-payment window has closed: the monitor stops reading
    it (its escrow is still swept if funds arrive)."""
    return invoice.status == _EXPIRED and now_ms > invoice.expires_at + late_window_ms


def on_delete(invoice: InvoiceState) -> Step:
    """DELETE: pending and expired invoices are cancelled; paid and completed ones keep their
    status (paid funds are still withdrawn to the owner). Monitoring stops either way."""
    if awaits_payment(invoice):
        return Step(_CANCELLED, _DELETED)
    return Step(InvoiceStatus(invoice.status), _DELETED)


def on_withdrawal_confirmed(invoice: InvoiceState) -> Step:
    """A confirmed withdrawal that moved the escrow's funds completes a paid invoice; other
    invoices (late funds of a settled one) keep their status. The caller asks only when funds
    moved (``settlement.swept.settle_withdrawal``)."""
    if invoice.status == _PAID:
        return Step(InvoiceStatus.COMPLETED, Effect.MARK_WITHDRAWN | Effect.TOUCH)
    return _STAYS[invoice.status]


def awaits_capture(invoice: Invoice | InvoiceRow) -> bool:
    """Whether a paid manual-capture invoice still holds its funds for a capture or a void."""
    return (
        invoice.status == _PAID
        and invoice.capture == Capture.MANUAL
        and invoice.captured_at is None
        and invoice.voided_at is None
    )


def on_capture(invoice: Invoice) -> Step:
    """A capture of a paid manual-capture invoice: its escrow is swept from now on. The caller
    refuses every other invoice first (``invoices.capture``)."""
    assert awaits_capture(invoice)
    return Step(_PAID, Effect.MARK_CAPTURED | Effect.TOUCH)


def on_void_confirmed(invoice: Invoice) -> Step:
    """A confirmed void: the payment went back to the payer, the invoice is cancelled and its
    escrow never swept."""
    if awaits_capture(invoice):
        return Step(_CANCELLED, Effect.MARK_VOIDED | Effect.TOUCH)
    return _STAYS[invoice.status]


def shown_status(invoice: InvoiceState, now_ms: int) -> InvoiceStatus:
    """The status the payer sees: a pending invoice past its expiry already reads expired
    (the monitor records that at its next pass; a late full payment still turns it paid)."""
    if invoice.status == _PENDING and now_ms >= invoice.expires_at:
        return _EXPIRED
    return InvoiceStatus(invoice.status)


def step_events(
    invoice: InvoiceState, step: Step, balance_raw: int = 0
) -> tuple[InvoiceEvent, ...]:
    """The events of ``step`` taken from ``invoice`` as it is before the step (see the table
    in the module docstring); empty for steps that only record or change nothing."""
    effects = step.effects
    if effects is _NO_EFFECT:
        return ()
    before = invoice.status
    if Effect.MARK_PAID in effects:
        events = [InvoiceEvent.PAID]
        if before == _EXPIRED:
            events.append(InvoiceEvent.LATE_PAID)
        if balance_raw > int(invoice.required_raw):
            events.append(InvoiceEvent.OVERPAID)
        return tuple(events)
    if Effect.MARK_WITHDRAWN in effects:
        return (InvoiceEvent.COMPLETED,) if step.status == InvoiceStatus.COMPLETED else ()
    if Effect.MARK_CAPTURED in effects:
        return (InvoiceEvent.CAPTURED,)
    if Effect.MARK_VOIDED in effects:
        return (InvoiceEvent.VOIDED,)
    if Effect.MARK_DELETED in effects:
        return (InvoiceEvent.CANCELLED,) if step.status == _CANCELLED else ()
    events = []
    if (
        Effect.RECORD_BALANCE in effects
        and (before == _PENDING or before == _EXPIRED)
        and balance_raw > int(invoice.balance_raw)
    ):
        events.append(InvoiceEvent.PARTIALLY_PAID)
    if step.status == _EXPIRED and before == _PENDING:
        events.insert(0, InvoiceEvent.EXPIRED)
    return tuple(events)


def apply_step(
    invoice: Invoice, step: Step, now_ms: int, balance_raw: int = 0
) -> tuple[InvoiceEvent, ...]:
    """Write ``step`` onto a row loaded for update and return its events; the caller's
    transaction commits both (the paid webhook and the events need the session)."""
    events = step_events(invoice, step, balance_raw)
    if invoice.status != step.status:
        invoice.status = step.status
        metrics.invoice_moved(invoice, step.status)
    effects = step.effects
    if Effect.RECORD_BALANCE in effects:
        invoice.balance_raw = str(balance_raw)
    if Effect.TOUCH in effects:
        invoice.updated_at = now_ms
    if Effect.MARK_PAID in effects:
        invoice.paid = True
        invoice.paid_at = now_ms
        shortfall = int(invoice.required_raw) - balance_raw
        if shortfall > 0:
            invoice.shortfall_raw = str(shortfall)
    if Effect.STOP_WATCHING in effects:
        invoice.watch = False
    if Effect.MARK_DELETED in effects:
        invoice.deleted_at = now_ms
    if Effect.MARK_WITHDRAWN in effects:
        invoice.withdrawn = True
        invoice.withdrawn_at = now_ms
        # A manual-capture invoice swept otherwise than by capture (the rest of a native
        # refund, paid to the owner) was captured by that.
        if invoice.capture == Capture.MANUAL and invoice.captured_at is None:
            invoice.captured_at = now_ms
    if Effect.MARK_CAPTURED in effects:
        invoice.captured_at = now_ms
    if Effect.MARK_VOIDED in effects:
        invoice.voided_at = now_ms
    return events
