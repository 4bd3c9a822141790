"""The shipped deployment files (deploy/) work as the production page says: the systemd units
pass ``systemd-analyze verify`` and start real ``invoicing`` commands, and the nginx site
passes ``nginx -t`` and, run for real in front of the API, terminates TLS and hands the
service a client address that the client cannot choose."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from invoicing.web.app import create_app
from tests.conftest import MakeServices
from tests.support.nginx import debian_tool, nginx_in_front
from tests.support.server import serve

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
ENV_EXAMPLE = DEPLOY / "systemd" / "invoicing.env.example"
CONFIGURATION_PAGE = DEPLOY.parent / "docs" / "operations" / "configuration.md"
VENV = Path(sys.executable).parent.parent
SHIPPED_VENV = "/opt/invoicing/venv"


def _local_unit(unit: Path, tmp_path: Path) -> Path:
    """``unit`` with this checkout's venv for /opt/invoicing/venv and a copy of the example
    environment file, so that systemd can check that every command exists."""
    env_file = tmp_path / "invoicing.env"
    shutil.copy(ENV_EXAMPLE, env_file)
    text = unit.read_text().replace(SHIPPED_VENV, str(VENV))
    text = text.replace("/etc/invoicing/invoicing.env", str(env_file))
    local = tmp_path / unit.name
    local.write_text(text)
    return local


def test_the_units_cover_migrate_serve_and_worker() -> None:
    assert [u.name for u in UNITS] == [
        "invoicing-migrate.service",
        "invoicing-serve.service",
        "invoicing-worker.service",
    ]


def test_the_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """Checked together, as installed: serve and worker require the migrate unit."""
    verify = debian_tool("systemd-analyze")
    local = [str(_local_unit(unit, tmp_path)) for unit in UNITS]
    done = subprocess.run(
        [verify, "verify", *local], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    # A warning (an unknown key, a missing command or unit) is a failure too.
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_each_units_command_is_one_the_cli_takes(unit: Path) -> None:
    (line,) = re.findall(r"^ExecStart=(.+)$", unit.read_text(), re.MULTILINE)
    program, *args = line.split()
    assert program == f"{SHIPPED_VENV}/bin/invoicing"
    # The program runs the package's entry point, here run in this process (a start-up of
    # the command costs about 3 s of CPU): it takes the unit's arguments.
    (entry,) = [e for e in entry_points(group="console_scripts") if e.name == "invoicing"]
    assert entry.value == "invoicing.cli:app"
    done = CliRunner().invoke(entry.load(), [*args, "--help"])
    assert done.exit_code == 0, done.output


def test_a_unit_with_a_wrong_key_fails_the_check(tmp_path: Path) -> None:
    """The check above can fail: systemd reports what it does not know."""
    verify = debian_tool("systemd-analyze")
    broken = tmp_path / "broken"
    broken.mkdir()
    local = [_local_unit(unit, broken) for unit in UNITS]
    local[1].write_text(
        local[1].read_text().replace("Restart=always", "Restart=always\nRestrat=no")
    )
    done = subprocess.run(
        [verify, "verify", *map(str, local)], capture_output=True, text=True, cwd=broken
    )
    assert "Unknown key 'Restrat'" in done.stderr


def test_the_example_environment_names_only_documented_settings() -> None:
    documented = set(re.findall(r"`(INVOICING_[A-Z0-9_]+)`", CONFIGURATION_PAGE.read_text()))
    names = re.findall(r"^(INVOICING_[A-Z0-9_]+)=", ENV_EXAMPLE.read_text(), re.MULTILINE)
    assert names and set(names) <= documented, set(names) - documented


# -- nginx ------------------------------------------------------------------------------


@pytest.fixture
def loopback_clients() -> Iterator[tuple[str, str]]:
    """Two client addresses of the loopback network no other test uses (the payment page's
    limit is counted per client address in the shared database)."""
    picks = random.sample(range(2, 250), 2)
    base = random.randint(2, 250)
    yield (f"127.{base}.0.{picks[0]}", f"127.{base}.0.{picks[1]}")


async def test_nginx_terminates_tls_and_the_client_cannot_choose_its_address(
    make_services: MakeServices, tmp_path: Path, loopback_clients: tuple[str, str]
) -> None:
    services = await make_services(pay_rate_limit_per_minute=2, trusted_proxies="127.0.0.1/32")
    page = "/pay/0x" + "ab" * 20
    first, second = loopback_clients
    async with serve(create_app(services)) as upstream, nginx_in_front(upstream, tmp_path) as site:
        async with httpx.AsyncClient(verify=False) as plain:
            redirect = await plain.get(site.http_url + "/readyz")
        assert redirect.status_code == 301
        assert redirect.headers["location"] == "https://127.0.0.1/readyz"

        def client(address: str) -> httpx.AsyncClient:
            transport = httpx.AsyncHTTPTransport(local_address=address, verify=False)
            return httpx.AsyncClient(base_url=site.https_url, transport=transport)

        async with client(first) as one, client(second) as other:
            ready = await one.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["ready"] is True
            # Each request claims another address; nginx appends the one it saw, and the
            # service counts that one: the third is over the limit of 2 a minute.
            answers = [
                await one.get(page, headers={"X-Forwarded-For": f"203.0.113.{i}"}) for i in range(3)
            ]
            assert [a.status_code for a in answers] == [404, 404, 429]
            assert answers[2].json()["error"]["code"] == "rate_limited"
            # Another client is not behind the proxy's address: its own count starts at 0.
            assert (await other.get(page)).status_code == 404
            assert (await one.get("/metrics")).status_code == 404
