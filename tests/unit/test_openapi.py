"""The committed openapi.json is the app's schema; regenerate with `make openapi`."""

from __future__ import annotations

import json
from pathlib import Path

from invoicing.api.openapi import build_schema

COMMITTED = Path(__file__).resolve().parents[2] / "openapi.json"


def test_committed_openapi_matches_the_app() -> None:
    assert json.loads(COMMITTED.read_text()) == build_schema(), (
        "openapi.json is stale: run `make openapi`"
    )
