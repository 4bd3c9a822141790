"""Which errors mean the database is unreachable (503 database_unavailable) and which are a
statement refused (a bug: 500)."""

from __future__ import annotations

import asyncpg
import pytest
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError

from invoicing.db import is_connection_loss


class DriverError(Exception):
    pass


@pytest.mark.parametrize(
    "error",
    [
        ConnectionRefusedError(111, "Connect call failed"),
        ConnectionResetError(104, "Connection reset by peer"),
        asyncpg.CannotConnectNowError("the database system is starting up"),
        asyncpg.TooManyConnectionsError("sorry, too many clients already"),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        InterfaceError("SELECT 1", None, DriverError("connection is closed")),
        OperationalError("SELECT 1", None, DriverError("server closed the connection")),
        DBAPIError("SELECT 1", None, DriverError("gone"), connection_invalidated=True),
    ],
)
def test_unreachable_database(error: BaseException) -> None:
    assert is_connection_loss(error)


@pytest.mark.parametrize(
    "error",
    [
        IntegrityError("INSERT", None, DriverError("duplicate key value")),
        DBAPIError("SELECT", None, DriverError("syntax error")),
        asyncpg.UniqueViolationError("duplicate key value"),
        ValueError("not a database error"),
        TimeoutError(),
    ],
)
def test_statement_errors_are_not_outages(error: BaseException) -> None:
    assert not is_connection_loss(error)
