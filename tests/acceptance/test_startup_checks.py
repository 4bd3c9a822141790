"""`invoicing serve` / `worker` refuse to start on a chain that is not what the configuration
says (exit 1, one line naming the chain and what differs), and start when it is."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.deploy import DevDeployment
from tests.support.server import free_port

pytestmark = pytest.mark.acceptance

INVOICING = str(Path(sys.executable).parent / "invoicing")
RELAYER_KEY = DEV_PRIVATE_KEYS[0]
SECRET = "production-secret-" + "p" * 32


def chains_file(
    tmp_path: Path,
    anvil: AnvilProcess,
    dev: DevDeployment,
    *,
    chain_id: int | None = None,
    name: str = "Anvil",
    factory: str | None = None,
    decimals: int | None = None,
    relayer_key: str = "env:TEST_RELAYER_KEY",
) -> Path:
    path = tmp_path / "chains.toml"
    path.write_text(
        "[[chain]]\n"
        f"chain_id = {chain_id or dev.chain_id}\n"
        f'name = "{name}"\n'
        f'rpc_url = "{anvil.url}"\n'
        f'factory = "{factory or dev.factory}"\n'
        f'relayer_key = "{relayer_key}"\n'
        "[[chain.token]]\n"
        f'address = "{dev.token}"\n'
        'symbol = "TUSD"\n'
        f"decimals = {dev.token_decimals if decimals is None else decimals}\n"
    )
    return path


def environment(database_url: str, chains: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "INVOICING_DATABASE_URL": database_url,
        "INVOICING_ENVIRONMENT": "development",
        "INVOICING_CHAINS_FILE": str(chains),
        "TEST_RELAYER_KEY": RELAYER_KEY,
        **extra,
    }


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [INVOICING, *command], capture_output=True, text=True, env=env, timeout=60, check=False
    )


SERVE = ["serve", "--port", "0"]


@pytest.mark.parametrize("command", [SERVE, ["worker"]])
def test_refuses_a_node_on_another_chain(
    command: list[str],
    tmp_path: Path,
    anvil: AnvilProcess,
    dev: DevDeployment,
    database_url: str,
) -> None:
    chains = chains_file(tmp_path, anvil, dev, chain_id=1, name="Ethereum")

    result = run(command, environment(database_url, chains))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "refusing to start: chain 1 (Ethereum): the RPC node reports chain id 31337, configured 1"
    ]


def test_refuses_a_factory_address_without_code(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str
) -> None:
    nothing = "0x000000000000000000000000000000000000bEEF"
    chains = chains_file(tmp_path, anvil, dev, factory=nothing)

    result = run(SERVE, environment(database_url, chains))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"refusing to start: chain 31337 (Anvil): no contract at the factory address {nothing}"
    ]


def test_refuses_another_contract_at_the_factory_address(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str
) -> None:
    chains = chains_file(tmp_path, anvil, dev, factory=dev.token)  # a TestToken

    result = run(SERVE, environment(database_url, chains))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"refusing to start: chain 31337 (Anvil): the code at factory {dev.token} is not the "
        "shipped PaymentFactory"
    ]


def test_refuses_a_token_whose_decimals_differ(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str
) -> None:
    chains = chains_file(tmp_path, anvil, dev, decimals=18)

    result = run(["worker"], environment(database_url, chains))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"refusing to start: chain 31337 (Anvil): token TUSD {dev.token}: decimals() is 6, "
        "configured 18"
    ]


def test_refuses_an_inline_relayer_key_outside_development(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str
) -> None:
    chains = chains_file(tmp_path, anvil, dev, relayer_key=RELAYER_KEY)
    env = environment(
        database_url, chains, INVOICING_ENVIRONMENT="production", INVOICING_SECRET=SECRET
    )

    result = run(SERVE, env)

    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert "inline relayer_key is refused outside development" in result.stderr
    assert RELAYER_KEY[2:] not in result.stderr + result.stdout
    assert SECRET not in result.stderr + result.stdout


def test_starts_on_the_chain_it_is_configured_for(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str
) -> None:
    port = free_port()
    chains = chains_file(tmp_path, anvil, dev)
    env = environment(
        database_url, chains, INVOICING_ENVIRONMENT="production", INVOICING_SECRET=SECRET
    )
    process = subprocess.Popen(
        [INVOICING, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "serve did not start"
                time.sleep(0.2)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)

    assert ready.status_code == 200 and ready.json()["ready"] is True
    assert "refusing" not in output
    assert RELAYER_KEY[2:] not in output and SECRET not in output


def test_refuses_a_node_that_does_not_answer_without_showing_its_url(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str
) -> None:
    chains = chains_file(tmp_path, anvil, dev)
    silent = f"http://127.0.0.1:{free_port()}/secret-provider-key"
    chains.write_text(chains.read_text().replace(anvil.url, silent))

    result = run(SERVE, environment(database_url, chains))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "refusing to start: chain 31337 (Anvil): the RPC node does not answer"
    ]
