"""One `invoicing dev` process for the tests that drive the service from outside (the
Python and JavaScript SDKs' tests, the docs' quickstart, the example shop), started as a user
starts it and shared by them. Under pytest-xdist each worker is a run of its own: the files
that use it are one group in ``tests/support/workers.py``, so that one worker starts it
(but the Medusa provider's suite, which takes minutes alone: its worker starts its own).

It runs on free ports, on this run's database kind (a fresh SQLite file, or a fresh
PostgreSQL database under ``INVOICING_TEST_DATABASE``), with the monitor's interval and the
webhook retry delay at 1 s, and is stopped when pytest ends. Tests work with their own owners,
except where the dev command's own owner and key are the point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import new_database_url
from tests.support.server import free_port

INVOICING = str(Path(sys.executable).parent / "invoicing")
READY_TIMEOUT_S = 90


@dataclass(frozen=True)
class DevService:
    ready_line: str  # exactly as printed
    ready: dict[str, Any]


_KEY = pytest.StashKey[DevService]()


def shared_dev(config: pytest.Config) -> DevService:
    """The run's `invoicing dev`, started on first use."""
    if _KEY not in config.stash:
        config.stash[_KEY] = _start(config)
    return config.stash[_KEY]


def _start(config: pytest.Config) -> DevService:
    database_url, drop = new_database_url()
    workdir = Path(tempfile.mkdtemp(prefix="invoicing-dev-"))
    ready_file = workdir / "ready.json"
    log = (workdir / "dev.log").open("wb")
    process = subprocess.Popen(
        [
            INVOICING,
            "dev",
            "--port",
            str(free_port()),
            "--chain-port",
            str(free_port()),
            "--ready-file",
            str(ready_file),
            "--database-url",
            database_url,
        ],
        env={
            **os.environ,
            "INVOICING_MONITOR_INTERVAL_S": "1",
            "INVOICING_WEBHOOK_RETRY_DELAY_S": "1",
        },
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def stop() -> None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        drop()
        shutil.rmtree(workdir, ignore_errors=True)

    config.add_cleanup(stop)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not (ready_file.exists() and ready_file.read_text().endswith("\n")):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"invoicing dev did not start: {(workdir / 'dev.log').read_text()}")
        time.sleep(0.1)
    line = ready_file.read_text().strip()
    return DevService(ready_line=line, ready=json.loads(line))
