"""The clients as integrators use them: against a real ``invoicing dev`` process (its own
anvil, a fresh database of the run's kind), paid on anvil, webhooks to a real receiver.

One ``invoicing dev`` serves the whole directory; every test works with its own owners,
except where the dev command's own owner and key are the point.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import new_database_url
from tests.support.server import free_port

INVOICING = str(Path(sys.executable).parent / "invoicing")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/clients/" in item.nodeid:
            item.add_marker(pytest.mark.acceptance)


@dataclass(frozen=True)
class DevService:
    """What the ready line of ``invoicing dev`` says."""

    base_url: str
    rpc_url: str
    chain_id: int
    factory: str
    tusd: str
    owner: str
    api_key: str


def _wait_ready(path: Path, process: subprocess.Popen[bytes], log: Path) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while not (path.exists() and path.read_text().endswith("\n")):
        assert process.poll() is None, f"invoicing dev exited:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"invoicing dev not ready:\n{log.read_text()}"
        time.sleep(0.1)
    ready: dict[str, Any] = json.loads(path.read_text())
    return ready


@pytest.fixture(scope="session")
def dev_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevService]:
    """``invoicing dev`` on free ports and a fresh database, the monitor at 1 s."""
    tmp = tmp_path_factory.mktemp("dev")
    database_url, drop = new_database_url()
    ready_file, log_file = tmp / "ready.json", tmp / "dev.log"
    env = {
        **os.environ,
        "INVOICING_MONITOR_INTERVAL_S": "1",
        "INVOICING_WEBHOOK_RETRY_DELAY_S": "1",
    }
    with log_file.open("w") as log:
        process = subprocess.Popen(
            [
                INVOICING, "dev", "--port", str(free_port()), "--chain-port", str(free_port()),
                "--ready-file", str(ready_file), "--database-url", database_url,
            ],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        ready = _wait_ready(ready_file, process, log_file)
        yield DevService(
            base_url=ready["base_url"],
            rpc_url=ready["rpc_url"],
            chain_id=ready["chain_id"],
            factory=ready["factory"],
            tusd=ready["tokens"]["TUSD"],
            owner=ready["owner"],
            api_key=ready["api_key"],
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        drop()


def pay(dev: DevService, payer: str, to: str, wei: int) -> str:
    """A native payment on the dev chain from one of anvil's unlocked accounts; anvil mines
    it at once. Returns the transaction hash."""
    answer = rpc(dev, "eth_sendTransaction", [{"from": payer, "to": to, "value": hex(wei)}])
    receipt = rpc(dev, "eth_getTransactionReceipt", [answer])
    assert receipt is not None and receipt["status"] == "0x1", receipt
    return str(answer)


def rpc(dev: DevService, method: str, params: list[Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = httpx.post(dev.rpc_url, json=body, timeout=10).json()
    assert "error" not in answer, answer
    return answer["result"]


@dataclass(frozen=True)
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes  # exactly as received


@dataclass
class RawReceiver:
    """A real HTTP endpoint that keeps every request's raw body (signatures cover bytes)."""

    base_url: str = ""
    deliveries: list[Delivery] = field(default_factory=list)
    status: int = 200

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def wait_for(self, path: str, count: int = 1, timeout_s: float = 30) -> list[Delivery]:
        deadline = time.monotonic() + timeout_s
        while True:
            found = [d for d in self.deliveries if d.path == "/" + path.lstrip("/")]
            if len(found) >= count:
                return found
            assert time.monotonic() < deadline, f"{path}: {len(found)} of {count} deliveries"
            time.sleep(0.05)


@pytest.fixture
def raw_receiver() -> Iterator[RawReceiver]:
    receiver = RawReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            headers = {key.lower(): value for key, value in self.headers.items()}
            receiver.deliveries.append(Delivery(self.path, headers, body))
            self.send_response(receiver.status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()
