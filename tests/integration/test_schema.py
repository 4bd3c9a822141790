"""The migrated schema equals the models, on the database under test; data migrations."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import column, insert, inspect, table, text
from sqlalchemy.engine import Connection

from invoicing.db import create_engine
from invoicing.migrate import alembic_config, upgrade
from invoicing.models import Base
from invoicing.notifications.endpoints import endpoint_key
from invoicing.tables.invoices import Invoice, InvoiceRow
from invoicing.tables.monitor import shard_of
from tests.conftest import new_database_url

pytestmark = pytest.mark.integration


async def test_migrations_produce_exactly_the_models() -> None:
    url, drop = new_database_url()
    try:
        await upgrade(url)
        await upgrade(url)  # running it again is a no-op
        engine = create_engine(url)

        def differences(connection: Connection) -> list[object]:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))

        async with engine.connect() as connection:
            diff = await connection.run_sync(differences)
        await engine.dispose()
    finally:
        drop()

    assert diff == []


async def test_the_sweep_index_leaves_out_pending_invoices_on_postgresql() -> None:
    # compare_metadata does not compare index predicates, so the migrated one is read here.
    url, drop = new_database_url()
    try:
        await upgrade(url)
        engine = create_engine(url)
        async with engine.connect() as connection:
            if engine.dialect.name == "postgresql":
                definition = await connection.scalar(text(PG_SWEEP_INDEX))
            else:
                definition = await connection.scalar(text(SQLITE_SWEEP_INDEX))
        await engine.dispose()
    finally:
        drop()

    if url.startswith("postgresql"):
        assert definition.endswith(
            "(chain_id, status, withdrawn) WHERE ((status)::text <> 'pending'::text)"
        )
    else:
        assert definition.endswith("(chain_id, status, withdrawn)")


async def test_the_watched_cap_counts_on_a_partial_index_of_watched_invoices() -> None:
    url, drop = new_database_url()
    try:
        await upgrade(url)
        engine = create_engine(url)
        async with engine.connect() as connection:
            if engine.dialect.name == "postgresql":
                definition = await connection.scalar(text(PG_WATCHED_INDEX))
            else:
                definition = await connection.scalar(text(SQLITE_WATCHED_INDEX))
        await engine.dispose()
    finally:
        drop()

    assert definition.endswith("(owner_key) WHERE watch")


PG_WATCHED_INDEX = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_invoices_owner_watched'"
SQLITE_WATCHED_INDEX = "SELECT sql FROM sqlite_master WHERE name = 'ix_invoices_owner_watched'"
PG_SWEEP_INDEX = "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_invoices_sweep'"
SQLITE_SWEEP_INDEX = "SELECT sql FROM sqlite_master WHERE name = 'ix_invoices_sweep'"


async def test_the_endpoint_migration_fills_in_the_queued_events_endpoints() -> None:
    url, drop = new_database_url()
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda sync: command.upgrade(alembic_config(url, sync), "0002_settlement")
            )
        invoice = invoice_values()
        async with engine.begin() as connection:
            # Only the columns of the schema at 0002 (later migrations add some).
            names = await connection.run_sync(
                lambda sync: {c["name"] for c in inspect(sync).get_columns("invoices")}
            )
            invoices = table("invoices", *(column(name) for name in names))
            await connection.execute(
                insert(invoices), [{k: v for k, v in invoice.items() if k in names}]
            )
            await connection.execute(insert(EVENTS_0002), [queued_event(str(invoice["id"]))])

        await upgrade(url)

        async with engine.connect() as connection:
            row = (await connection.execute(text(ENDPOINT_OF_EVENTS))).one()
    finally:
        await engine.dispose()
        drop()

    webhook_url = "https://Hooks.example:8443/paid"
    assert tuple(row) == (endpoint_key("0x" + "11" * 20, webhook_url), "hooks.example:8443")


def invoice_values() -> dict[str, object]:
    """An invoice row's values by column name (every column of the models)."""
    owner = "0x" + "11" * 20
    invoice = Invoice(
        id="00000000-0000-0000-0000-0000000000aa",
        owner_address=owner,
        owner_key=owner,
        chain_id=31337,
        invoice_id="1",
        payment_address="0x" + "22" * 20,
        salt="0x" + "33" * 32,
        amount="1",
        token_address=None,
        decimals=18,
        required_raw=str(10**18),
        description=None,
        metadata_=None,
        webhook_url="https://Hooks.example:8443/paid",
        expires_at=1,
        status="pending",
        paid=False,
        paid_at=None,
        withdrawn=False,
        withdrawn_at=None,
        balance_raw="0",
        last_checked_at=1,
        created_at=1,
        updated_at=1,
        deleted_at=None,
        auth_mode="signature",
        api_key_id=None,
        auth_signature="0xsig",
        auth_timestamp="1",
        request_hash="0" * 64,
        watch=True,
        swept_raw="0",
        lifetime_check_at=1,
    )
    # next_check_at: a column of the revisions before 0015.
    return {**InvoiceRow.copy_of(invoice).column_values(), "next_check_at": 1}


EVENTS_0002 = table(
    "webhook_events",
    *(column(name) for name in ("id", "invoice_pk", "owner_key", "url", "payload", "status")),
    *(column(name) for name in ("attempts", "next_attempt_at", "claimed_until", "created_at")),
)
ENDPOINT_OF_EVENTS = "SELECT endpoint_key, endpoint_host FROM webhook_events"


def queued_event(invoice_pk: str) -> dict[str, object]:
    return {
        "id": "00000000-0000-0000-0000-000000000001",
        "invoice_pk": invoice_pk,
        "owner_key": "0x" + "11" * 20,
        "url": "https://Hooks.example:8443/paid",
        "payload": '{"status": "paid"}',
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": 1,
        "claimed_until": 0,
        "created_at": 1,
    }


async def test_the_lifetime_migration_first_reads_existing_escrows_at_their_expiry() -> None:
    url, drop = new_database_url()
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda sync: command.upgrade(alembic_config(url, sync), "0008_refunds")
            )
        invoice = {**invoice_values(), "expires_at": 1_800_000_000_000}
        async with engine.begin() as connection:
            names = await connection.run_sync(
                lambda sync: {c["name"] for c in inspect(sync).get_columns("invoices")}
            )
            invoices = table("invoices", *(column(name) for name in names))
            await connection.execute(
                insert(invoices), [{k: v for k, v in invoice.items() if k in names}]
            )

        await upgrade(url)

        async with engine.connect() as connection:
            due = await connection.scalar(text("SELECT lifetime_check_at FROM invoices"))
    finally:
        await engine.dispose()
        drop()

    assert due == 1_800_000_000_000


async def test_the_extras_migration_flags_invoices_that_have_other_assets() -> None:
    url, drop = new_database_url()
    engine = create_engine(url)
    plain = {**invoice_values(), "id": "00000000-0000-0000-0000-0000000000b1"}
    plain["payment_address"], plain["invoice_id"] = "0x" + "b1" * 20, "plain"
    holding = {**invoice_values(), "id": "00000000-0000-0000-0000-0000000000b2"}
    holding["payment_address"], holding["invoice_id"] = "0x" + "b2" * 20, "holding"
    own_only = {**invoice_values(), "id": "00000000-0000-0000-0000-0000000000b3"}
    own_only["payment_address"], own_only["invoice_id"] = "0x" + "b3" * 20, "own"
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda sync: command.upgrade(
                    alembic_config(url, sync), "0009_escrow_lifetime_checks"
                )
            )
        async with engine.begin() as connection:
            names = await connection.run_sync(
                lambda sync: {c["name"] for c in inspect(sync).get_columns("invoices")}
            )
            invoices = table("invoices", *(column(name) for name in names))
            await connection.execute(
                insert(invoices),
                [
                    {k: v for k, v in row.items() if k in names}
                    for row in (plain, holding, own_only)
                ],
            )
            for invoice_id, own in ((holding["id"], False), (own_only["id"], True)):
                await connection.execute(
                    text(
                        "INSERT INTO escrow_assets (invoice_id, token_address, chain_id, own, "
                        "balance_raw, seen_at) VALUES (:id, :token, 31337, :own, '5', 1)"
                    ),
                    {"id": invoice_id, "token": "0x" + "00" * 20, "own": own},
                )

        await upgrade(url)

        async with engine.connect() as connection:
            flags = dict(
                (
                    await connection.execute(text("SELECT invoice_id, has_extras FROM invoices"))
                ).all()
            )
    finally:
        await engine.dispose()
        drop()

    assert {key: bool(value) for key, value in flags.items()} == {
        "plain": False,
        "holding": True,
        "own": False,
    }


async def test_the_shard_migration_files_existing_invoices_by_their_ids_last_digits() -> None:
    url, drop = new_database_url()
    engine = create_engine(url)
    rows = []
    for suffix in ("00", "3f", "aa", "fF"):
        row = {**invoice_values(), "id": f"00000000-0000-0000-0000-0000000000{suffix}"}
        row["has_extras"] = False
        row["payment_address"], row["invoice_id"] = "0x" + suffix.lower() * 20, suffix
        rows.append(row)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda sync: command.upgrade(alembic_config(url, sync), "0014_relayer_budget")
            )
        async with engine.begin() as connection:
            names = await connection.run_sync(
                lambda sync: {c["name"] for c in inspect(sync).get_columns("invoices")}
            )
            invoices = table("invoices", *(column(name) for name in names))
            await connection.execute(
                insert(invoices), [{k: v for k, v in row.items() if k in names} for row in rows]
            )

        await upgrade(url)

        async with engine.connect() as connection:
            found = dict((await connection.execute(text(SHARDS_OF_INVOICES))).all())
    finally:
        await engine.dispose()
        drop()

    assert found == {"00": 0, "3f": 63, "aa": 42, "fF": 63}
    assert all(shard_of(row["id"]) == found[str(row["id"])[-2:]] for row in rows)


SHARDS_OF_INVOICES = "SELECT substr(id, 35, 2), shard FROM invoices"
