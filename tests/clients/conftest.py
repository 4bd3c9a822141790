"""The clients as integrators use them: against a real ``invoicing dev`` process (its own
anvil, a fresh database of the run's kind), paid on anvil, webhooks to a real receiver.

One ``invoicing dev`` (shared with the other tests that drive it from outside) serves the
whole directory; every test works with its own owners, except where the dev command's own
owner and key are the point.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.support.dev_service import shared_dev


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
    refund_delegate: str  # the service's refund delegate address


@pytest.fixture(scope="session")
def dev_service(request: pytest.FixtureRequest) -> DevService:
    """The run's shared ``invoicing dev`` (``tests.support.dev_service``)."""
    ready = shared_dev(request.config).ready
    return DevService(
        base_url=ready["base_url"],
        rpc_url=ready["rpc_url"],
        chain_id=ready["chain_id"],
        factory=ready["factory"],
        tusd=ready["tokens"]["TUSD"],
        owner=ready["owner"],
        api_key=ready["api_key"],
        refund_delegate=ready["refund_delegate"],
    )


def pay(dev: DevService, payer: str, to: str, wei: int) -> str:
    """A native payment on the dev chain from one of anvil's unlocked accounts; anvil mines
    it at once. Returns the transaction hash."""
    answer = rpc(dev, "eth_sendTransaction", [{"from": payer, "to": to, "value": hex(wei)}])
    assert mined(dev, answer)["status"] == "0x1"
    return str(answer)


def mined(dev: DevService, tx_hash: str, timeout_s: float = 30) -> dict[str, Any]:
    """The receipt of ``tx_hash`` once anvil has mined it: automining follows the send, it is
    not part of it (a read just after a send may still see the block before)."""
    deadline = time.monotonic() + timeout_s
    while (receipt := rpc(dev, "eth_getTransactionReceipt", [tx_hash])) is None:
        assert time.monotonic() < deadline, f"{tx_hash} not mined"
        time.sleep(0.05)
    return dict(receipt)


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
