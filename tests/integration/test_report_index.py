"""The payments report's month reads an index, on the database under test: the migrated
schema has it, the report's query plan uses it on PostgreSQL, and the migration that made
it gave the records without a block time the time they were recorded."""

from __future__ import annotations

from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, column, insert, inspect, table, text
from sqlalchemy.ext.asyncio import AsyncConnection

from invoicing.db import create_engine
from invoicing.migrate import alembic_config, upgrade
from invoicing.reports.payments import ReportQuery
from invoicing.reports.sources import page_statement
from tests.conftest import new_database_url

pytestmark = pytest.mark.integration

INDEX = "ix_payment_records_block_time"
OWNER = "0x" + "11" * 20
MONTH = ReportQuery(OWNER, 1_790_000_000_000, 1_792_600_000_000)


def _indexes(connection: Connection) -> dict[str, list[str | None]]:
    found = inspect(connection).get_indexes("payment_records")
    return {index["name"]: list(index["column_names"]) for index in found if index["name"]}


async def _plan(connection: AsyncConnection) -> str:
    statement = page_statement(MONTH, None, 500)
    assert statement is not None
    compiled = statement.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True})
    # An empty table is cheaper to read whole; the plan shows what an index can serve.
    await connection.execute(text("SET enable_seqscan = off"))
    rows = await connection.execute(text(f"EXPLAIN {compiled}"))
    return "\n".join(row[0] for row in rows)


async def test_the_report_window_has_an_index_and_its_plan_reads_it() -> None:
    url, drop = new_database_url()
    try:
        await upgrade(url)
        engine = create_engine(url)
        async with engine.connect() as connection:
            indexes = await connection.run_sync(_indexes)
            # SQLite's planner, without statistics, starts from the owner's invoices.
            postgresql = connection.dialect.name == "postgresql"
            plan = await _plan(connection) if postgresql else INDEX
        await engine.dispose()
    finally:
        drop()

    assert indexes[INDEX] == ["block_time", "invoice_id", "tx_hash", "source"]
    assert INDEX in plan, plan


async def test_the_index_migration_gives_records_without_a_block_time_their_record_time() -> None:
    url, drop = new_database_url()
    engine = create_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda sync: command.upgrade(
                    alembic_config(url, sync), "0074_subscription_webhook_url"
                )
            )
        async with engine.begin() as connection:
            columns = await connection.run_sync(lambda sync: inspect(sync).get_columns("invoices"))
            invoice = {**{c["name"]: _blank(c) for c in columns if not c["nullable"]}, **INVOICE}
            invoices = table("invoices", *(column(name) for name in invoice))
            await connection.execute(insert(invoices), [invoice])
            await connection.execute(
                insert(RECORDS), [_record("0x" + "aa" * 32, None), _record("0x" + "bb" * 32, 7)]
            )
        await upgrade(url)
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT tx_hash, block_time FROM payment_records ORDER BY tx_hash")
            )
            times = [tuple(row) for row in rows]
    finally:
        await engine.dispose()
        drop()

    assert times == [("0x" + "aa" * 32, 5), ("0x" + "bb" * 32, 7)]


INVOICE: dict[str, object] = {
    "id": "00000000-0000-0000-0000-0000000000aa",
    "owner_address": OWNER,
    "owner_key": OWNER,
    "chain_id": 31337,
    "invoice_id": "1",
    "payment_address": "0x" + "22" * 20,
    "salt": "0x" + "33" * 32,
    "amount": "1",
    "decimals": 18,
    "required_raw": str(10**18),
    "expires_at": 1,
    "status": "paid",
    "paid": True,
    "withdrawn": False,
    "balance_raw": str(10**18),
    "last_checked_at": 1,
    "created_at": 1,
    "updated_at": 1,
    "auth_mode": "api_key",
}


def _blank(found: Any) -> object:
    """A value for a required column the test does not care about, by its type."""
    python_type = found["type"].python_type
    return {bool: False, int: 0, str: "0"}.get(python_type, "0")


def _record(tx_hash: str, block_time: int | None) -> dict[str, object]:
    return {
        "invoice_id": INVOICE["id"],
        "tx_hash": tx_hash,
        "source": "tx",
        "chain_id": 31337,
        "from_address": "0x" + "44" * 20,
        "token_address": None,
        "amount_raw": "1",
        "block_number": 3,
        "block_hash": "0x" + "55" * 32,
        "block_time": block_time,
        "final": False,
        "created_at": 5,
    }


RECORDS = table("payment_records", *(column(name) for name in _record("", None)))
