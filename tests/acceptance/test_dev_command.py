"""`invoicing dev` as a user runs it: one command, a ready line, a working API, a clean stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from invoicing.chain import artifacts
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.deploy import deterministic_address
from tests.support.server import free_port

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

INVOICING = str(Path(sys.executable).parent / "invoicing")


def wait_for_file(path: Path, process: subprocess.Popen[bytes], timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
        time.sleep(0.1)
    raise AssertionError("invoicing dev did not become ready")


def factory_deploy_prints() -> str:
    """What `invoicing deploy` prints as the factory against a fresh anvil."""
    with AnvilProcess() as node:
        result = subprocess.run(
            [INVOICING, "deploy", "--rpc-url", node.url, "--deployer-key", "env:KEY"],
            capture_output=True,
            text=True,
            env={**os.environ, "KEY": DEV_PRIVATE_KEYS[3]},
            timeout=60,
            check=True,
        )
    factory: str = json.loads(result.stdout)["factory"]
    return factory


def port_is_open(port: int) -> bool:
    try:
        httpx.post(
            f"http://127.0.0.1:{port}",
            json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
            timeout=1,
        )
        return True
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_dev_starts_everything_and_stops_everything(tmp_path: Path, stop_signal: int) -> None:
    api_port, chain_port = free_port(), free_port()
    ready_file = tmp_path / "ready.json"
    process = subprocess.Popen(
        [
            INVOICING,
            "dev",
            "--port",
            str(api_port),
            "--chain-port",
            str(chain_port),
            "--ready-file",
            str(ready_file),
            "--database-url",
            f"sqlite:///{tmp_path}/dev.db",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ},
    )
    try:
        ready = json.loads(wait_for_file(ready_file, process))

        assert ready["base_url"] == f"http://127.0.0.1:{api_port}"
        assert ready["rpc_url"] == f"http://127.0.0.1:{chain_port}"
        assert ready["chain_id"] == 31337
        # The factory `invoicing deploy` puts on any chain; TUSD deterministic too.
        assert ready["factory"] == factory_deploy_prints()
        tusd = deterministic_address(artifacts.test_token_bytecode())
        assert ready["tokens"] == {"TUSD": tusd}
        assert ready["chains"] == [
            {
                "chain_id": 31337,
                "rpc_url": f"http://127.0.0.1:{chain_port}",
                "factory": ready["factory"],
                "tokens": {"TUSD": tusd},
            }
        ]
        assert ready["relayer"] == "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        # The README's first request works as it stands: anvil account 0 and its own key.
        assert ready["owner"] == "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        key = ready["api_key"]
        assert key.startswith("sk_") and len(key) > 40
        body = {"ownerAddress": ready["owner"], "chainId": 31337, "amount": "0.01"}
        created = httpx.post(
            f"{ready['base_url']}/integration/invoices",
            json=body,
            headers={"x-service-api-key": key},
        )
        assert created.status_code == 201, created.text
        assert (created.json()["invoiceId"], created.json()["requiredRaw"]) == ("1", str(10**16))
        wrong = httpx.post(
            f"{ready['base_url']}/integration/invoices",
            json=body,
            headers={"x-service-api-key": key[:-1] + ("A" if key[-1] != "A" else "B")},
        )
        assert wrong.status_code == 401
        assert httpx.get(f"{ready['base_url']}/healthz").json() == {"status": "ok"}
        readyz = httpx.get(f"{ready['base_url']}/readyz")
        assert readyz.status_code == 200 and readyz.json()["ready"] is True
        assert port_is_open(chain_port)
    finally:
        process.send_signal(stop_signal)
        output = process.communicate(timeout=30)[0].decode()
    # The ready line is printed on stdout too, exactly once.
    assert sum(1 for line in output.splitlines() if line.startswith('{"base_url"')) == 1
    assert not port_is_open(chain_port)
