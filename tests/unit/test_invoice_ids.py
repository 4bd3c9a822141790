from __future__ import annotations

import uuid

from invoicing.invoices.insert import time_ordered_id

NOW_MS = 1_795_000_000_123


def test_invoice_ids_are_version_7_uuids_carrying_the_creation_millisecond() -> None:
    value = uuid.UUID(time_ordered_id(NOW_MS))

    assert value.version == 7
    assert value.variant == uuid.RFC_4122
    assert value.int >> 80 == NOW_MS


def test_later_invoices_sort_after_earlier_ones_and_ids_never_repeat() -> None:
    ids = [time_ordered_id(NOW_MS + step) for step in range(1000)]
    same_ms = {time_ordered_id(NOW_MS) for _ in range(1000)}

    assert ids == sorted(ids)
    assert len(set(ids)) == 1000
    assert len(same_ms) == 1000
