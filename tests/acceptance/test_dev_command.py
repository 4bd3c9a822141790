"""`invoicing dev` as a user runs it: one command, a ready line, a working API, a clean stop."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from invoicing.chain import artifacts
from invoicing.chain.anvil import DEV_ADDRESSES, DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.deploy import deterministic_address, dev_aggregator_init_code
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
            timeout=300,
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
        # The ETH / USD MockAggregator, deployed last (the addresses above are unchanged).
        feeds = {"ETH/USD": deterministic_address(dev_aggregator_init_code())}
        assert ready["feeds"] == feeds
        assert ready["chains"] == [
            {
                "chain_id": 31337,
                "rpc_url": f"http://127.0.0.1:{chain_port}",
                "factory": ready["factory"],
                "tokens": {"TUSD": tusd},
                "feeds": feeds,
            }
        ]
        assert ready["relayer"] == "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
        # The service's refund delegate: anvil's last public test account.
        assert ready["refund_delegate"] == "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"
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
        # A price in USD: in ETH through the dev feed (3,000 USD), in TUSD one to one.
        for fields, required in (({}, str(10**16)), ({"tokenAddress": tusd}, "30000000")):
            priced = httpx.post(
                f"{ready['base_url']}/integration/invoices",
                json={**body, "amount": "30.00", "currency": "USD", **fields},
                headers={"x-service-api-key": key},
            )
            assert priced.status_code == 201, priced.text
            assert priced.json()["requiredRaw"] == required
        wrong = httpx.post(
            f"{ready['base_url']}/integration/invoices",
            json=body,
            headers={"x-service-api-key": key[:-1] + ("A" if key[-1] != "A" else "B")},
        )
        assert wrong.status_code == 401
        assert httpx.get(f"{ready['base_url']}/healthz").json() == {"status": "ok"}
        readyz = httpx.get(f"{ready['base_url']}/readyz")
        assert readyz.status_code == 200 and readyz.json()["ready"] is True
        # The ready line's dashboard link signs in as that owner, once.
        link = ready["dashboard"]
        assert link.startswith(f"{ready['base_url']}/dashboard/login/link/dl_")
        with httpx.Client() as browser:
            assert browser.get(link).status_code == 200
            overview = browser.get(f"{ready['base_url']}/dashboard")
            assert overview.status_code == 200 and ready["owner"] in overview.text
        assert httpx.get(link).status_code == 401
        assert port_is_open(chain_port)
    finally:
        process.send_signal(stop_signal)
        output = process.communicate(timeout=30)[0].decode()
    # The ready line is printed on stdout too, exactly once.
    assert sum(1 for line in output.splitlines() if line.startswith('{"base_url"')) == 1
    assert not port_is_open(chain_port)


@pytest.mark.parametrize(
    ("busy_option", "says"),
    [
        ("--chain-port", "(anvil's, chain 31337) is in use; choose another with --chain-port"),
        ("--port", "(the API's) is in use; choose another with --port"),
    ],
    ids=["chain-port", "api-port"],
)
def test_dev_refuses_a_busy_port_in_one_line(busy_option: str, says: str) -> None:
    ports = {"--port": free_port(), "--chain-port": free_port()}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports[busy_option]))
        taken.listen()
        result = subprocess.run(
            [INVOICING, "dev", *(str(part) for option in ports.items() for part in option)],
            capture_output=True,
            text=True,
            timeout=300,
        )

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == f"refusing to start: port {ports[busy_option]} {says}\n"


def run_operator(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([INVOICING, *args], capture_output=True, text=True, env=env, timeout=120)


def test_dev_files_live_in_one_temporary_directory_that_operator_commands_read(
    tmp_path: Path,
) -> None:
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    ready_file = tmp_path / "ready.json"
    process = subprocess.Popen(
        [INVOICING, "dev", "--port", str(free_port()), "--chain-port", str(free_port())]
        + ["--ready-file", str(ready_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(temp_dir)},
    )
    try:
        ready = json.loads(wait_for_file(ready_file, process))
        # Given a dev service that names its database and its settings file, both in one
        # directory of the temporary directory,
        env_file = Path(ready["env_file"])
        run_dir = env_file.parent
        assert run_dir.parent == temp_dir and run_dir.name.startswith("invoicing-dev-")
        assert ready["database_url"] == f"sqlite+aiosqlite:///{run_dir}/dev.db"
        assert (run_dir / "dev.db").is_file() and env_file.name == "dev.env"
        # and an invoice paid on its chain,
        owner, key = ready["owner"], ready["api_key"]
        headers = {"x-service-api-key": key}
        created = httpx.post(
            f"{ready['base_url']}/integration/invoices",
            json={"ownerAddress": owner, "chainId": 31337, "amount": "0.01"},
            headers=headers,
        )
        assert created.status_code == 201, created.text
        escrow = created.json()["paymentAddress"]
        payment = {"from": DEV_ADDRESSES[1], "to": escrow, "value": hex(10**16)}
        httpx.post(
            ready["rpc_url"],
            json={"jsonrpc": "2.0", "id": 1, "method": "eth_sendTransaction", "params": [payment]},
        ).raise_for_status()
        status_url = f"{ready['base_url']}/integration/invoices/status"
        lookup = {"ownerAddress": owner, "paymentAddress": escrow}
        assert (
            httpx.get(status_url, params=lookup, headers=headers).json()["invoice"]["status"]
            == "paid"
        )
        # when a shell that exports another service's database runs the operator commands
        # with the dev service's env file,
        shell = {
            **{k: v for k, v in os.environ.items() if not k.startswith("INVOICING_")},
            "INVOICING_DATABASE_URL": f"sqlite:///{tmp_path}/another-service.db",
        }
        parked = run_operator(["parked", "--env-file", str(env_file)], shell)
        withdrawn = run_operator(
            ["withdraw", "--now", "--owner", owner, "--timeout-s", "60"]
            + ["--env-file", str(env_file)],
            shell,
        )
        without_the_file = run_operator(["parked"], shell)
        link = run_operator(
            ["dashboard-link", "--owner", owner, "--env-file", str(env_file)], shell
        )

        # then they work on the dev service's database and chain:
        assert (parked.returncode, parked.stdout, parked.stderr) == (0, "", "")
        assert link.returncode == 0, link.stderr
        assert link.stdout.startswith(f"{ready['base_url']}/dashboard/login/link/dl_")
        with httpx.Client() as browser:
            assert browser.get(link.stdout.strip()).status_code == 200
            assert owner in browser.get(f"{ready['base_url']}/dashboard").text
        assert withdrawn.returncode == 0, withdrawn.stdout + withdrawn.stderr
        hash_ = "0x[0-9a-f]{64}"
        assert re.fullmatch(
            "chain 31337: 1 withdrawal transaction\\(s\\) sent\n"
            f"  sent {hash_} \\(nonce \\d+\\): 1 escrow\\(s\\) of {owner}\n"
            f"  confirmed {hash_} in block \\d+\n",
            withdrawn.stdout,
        ), withdrawn.stdout
        invoice = httpx.get(status_url, params=lookup, headers=headers).json()["invoice"]
        assert (invoice["status"], invoice["withdrawn"]) == ("completed", True)
        assert not (tmp_path / "another-service.db").exists()
        # (without it they stop on the production defaults, as before)
        assert without_the_file.returncode == 2
        assert "INVOICING_SECRET must be set" in without_the_file.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    # and a normal stop leaves nothing behind in the temporary directory.
    assert process.returncode == 128 + signal.SIGTERM
    assert list(temp_dir.iterdir()) == []
