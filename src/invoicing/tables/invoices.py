"""Invoice rows and the per-owner invoiceId sequence.

An invoice has three shapes, each where it pays for itself:

- ``Invoice``, the ORM row: every change of an existing invoice, in one transaction under its
  row lock (readings stored by the monitor and the live re-check, DELETE, a confirmed
  withdrawal), and the lookups and lists that load whole rows.
- ``InvoiceRow``, the row's values in a slotted dataclass: the create hot path, which
  group-commits the rows with one executemany and builds no ORM instance per create; also the
  answer of a re-check that changed nothing but ``lastCheckedAt`` (a detached copy: the loaded
  ORM row is shared by concurrent lookups and stays as it was).
- ``InvoiceState``, a Protocol of what the lifecycle decides on and a balance read needs.
  Both shapes above satisfy it, and so do the monitor's Core rows: a pass reads a shard's
  invoices as plain rows, without the ORM's per-row processing.

The Invoice object of the API (``views.invoice_to_dict``) is built from either of the first
two. The state machine is in ``invoices.lifecycle``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    false,
    inspect,
    text,
)
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.orm import Mapped, mapped_column

from invoicing.db import Base
from invoicing.tables.monitor import shard_of

# Raw token amounts can exceed 64 bits, so they are stored as decimal strings.
RAW = String(80)


def _shard_of_row(context: DefaultExecutionContext) -> int:
    """The ``shard`` of a row inserted without one: from its id."""
    parameters: dict[str, Any] = context.get_current_parameters()  # type: ignore[no-untyped-call]
    return shard_of(str(parameters["id"]))


class InvoiceState(Protocol):
    """What the lifecycle decides on and a balance read needs: an ``Invoice``, an
    ``InvoiceRow`` or a monitor pass's Core row."""

    @property
    def id(self) -> str: ...

    @property
    def payment_address(self) -> str: ...

    @property
    def token_address(self) -> str | None: ...

    @property
    def status(self) -> str: ...

    @property
    def balance_raw(self) -> str: ...

    @property
    def required_raw(self) -> str: ...

    @property
    def expires_at(self) -> int: ...

    @property
    def last_checked_at(self) -> int: ...

    @property
    def tolerance_bps(self) -> int: ...


# ``ix_invoices_watched``: its keys, then what a pass reads of a pending invoice.
WATCHED_INDEX_COLUMNS = (
    "chain_id",
    "status",
    "shard",
    "token_address",
    "payment_address",
    "expires_at",
    "balance_raw",
    "required_raw",
    "unreadable",
)


class Invoice(Base):
    __tablename__ = "invoices"
    __table_args__ = (
        UniqueConstraint("owner_key", "chain_id", "invoice_id"),
        Index("ix_invoices_owner_created", "owner_key", "created_at"),
        # The monitor's passes read a chain's watched invoices by status, shard by shard and
        # asset by asset; the index holds every column a pending pass reads, so it is read
        # without the table (``monitor.scan``).
        Index(
            "ix_invoices_watched",
            *WATCHED_INDEX_COLUMNS,
            postgresql_where=text("watch"),
            sqlite_where=text("watch"),
        ),
        # The low-rate pass over every escrow ever created (``monitor.lifetime``).
        Index("ix_invoices_lifetime_check", "chain_id", "lifetime_check_at"),
        # Withdrawals never look for pending invoices: on PostgreSQL they stay out of this
        # index, so a monitor claim (a non-HOT update of a pending row) skips it.
        Index(
            "ix_invoices_sweep",
            "chain_id",
            "status",
            "withdrawn",
            postgresql_where=text("status <> 'pending'"),
        ),
        # Paid invoices by chain and time: the rate at payment is recorded from here
        # (``invoices.fiat``).
        Index("ix_invoices_paid", "chain_id", "paid_at"),
        # A monitor worker reads the invoices changed since its last pass (``monitor.changes``).
        Index("ix_invoices_changes", "chain_id", "change_seq"),
        # The per-owner cap on watched invoices counts here: only watched rows are indexed.
        Index(
            "ix_invoices_owner_watched",
            "owner_key",
            postgresql_where=text("watch"),
            sqlite_where=text("watch"),
        ),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    owner_address: Mapped[str] = mapped_column(String(42))
    # Lowercased owner address: the key every lookup uses.
    owner_key: Mapped[str] = mapped_column(String(42))
    chain_id: Mapped[int] = mapped_column(BigInteger)
    invoice_id: Mapped[str] = mapped_column(String(128))
    payment_address: Mapped[str] = mapped_column(String(42), unique=True)
    salt: Mapped[str] = mapped_column(String(66))
    amount: Mapped[str] = mapped_column(String(100))
    token_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    decimals: Mapped[int] = mapped_column(Integer)
    required_raw: Mapped[str] = mapped_column(RAW)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON, nullable=True)
    webhook_url: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    expires_at: Mapped[int] = mapped_column(BigInteger)
    # An ``InvoiceStatus`` value (``invoices.lifecycle``).
    status: Mapped[str] = mapped_column(String(16))
    paid: Mapped[bool] = mapped_column(Boolean, default=False)
    paid_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    withdrawn: Mapped[bool] = mapped_column(Boolean, default=False)
    withdrawn_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    balance_raw: Mapped[str] = mapped_column(RAW, default="0")
    last_checked_at: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)
    deleted_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    # How the invoice was created; the paid webhook carries the matching credential.
    auth_mode: Mapped[str] = mapped_column(String(16))
    api_key_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    auth_signature: Mapped[str | None] = mapped_column(String(200), nullable=True)
    auth_timestamp: Mapped[str | None] = mapped_column(String(20), nullable=True)
    # sha256 of the canonical create request: an identical retry returns the same invoice.
    request_hash: Mapped[str] = mapped_column(String(64))

    # Monitoring: whether the monitor still reads this escrow (``invoices.coverage`` says
    # when it last did).
    watch: Mapped[bool] = mapped_column(Boolean, default=True)
    # Highest raw balance already swept from this escrow to the owner.
    swept_raw: Mapped[str] = mapped_column(RAW, default="0")
    # When the low-rate pass next reads every allow-listed asset of this escrow, for life:
    # first at the end of its late-payment window (``monitor.lifetime``).
    lifetime_check_at: Mapped[int] = mapped_column(BigInteger, default=0)
    # Set once the escrow has refunds or other assets (``refunds``, ``escrow_assets``), so
    # owner views of every other invoice read neither table.
    has_extras: Mapped[bool] = mapped_column(Boolean, default=False)
    # The escrow's balance was unreadable at its last reading (a hostile or broken token):
    # its ``last_checked_at`` is its own, not its shard's passes' (``invoices.coverage``).
    unreadable: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # The monitor's shard of the invoice (``invoices.coverage.shard_of`` its id).
    shard: Mapped[int] = mapped_column(SmallInteger, default=_shard_of_row)

    # A fiat price locked at creation (docs/integration/pricing.md; all None without one):
    # the currency and amount asked for, the rate (currency per whole unit of the asset),
    # its source (``peg`` or ``chainlink``) and, for a feed, its address, round id and the
    # round's updatedAt (ms).
    currency: Mapped[str | None] = mapped_column(String(3), nullable=True)
    fiat_amount: Mapped[str | None] = mapped_column(String(40), nullable=True)
    rate: Mapped[str | None] = mapped_column(String(100), nullable=True)
    rate_source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    feed_address: Mapped[str | None] = mapped_column(String(42), nullable=True)
    feed_round_id: Mapped[str | None] = mapped_column(String(30), nullable=True)
    feed_updated_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The owner's underpayment tolerance when the invoice was created (basis points, 0..500):
    # a reading short of requiredRaw by at most this share makes it paid (``lifecycle``).
    tolerance_bps: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # requiredRaw less the balance it was paid with, when it was paid under tolerance.
    shortfall_raw: Mapped[str | None] = mapped_column(RAW, nullable=True)
    # Where the payment page sends the payer back to the shop (``invoices.links``): after
    # payment, and when they give up or the invoice ended unpaid.
    redirect_url: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    cancel_url: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    # The block of the newest reading stored (0: none yet): a reading of an earlier block, by
    # a worker that paused between its read and its write, is not stored over it
    # (``monitor.check.store_balances``).
    balance_block: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # When the escrow's funds go to the owner (``invoices.capture``): ``automatic``, swept once
    # paid; ``manual``, held in the escrow until captured (``captured_at``: by the owner, or at
    # the end of the owner's capture window) or voided (``voided_at``: paid back to the payer,
    # never swept).
    capture: Mapped[str] = mapped_column(
        String(16), default="automatic", server_default="automatic"
    )
    captured_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    voided_at: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # Set by a trigger on every write a monitor pass must see (``monitor.changes``).
    change_seq: Mapped[int] = mapped_column(BigInteger, server_default="0")


# The columns in table order, as (attribute, column): the attribute ``metadata_`` is the
# column ``metadata``. ``InvoiceRow`` has the same fields in the same order.
_ATTRIBUTES = tuple((attr.key, attr.columns[0].key) for attr in inspect(Invoice).column_attrs)
INVOICE_COLUMN_NAMES = tuple(column for _attr, column in _ATTRIBUTES)
_row_values = operator.attrgetter(*(attr for attr, _column in _ATTRIBUTES))


@dataclass(slots=True)
class InvoiceRow:
    """An invoice as the values of its row, fields like the ``Invoice`` attributes, in column
    order (so a Core row of the table builds one positionally: ``InvoiceRow(*row)``)."""

    id: str
    owner_address: str
    owner_key: str
    chain_id: int
    invoice_id: str
    payment_address: str
    salt: str
    amount: str
    token_address: str | None
    decimals: int
    required_raw: str
    description: str | None
    metadata_: dict[str, Any] | None
    webhook_url: str | None
    expires_at: int
    status: str
    paid: bool
    paid_at: int | None
    withdrawn: bool
    withdrawn_at: int | None
    balance_raw: str
    last_checked_at: int
    created_at: int
    updated_at: int
    deleted_at: int | None
    auth_mode: str
    api_key_id: str | None
    auth_signature: str | None
    auth_timestamp: str | None
    request_hash: str
    watch: bool
    swept_raw: str
    lifetime_check_at: int
    has_extras: bool
    unreadable: bool = False
    shard: int = -1  # -1: from the id
    currency: str | None = None
    fiat_amount: str | None = None
    rate: str | None = None
    rate_source: str | None = None
    feed_address: str | None = None
    feed_round_id: str | None = None
    feed_updated_at: int | None = None
    tolerance_bps: int = 0
    shortfall_raw: str | None = None
    redirect_url: str | None = None
    cancel_url: str | None = None
    balance_block: int = 0
    capture: str = "automatic"
    captured_at: int | None = None
    voided_at: int | None = None
    change_seq: int = 0  # the trigger's, at insert

    def __post_init__(self) -> None:
        # An ORM row not yet inserted has no shard yet (its column default comes at insert).
        if self.shard is None or self.shard == -1:
            self.shard = shard_of(self.id)

    @classmethod
    def copy_of(cls, invoice: Invoice | InvoiceRow) -> InvoiceRow:
        """A detached copy of the invoice's values as they are now."""
        return cls(*_row_values(invoice))

    def values(self) -> tuple[Any, ...]:
        """The values in column order."""
        values: tuple[Any, ...] = _row_values(self)
        return values

    def column_values(self) -> dict[str, Any]:
        """The row keyed by column name."""
        return dict(zip(INVOICE_COLUMN_NAMES, _row_values(self), strict=True))


class OwnerSequence(Base):
    """The next generated invoiceId for an owner on a chain."""

    __tablename__ = "owner_sequences"

    owner_key: Mapped[str] = mapped_column(String(42), primary_key=True)
    chain_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    next_value: Mapped[int] = mapped_column(BigInteger)
