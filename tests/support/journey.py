"""Driving ``invoicing dev`` as a user does: its ready line, and an invoice's status polled
through the API until it is the one wanted."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import httpx

INVOICING = str(Path(sys.executable).parent / "invoicing")


def ready_line(path: Path) -> str | None:
    text = path.read_text() if path.exists() else ""
    return text if text.endswith("\n") else None


async def wait_ready(path: Path, process: asyncio.subprocess.Process) -> dict[str, object]:
    """The ready line of ``invoicing dev`` (its output is in ``dev.log`` beside ``path``)."""
    deadline = time.monotonic() + 60
    while (line := await asyncio.to_thread(ready_line, path)) is None:
        log = path.parent / "dev.log"
        assert process.returncode is None, f"invoicing dev exited: {log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "invoicing dev did not become ready"
        await asyncio.sleep(0.1)
    ready: dict[str, object] = json.loads(line)
    return ready


async def poll_status(
    http: httpx.AsyncClient, key: str, owner: str, address: str, wanted: str, timeout_s: float = 30
) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    while True:
        response = await http.get(
            "/integration/invoices/status",
            params={"ownerAddress": owner, "paymentAddress": address},
            headers={"x-service-api-key": key},
        )
        invoice: dict[str, object] = response.json()["invoice"]
        if invoice["status"] == wanted:
            return invoice
        assert time.monotonic() < deadline, f"still {invoice['status']}, wanted {wanted}"
        await asyncio.sleep(0.3)
