"""The service's own processes (``invoicing serve``, ``invoicing worker``) started as an operator
starts them, each on a free port, until the block ends."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from tests.support.server import free_port

INVOICING = str(Path(sys.executable).with_name("invoicing"))


@contextlib.asynccontextmanager
async def running(
    commands: list[list[str]], env: dict[str, str], tmp_path: Path
) -> AsyncIterator[list[str]]:
    """Run ``invoicing <command> <free port>`` for each command until the block ends; yields
    their base URLs once every /healthz answers."""
    ports = [free_port() for _ in commands]
    logs = [tmp_path / f"process-{i}.log" for i in range(len(commands))]
    processes = []
    for command, port, log in zip(commands, ports, logs, strict=True):
        with log.open("w") as out:
            processes.append(
                await asyncio.create_subprocess_exec(
                    INVOICING, *command, str(port), env=env, stdout=out, stderr=out
                )
            )
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        await asyncio.gather(*(healthy(base, p) for base, p in zip(bases, processes, strict=True)))
        yield bases
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            await asyncio.wait_for(process.wait(), timeout=30)


# Three service processes on a machine that CI loads with two suites at once: a request may
# wait its turn for seconds (httpx's own default, 5 s, once ran out connecting to one).
TIMEOUT_S = 30.0


async def healthy(base: str, process: asyncio.subprocess.Process) -> None:
    deadline = time.monotonic() + 90  # a loaded machine takes a while to import everything
    async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT_S) as http:
        while True:
            assert process.returncode is None, f"{base} exited"
            with contextlib.suppress(httpx.TransportError):
                if (await http.get("/healthz")).status_code == 200:
                    return
            assert time.monotonic() < deadline, f"{base} did not answer"
            await asyncio.sleep(0.1)
