"""Schema migrations (Alembic) run from inside the package, no alembic.ini needed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Connection

from invoicing.db import create_engine

MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(database_url: str, connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", database_url)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


async def upgrade(database_url: str) -> None:
    """Bring the database to the newest schema (every branch head)."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(
                lambda sync: command.upgrade(alembic_config(database_url, sync), "heads")
            )
    finally:
        await engine.dispose()


def upgrade_sync(database_url: str) -> None:
    asyncio.run(upgrade(database_url))
