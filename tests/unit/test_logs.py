"""Log lines: JSON objects with the bound context, or readable text; webhook outcome kinds."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from pydantic import ValidationError

from invoicing import logs
from invoicing.notifications.client import Outcome


def record(
    message: str, *args: object, level: int = logging.INFO, **extra: object
) -> logging.LogRecord:
    made = logging.LogRecord("invoicing.x", level, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_a_json_line_has_time_level_event_and_the_bound_fields() -> None:
    with logs.bind(request_id="r-1", owner="0xAbC", chain_id=31337, invoice_id=None):
        logs.annotate(tx_hash="0x12")
        line = json.loads(logs.JsonFormatter().format(record("paid %s", "inv-7")))
    after = json.loads(logs.JsonFormatter().format(record("later")))

    assert list(line) == [
        "time", "level", "logger", "event", "request_id", "owner", "chain_id", "tx_hash"
    ]  # fmt: skip
    assert line["level"] == "INFO" and line["logger"] == "invoicing.x"
    assert line["event"] == "paid inv-7"
    assert (line["request_id"], line["owner"], line["chain_id"], line["tx_hash"]) == (
        "r-1",
        "0xAbC",
        31337,
        "0x12",
    )
    # Nothing outlives its block.
    assert list(after) == ["time", "level", "logger", "event"]


def test_fields_passed_with_one_call_win_over_the_bound_ones() -> None:
    with logs.bind(invoice_id="a"):
        line = json.loads(logs.JsonFormatter().format(record("x", invoice_id="b")))

    assert line["invoice_id"] == "b"


def test_an_exception_is_one_line_with_its_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failed = record("failed", level=logging.ERROR)
        failed.exc_info = sys.exc_info()
    text = logs.JsonFormatter().format(failed)

    assert "\n" not in text
    assert "ValueError: boom" in json.loads(text)["exc"]


def test_text_lines_stay_readable_with_the_context_at_the_end() -> None:
    formatter = logs.TextFormatter()
    with logs.bind(request_id="r-2", chain_id=5):
        text = formatter.format(record("monitor pass took %d ms", 12))

    assert text.endswith(" INFO invoicing.x monitor pass took 12 ms [request_id=r-2 chain_id=5]")


def test_log_settings_refuse_an_unknown_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INVOICING_LOG_FORMAT", "xml")
    with pytest.raises(ValidationError):
        logs.LogSettings()
    monkeypatch.setenv("INVOICING_LOG_FORMAT", "text")
    monkeypatch.setenv("INVOICING_LOG_LEVEL", "chatty")
    with pytest.raises(ValidationError):
        logs.LogSettings()
    monkeypatch.setenv("INVOICING_LOG_FORMAT", "JSON")
    monkeypatch.setenv("INVOICING_LOG_LEVEL", "debug")
    assert (logs.LogSettings().log_format, logs.LogSettings().log_level) == ("json", "DEBUG")


@pytest.mark.parametrize(
    ("outcome", "kind"),
    [
        (Outcome(status_code=204), "success"),
        (Outcome(status_code=500), "http_error"),
        (Outcome(status_code=302), "http_error"),
        (Outcome(error="refused: loopback", terminal=True), "refused"),
        (Outcome(error="timeout after 10 s", timed_out=True), "timeout"),
        (Outcome(error="ConnectionRefusedError: …"), "connect_error"),
    ],
)
def test_webhook_outcomes_have_one_metric_kind_each(outcome: Outcome, kind: str) -> None:
    assert outcome.kind == kind
