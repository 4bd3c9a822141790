"""Both SDKs' generated models and routes are what ``make sdk`` writes from the committed
``openapi.json``: the generator runs into a temporary directory and every file it writes must
equal the committed one (so a route added to the service without ``make sdk`` fails here)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clients.sdkgen import generate
from clients.sdkgen.spec import SpecError

REPO = Path(__file__).resolve().parents[2]
OPENAPI: dict[str, Any] = json.loads((REPO / "openapi.json").read_text())


def run_generator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clients.sdkgen", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_committed_sdks_are_the_generated_ones(tmp_path: Path) -> None:
    result = run_generator("--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    written = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*.*"))
    assert written == sorted(generate(OPENAPI))
    for name in written:
        committed = REPO / name
        assert committed.exists(), f"{name} is not committed: run make sdk"
        assert (tmp_path / name).read_text() == committed.read_text(), f"run make sdk ({name})"


def test_the_check_fails_on_a_changed_route(tmp_path: Path) -> None:
    """A route renamed in openapi.json: --check names both routes files as out of date."""
    spec = copy.deepcopy(OPENAPI)
    spec["paths"]["/integration/gasless"]["get"]["x-sdk-methods"] = ["gasless.read"]
    changed = tmp_path / "openapi.json"
    changed.write_text(json.dumps(spec))
    result = run_generator("--check", "--spec", str(changed))
    assert result.returncode == 1
    assert sorted(result.stderr.splitlines()) == [
        "clients/js/src/generated/routes.js is out of date: run make sdk",
        "clients/python/src/invoicing_client/_generated/routes.py is out of date: run make sdk",
    ]
    assert "'gasless.read': Route('GET', '/integration/gasless'" not in (
        REPO / "clients/python/src/invoicing_client/_generated/routes.py"
    ).read_text().replace('"', "'")


def test_a_route_without_an_sdk_method_is_refused_by_name() -> None:
    spec = copy.deepcopy(OPENAPI)
    del spec["paths"]["/healthz"]["get"]["x-sdk-methods"]
    with pytest.raises(SpecError, match=r"sdk=\"resource.method\".*: GET /healthz$"):
        generate(spec)


def test_two_routes_of_one_sdk_method_are_refused() -> None:
    spec = copy.deepcopy(OPENAPI)
    spec["paths"]["/readyz"]["get"]["x-sdk-methods"] = ["public.health"]
    with pytest.raises(SpecError, match="two routes are named public.health"):
        generate(spec)


def test_a_new_answer_schema_becomes_a_model_in_both_sdks() -> None:
    """A route answering a new schema: its model (raw amounts as int / bigint) is generated."""
    spec = copy.deepcopy(OPENAPI)
    spec["components"]["schemas"]["Plan"] = {
        "type": "object",
        "description": "A plan.",
        "properties": {
            "amountRaw": {"type": "string", "pattern": "^[0-9]{1,78}$"},
            "planId": {"type": "string"},
            "endsAt": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["planId", "amountRaw"],
    }
    ok = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Plan"}}}}
    spec["paths"]["/integration/plans"] = {
        "get": {"x-sdk-methods": ["plans.get"], "responses": {"200": ok}}
    }
    files = generate(spec)
    python = files["clients/python/src/invoicing_client/_generated/models.py"]
    assert 'class Plan(_Model):\n    """A plan."""\n\n    plan_id: str\n    amount_raw: int\n' in (
        python
    )
    assert "    ends_at: int | None = None\n" in python
    ts = files["clients/js/src/generated/models.d.ts"]
    assert "export interface Plan {\n  planId: string;\n  amountRaw: bigint;\n" in ts
    assert "  endsAt?: number | null;\n}" in ts
    routes = files["clients/js/src/generated/routes.js"]
    assert '"plans.get": ["GET", "/integration/plans", null, []],' in routes
    assert '"amountRaw"' in routes.split("RAW_FIELDS")[1]
