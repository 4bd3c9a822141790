"""The monitor benchmark at a tiny size: it runs, prints its lines, and finds what it
should (benchmarks never run in CI at full size; their figures are goals, not timed tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.conftest import TEST_DATABASE

BENCH = Path(__file__).parents[2] / "bench"


def run_bench(*args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(BENCH / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout.splitlines()


def fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)


def test_monitor_bench_checks_every_invoice_in_both_passes() -> None:
    args = ["monitor.py", "--sizes", "300", "--baseline-max", "20"]
    if TEST_DATABASE != "sqlite":
        server = make_url(TEST_DATABASE).set(database="postgres")
        args += ["--database-url", server.render_as_string(hide_password=False)]

    lines = [fields(line) for line in run_bench(*args) if line.startswith("monitor ")]

    # Against anvil and against the in-process node, the same passes, after the first load
    # of the worker's watched set.
    assert [(line["node"], line["kind"]) for line in lines] == [
        ("anvil", "load"), ("anvil", "block"), ("anvil", "due"),
        ("memory", "load"), ("memory", "block"), ("memory", "due"),
    ]  # fmt: skip
    expected_db = "sqlite" if TEST_DATABASE == "sqlite" else "postgresql"
    for load, block, due in (lines[:3], lines[3:]):
        assert (load["checked"], load["rpc_calls"]) == ("300", "0")  # the database only
        assert (block["db"], block["checked"], block["paid"]) == (expected_db, "300", "10")
        # 240 native and 60 TUSD invoices: one EscrowReader call for both assets, one block
        # header read for the detection lag of the ten marked paid
        # (invoicing_payment_detection_seconds), and the gateway's first question: is the
        # reader deployed (eth_getCode)?
        assert (block["rpc_calls"], block["baseline_calls"]) == ("3", "300")
        # The ten paid invoices left the watch; the due pass checks the other 290 in one call.
        assert (due["checked"], due["paid"], due["rpc_calls"]) == ("290", "0", "1")
