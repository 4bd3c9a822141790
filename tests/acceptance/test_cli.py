"""Operator commands: migrate and api-keys create, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from invoicing.chain.deploy import DevDeployment
from tests.conftest import TEST_DATABASE, RunningApp
from tests.support.api import key_headers
from tests.support.signing import new_owner

pytestmark = pytest.mark.acceptance

INVOICING = str(Path(sys.executable).parent / "invoicing")


def run_cli(*args: str, database_url: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_ENVIRONMENT": "development",
    }
    return subprocess.run(
        [INVOICING, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


async def test_cli_api_key_works_against_the_api(
    app: RunningApp, dev: DevDeployment, database_url: str
) -> None:
    owner = new_owner()

    result = run_cli(
        "api-keys",
        "create",
        "--owner",
        owner.address.lower(),
        "--label",
        "ops",
        database_url=database_url,
    )

    assert result.returncode == 0, result.stderr
    issued = json.loads(result.stdout)
    assert issued["ownerAddress"] == owner.address and issued["label"] == "ops"
    response = await app.http.post(
        "/integration/invoices",
        json={"ownerAddress": owner.address, "chainId": dev.chain_id, "amount": "1"},
        headers=key_headers(issued["apiKey"]),
    )
    assert response.status_code == 201


def test_cli_refuses_a_bad_owner(database_url: str) -> None:
    result = run_cli("api-keys", "create", "--owner", "0x123", database_url=database_url)

    assert result.returncode == 2
    assert "--owner" in result.stderr


def test_serve_refuses_the_placeholder_secret_outside_development(tmp_path: Path) -> None:
    env = {**os.environ, "INVOICING_DATABASE_URL": f"sqlite:///{tmp_path}/x.db"}
    env.pop("INVOICING_ENVIRONMENT", None)
    env.pop("INVOICING_SECRET", None)

    result = subprocess.run(
        [INVOICING, "migrate"], capture_output=True, text=True, env=env, timeout=300, check=False
    )

    assert result.returncode != 0
    assert "INVOICING_SECRET" in result.stderr


def test_migrate_creates_the_schema(tmp_path: Path) -> None:
    if TEST_DATABASE != "sqlite":
        pytest.skip("covered by the schema test on PostgreSQL")
    url = f"sqlite:///{tmp_path}/fresh.db"

    first = run_cli("migrate", database_url=url)
    second = run_cli("migrate", database_url=url)

    assert first.returncode == 0 and "up to date" in first.stdout
    assert second.returncode == 0
