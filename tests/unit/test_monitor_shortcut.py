"""The monitor's shortcut for a zero reading agrees with the lifecycle on every invoice."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from invoicing.invoices.lifecycle import InvoiceStatus, reading_changes
from invoicing.monitor.passes import nothing_arrived
from invoicing.tables.monitor import SHARDS, shard_of

NOW_MS = 1_760_000_000_000


@dataclass(frozen=True)
class Row:
    id: str
    payment_address: str
    token_address: str | None
    status: str
    balance_raw: str
    required_raw: str
    expires_at: int
    tolerance_bps: int
    last_checked_at: int
    unreadable: bool = False


rows = st.builds(
    Row,
    id=st.just("00000000-0000-0000-0000-000000000001"),
    payment_address=st.just("0x" + "ab" * 20),
    token_address=st.none(),
    status=st.sampled_from(list(InvoiceStatus)),
    balance_raw=st.sampled_from(["0", "1", "5", "10"]),
    required_raw=st.sampled_from(["0", "1", "10", str(10**18)]),
    expires_at=st.integers(NOW_MS - 2, NOW_MS + 2),
    tolerance_bps=st.sampled_from([0, 1, 250, 500]),
    last_checked_at=st.just(NOW_MS - 1000),
)


@given(row=rows, reading=st.sampled_from([0, 1, 10, 10**18]))
def test_nothing_arrived_only_where_the_lifecycle_sees_no_change(row: Row, reading: int) -> None:
    if row.status in (InvoiceStatus.PENDING, InvoiceStatus.EXPIRED):  # what passes read
        assert not (nothing_arrived(row, reading, NOW_MS) and reading_changes(row, reading, NOW_MS))


@given(st.uuids())
def test_an_invoice_id_falls_in_one_of_the_shards(value: object) -> None:
    assert 0 <= shard_of(str(value)) < SHARDS
