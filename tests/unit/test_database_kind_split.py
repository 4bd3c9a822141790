"""CI's PostgreSQL suite runs ``--database-tests-only`` (tests/support/database_kind.py): the
tests that use a database of the run stay in it, whatever way they reach one; the others run
in the SQLite suite alone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    "tests/unit/test_abi.py",  # no database at all
    "tests/acceptance/test_dev_command.py",  # `invoicing dev` on a SQLite file of its own
    "tests/integration/test_refunds.py",  # the run's database through its fixtures
    "tests/integration/test_medusa_provider.py",  # the shared `invoicing dev` (shared_dev)
    "tests/integration/test_schema.py",  # makes databases itself (new_database_url)
    "tests/chaos/test_chain_cut.py",  # PostgreSQL only (skipif): the PostgreSQL suite's
    "tests/clients/test_python_client.py",  # a fixture of its starts the shared `invoicing dev`
    "tests/integration/test_benches.py",  # some benches take the run's database, some none
]


def collected(*options: str) -> list[str]:
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + [*options, *FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [line for line in run.stdout.splitlines() if "::" in line]


def test_the_postgresql_suite_keeps_each_test_that_uses_a_database_of_the_run() -> None:
    every = collected()
    kept = collected("--database-tests-only")

    files = {test.split("::")[0] for test in kept}
    assert files == {
        "tests/integration/test_refunds.py",
        "tests/integration/test_medusa_provider.py",
        "tests/integration/test_schema.py",
        "tests/chaos/test_chain_cut.py",
        "tests/clients/test_python_client.py",
        "tests/integration/test_benches.py",
    }
    for path in files - {"tests/integration/test_benches.py"}:
        assert [t for t in kept if t.startswith(path)] == [t for t in every if t.startswith(path)]
    benches = {t.split("[")[1].rstrip("]") for t in kept if "test_benches.py::" in t and "[" in t}
    assert benches == {
        "api",
        "burst",
        "dashboard",
        "events",
        "monitor",
        "monitor_chains",
        "monitor_workers",
        "rpc_rest",
    }
