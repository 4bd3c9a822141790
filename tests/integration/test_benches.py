"""Every benchmark in ``bench/`` still starts and prints its result line: each runs as a user
runs it (``.venv/bin/python bench/<name>.py``) with ``--smoke`` (tiny sizes, a few seconds;
its goals not enforced, as tiny sizes say nothing of them) and must exit 0.

On a PostgreSQL run the benches that take a database server get the test server (each makes
and drops a database of its own on it); ``bench/dashboard.py`` and the monitor's benches of
several chains and workers are PostgreSQL only, so they run on that run alone (CI runs both).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_DATABASE

pytestmark = pytest.mark.integration

BENCH = Path(__file__).resolve().parents[2] / "bench"
ON_POSTGRES = TEST_DATABASE != "sqlite"
SERVER = [] if not ON_POSTGRES else [TEST_DATABASE]
RUN_TIMEOUT_S = 240  # a smoke run takes seconds; a loaded 2-core machine, minutes

# bench → (its options on this run's database, the start of the line it must print)
BENCHES: dict[str, tuple[list[str], str]] = {
    "api": ([f"--database-url={u}" for u in SERVER], "api round_trips case=create_api_key "),
    "burst": (
        [f"--database-url={u}" for u in SERVER] + (["--setups=postgres"] if ON_POSTGRES else []),
        "burst setup=",
    ),
    "dashboard": ([f"--database-url={u}" for u in SERVER], "dashboard list_page invoices=200 "),
    "detection": ([], "detection samples=2 "),
    "events": ([f"--postgres={u}" for u in SERVER], "events store db="),
    "gas": ([], "gas native batch=2 "),
    "monitor": ([f"--database-url={u}" for u in SERVER], "monitor db="),
    "monitor_chains": ([f"--database-url={u}" for u in SERVER], "monitor_chains round=slow "),
    "monitor_workers": ([f"--database-url={u}" for u in SERVER], "monitor_workers n="),
    "rpc_rest": ([f"--database-url={u}" for u in SERVER], "rpc_rest invoices=20 "),
    "webhook_clients": ([], "webhook_clients decision best_library="),
    "webhooks": ([], "webhooks signed secrets=2 n=40 "),
    "withdrawals": ([], "withdraw erc20 batch=2 "),
}
# The benches that take no database: the same on either run.
NO_DATABASE = {"detection", "gas", "webhook_clients", "webhooks", "withdrawals"}
# Imported or started by the benches above; not benches themselves.
HELPERS = {"framework_app", "memory_node", "receiver"}
# Longer than ten seconds or so on a quiet machine.
SLOW = {
    "api",
    "burst",
    "dashboard",
    "detection",
    "monitor",
    "monitor_chains",
    "monitor_workers",
    "rpc_rest",
    "webhook_clients",
    "webhooks",
    "withdrawals",
}


def test_every_file_of_bench_is_a_bench_here_or_a_helper() -> None:
    assert {path.stem for path in BENCH.glob("*.py")} == BENCHES.keys() | HELPERS


def params() -> list[object]:
    postgres_only = [pytest.mark.skipif(not ON_POSTGRES, reason="a PostgreSQL-only bench")]
    marks = {name: postgres_only for name in ("dashboard", "monitor_chains", "monitor_workers")}
    return [
        pytest.param(
            name,
            marks=[
                *marks.get(name, []),
                *([pytest.mark.slow] * (name in SLOW)),
                *([pytest.mark.any_database] * (name in NO_DATABASE)),
            ],
        )
        for name in BENCHES
    ]


@pytest.mark.parametrize("name", params())
def test_the_bench_runs_and_prints_its_line(name: str) -> None:
    options, line = BENCHES[name]
    run = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--smoke", *options],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )

    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert any(out.startswith(line) for out in run.stdout.splitlines()), run.stdout[-3000:]
    assert "FAILED" not in run.stdout, run.stdout[-3000:]
