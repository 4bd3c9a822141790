"""`invoicing serve` / `worker` refuse to start on a chain that is not what the configuration
says (exit 1, one line naming the chain and what differs), and start when it is."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from invoicing.addresses import normalize_address
from invoicing.chain.abi import abi_function, encode_call
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import MOCK_AGGREGATOR, PAYMENT_FACTORY
from invoicing.chain.checks import PROBE_OWNER, PROBE_SALT
from invoicing.chain.deploy import DevDeployment
from invoicing.chain.escrows import escrow_address
from invoicing.chain.evm import EvmClient
from invoicing.migrate import upgrade_sync
from tests.conftest import new_database_url
from tests.support.rpc_log import Rewrite, recording_proxy
from tests.support.server import free_port

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

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
    feed_currency: str | None = None,
) -> Path:
    path = tmp_path / "chains.toml"
    feed = (
        ""
        if feed_currency is None
        else "[[chain.feed]]\n"
        'asset = "native"\n'
        f'currency = "{feed_currency}"\n'
        f'address = "{dev.aggregator}"\n'
    )
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
        f"decimals = {dev.token_decimals if decimals is None else decimals}\n" + feed
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
        [INVOICING, *command], capture_output=True, text=True, env=env, timeout=300, check=False
    )


SERVE = ["serve", "--port", "0"]
PREDICT_SELECTOR = "0x" + abi_function(PAYMENT_FACTORY, "predictEscrow").selector.hex()


def predicting(address: str) -> Rewrite:
    """A node's answers, except that the factory's predictEscrow returns ``address``."""

    def lie(request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        data = request["params"][0].get("data", "") if request["method"] == "eth_call" else ""
        if data.startswith(PREDICT_SELECTOR):
            return {**answer, "result": "0x" + bytes(12).hex() + address[2:].lower()}
        return answer

    return lie


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
        f"refusing to start: chain 31337 (Anvil): the code at factory {dev.token} is not a "
        "known PaymentFactory version"
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


def test_refuses_a_feed_whose_description_is_another_pair(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str
) -> None:
    chains = chains_file(tmp_path, anvil, dev, feed_currency="EUR")

    result = run(["worker"], environment(database_url, chains))

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"refusing to start: chain 31337 (Anvil): price feed ETH / EUR {dev.aggregator}: "
        "description() is 'ETH / USD'"
    ]


async def test_refuses_a_feed_whose_latest_round_is_stale(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str, evm: EvmClient
) -> None:
    chains = chains_file(tmp_path, anvil, dev, feed_currency="USD")
    updated_at = int(time.time()) - 2 * 3600
    latest = int.from_bytes(
        await evm.eth_call(dev.aggregator, encode_call(MOCK_AGGREGATOR, "latestRound")), "big"
    )
    round_ = (latest + 1, 3_000 * 10**8, updated_at, updated_at, latest + 1)
    stale = encode_call(MOCK_AGGREGATOR, "setRoundData", *round_)
    assert (await evm.transact(RELAYER_KEY, dev.aggregator, stale))["status"] == 1
    try:
        result = await asyncio.to_thread(run, ["worker"], environment(database_url, chains))
    finally:
        fresh = encode_call(MOCK_AGGREGATOR, "setAnswer", 3_000 * 10**8)
        assert (await evm.transact(RELAYER_KEY, dev.aggregator, fresh))["status"] == 1

    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"refusing to start: chain 31337 (Anvil): price feed ETH / USD {dev.aggregator}: "
        f"latest round {latest + 1} is stale (updated at {updated_at}, heartbeat 3600 s)"
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
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment
) -> None:
    # A database of its own: the session's holds other tests' secrets, sealed under other
    # INVOICING_SECRET values, and serve refuses to start on those.
    database_url, drop = new_database_url()
    upgrade_sync(database_url)
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
        deadline = time.monotonic() + 120
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
        drop()

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


async def test_refuses_a_factory_whose_predict_escrow_disagrees(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment, database_url: str
) -> None:
    # A node that answers predictEscrow with another address: the service's CREATE2
    # derivation would no longer find the escrows the factory sweeps.
    elsewhere = "0x00000000000000000000000000000000DeaDBeef"

    async with recording_proxy(anvil.url, predicting(elsewhere)) as (proxy_url, log):
        chains = chains_file(tmp_path, anvil, dev)
        chains.write_text(chains.read_text().replace(anvil.url, proxy_url))
        process = await asyncio.create_subprocess_exec(
            INVOICING,
            *SERVE,
            env=environment(database_url, chains),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(), timeout=300)

    derived = escrow_address(dev.factory, PROBE_OWNER, PROBE_SALT)
    assert process.returncode == 1
    assert err.decode().splitlines() == [
        f"refusing to start: chain 31337 (Anvil): factory {dev.factory} predictEscrow gives "
        f"{elsewhere}, the service derives {derived}"
    ]
    assert [method for method, _ in log.calls][:2] == ["eth_chainId", "eth_getCode"]


async def test_dev_refuses_the_same_way(tmp_path: Path) -> None:
    # `invoicing dev --rpc-url` on a node that lies about predictEscrow (its own anvil: dev
    # deploys from the relayer's account, which the shared node's tests rely on).
    elsewhere = normalize_address("0x" + "ee" * 20)
    with AnvilProcess() as node:
        async with recording_proxy(node.url, predicting(elsewhere)) as (proxy_url, _log):
            process = await asyncio.create_subprocess_exec(
                INVOICING,
                "dev",
                "--rpc-url",
                proxy_url,
                "--port",
                str(free_port()),
                "--database-url",
                f"sqlite:///{tmp_path}/dev.db",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(process.communicate(), timeout=300)

    assert process.returncode == 1
    (line,) = err.decode().splitlines()
    assert line.startswith("refusing to start: chain 31337 (Anvil (local)): factory 0x")
    assert f"predictEscrow gives {elsewhere}, the service derives 0x" in line
    assert out == b""  # no ready line
