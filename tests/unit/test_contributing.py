"""CONTRIBUTING.md says what the Makefile and pyproject.toml do: the test timeout, the
default number of pytest-xdist workers, and every benchmark with its ``--smoke`` run."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def contributing() -> str:
    return " ".join((ROOT / "CONTRIBUTING.md").read_text().split())


def test_the_test_timeout_is_the_one_pyproject_sets() -> None:
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    timeout_s = pytest_options["ini_options"]["timeout"]

    assert re.findall(r"(\d+) s timeout", contributing()) == [str(timeout_s)]


def test_the_default_workers_are_the_makefile_s() -> None:
    default = re.search(r"^TEST_WORKERS \?= (\d+)$", (ROOT / "Makefile").read_text(), re.M)
    assert default is not None

    assert f"`make test` spreads the suite over {default[1]} pytest-xdist workers" in (
        contributing()
    )


def test_every_benchmark_is_listed() -> None:
    text = contributing()
    listed = set(re.findall(r"bench/(\w+)\.py", text))
    runnable = {p.stem for p in (ROOT / "bench").glob("*.py") if "--smoke" in p.read_text()}

    assert runnable - listed == set()
