"""The migrated schema equals the models, on the database under test."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection

from invoicing.db import create_engine
from invoicing.migrate import upgrade
from invoicing.models import Base
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
