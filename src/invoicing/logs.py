"""Logging: readable text by default, one JSON object per line with
``INVOICING_LOG_FORMAT=json``; what a line is about travels in context variables.

A request's id (``x-request-id``), and where known the owner, chain id, invoice id and
transaction hash, are bound with :func:`bind` (or passed as ``extra={...}`` to one call) and
appear on every line logged meanwhile, in the same asyncio task and the tasks it starts::

    {"time": "2026-11-23T20:01:02.345Z", "level": "INFO", "logger": "invoicing.web",
     "event": "...", "request_id": "8f0c…", "owner": "0xf39F…", "chain_id": 31337}

Secrets never reach a log line: settings hold them as ``SecretStr``, API keys and request
signatures are not logged, and the HTTP client libraries (whose lines carry RPC URLs, which
may hold a provider's key) log warnings only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from pydantic import ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The fields a line may carry about what it concerns, in the order they are shown.
CONTEXT_FIELDS = ("request_id", "owner", "chain_id", "invoice_id", "tx_hash")
# Libraries whose lines name URLs (an RPC URL may carry a provider's API key).
QUIET_LIBRARIES = ("httpx", "httpcore")

_context: ContextVar[dict[str, Any]] = ContextVar("invoicing_log_context", default={})  # noqa: B039 - never mutated, only replaced


class LogSettings(BaseSettings):
    """``INVOICING_LOG_FORMAT`` (text or json) and ``INVOICING_LOG_LEVEL``: read apart from
    ``Settings`` because logging starts before, and regardless of, the rest of the
    configuration being valid (a bad one is itself reported through the log)."""

    model_config = SettingsConfigDict(env_prefix="INVOICING_", extra="ignore")

    log_format: Literal["text", "json"] = "text"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("log_format", "log_level", mode="before")
    @classmethod
    def _any_case(cls, value: object, info: ValidationInfo) -> object:
        if not isinstance(value, str):
            return value
        return value.lower() if info.field_name == "log_format" else value.upper()


def current() -> dict[str, Any]:
    """The fields bound now (request id, owner, chain id, invoice id, tx hash)."""
    return _context.get()


@contextlib.contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every line logged inside the block (None values are left out)."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def annotate(**fields: Any) -> None:
    """Add ``fields`` to the lines logged from here to the end of the enclosing
    :func:`bind` block (a request, a worker loop); None values are left out."""
    _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    bound = _context.get()
    found = {}
    for name in CONTEXT_FIELDS:
        value = getattr(record, name, None)
        if value is None:
            value = bound.get(name)
        if value is not None:
            found[name] = value
    return found


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ms), level, logger, event, the context fields,
    and ``exc`` with the traceback of an exception."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        line: dict[str, Any] = {
            "time": moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "event": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """The readable default, with the context fields appended as ``key=value``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = _fields(record)
        if not fields:
            return text
        head, newline, rest = text.partition("\n")
        context = " ".join(f"{key}={value}" for key, value in fields.items())
        return f"{head} [{context}]{newline}{rest}"


def configure(options: LogSettings | None = None, stream: TextIO | None = None) -> None:
    """Send every logger (uvicorn's too) to ``stream`` (stderr) in the chosen format and
    level."""
    options = options or LogSettings()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if options.log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(options.log_level)
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
