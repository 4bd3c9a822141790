"""`invoicing worker` refuses bad log settings and metrics ports before starting anything."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from invoicing.cli import app


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        ([], {"INVOICING_LOG_FORMAT": "xml"}, "invalid configuration: INVOICING_LOG_*"),
        ([], {"INVOICING_LOG_LEVEL": "chatty"}, "invalid configuration: INVOICING_LOG_*"),
        (["--metrics-port", "0"], {}, "--metrics-port"),
        (["--metrics-port", "65536"], {}, "--metrics-port"),
        (["--metrics-port", "http"], {}, "--metrics-port"),
    ],
    ids=["log-format", "log-level", "port-zero", "port-too-high", "port-not-a-number"],
)
def test_bad_options_exit_2_with_the_reason(
    args: list[str], env: dict[str, str], says: str
) -> None:
    result = CliRunner().invoke(app, ["worker", *args], env=env)

    assert result.exit_code == 2
    assert says in result.output
