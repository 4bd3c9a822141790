"""`invoicing deploy` as an operator runs it: PaymentFactory through the deterministic
deployment proxy, the same address every time, verified, idempotent; clear one-line refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from eth_account import Account

from invoicing.chain import artifacts
from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.artifacts import ESCROW_READER, PAYMENT_FACTORY, SUBSCRIPTIONS, load_artifact
from invoicing.chain.deploy import (
    DETERMINISTIC_DEPLOYMENT_PROXY,
    PROXY_DEPLOYMENT_COST_WEI,
    PROXY_DEPLOYMENT_SIGNER,
    PROXY_DEPLOYMENT_TX,
    PROXY_RUNTIME_CODE,
    deploy_dev_contracts,
    deterministic_address,
    factory_address,
    subscriptions_address,
)
from invoicing.chain.evm import EvmClient
from invoicing.chain.reader import reader_address
from invoicing.chain.versions import same_runtime_code
from tests.support.server import free_port

pytestmark = [pytest.mark.acceptance, pytest.mark.slow]

INVOICING = str(Path(sys.executable).parent / "invoicing")
DEPLOYER_KEY = DEV_PRIVATE_KEYS[5]
DEPLOYER = Account.from_key(DEPLOYER_KEY).address


def run_deploy(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [INVOICING, "deploy", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DEPLOYER_KEY": DEPLOYER_KEY, **(env or {})},
        timeout=300,
        check=False,
    )


def one_line(text: str) -> str:
    lines = text.splitlines()
    assert len(lines) == 1, text
    return lines[0]


@pytest.fixture
async def fresh_chain() -> AsyncIterator[tuple[AnvilProcess, EvmClient]]:
    with AnvilProcess() as node:
        evm = EvmClient.connect(node.url)
        yield node, evm
        await evm.aclose()


async def test_deploy_twice_same_address_verified_second_is_a_no_op(
    fresh_chain: tuple[AnvilProcess, EvmClient], tmp_path: Path
) -> None:
    node, evm = fresh_chain
    assert await evm.get_code(factory_address()) == b""

    first = run_deploy("--rpc-url", node.url, "--deployer-key", "env:DEPLOYER_KEY")

    assert first.returncode == 0, first.stderr
    printed = json.loads(one_line(first.stdout))
    assert printed["chainId"] == 31337
    assert printed["factory"] == factory_address()
    receipt = await evm.get_receipt(printed["txHash"])
    assert receipt is not None and receipt["status"] == 1
    assert receipt["to"].lower() == DETERMINISTIC_DEPLOYMENT_PROXY.lower()
    assert receipt["from"].lower() == DEPLOYER.lower()
    code = await evm.get_code(printed["factory"])
    assert same_runtime_code(code, load_artifact(PAYMENT_FACTORY))
    # The EscrowReader after it, the same way.
    assert printed["reader"] == reader_address() and printed["readerTxHash"] is not None
    assert same_runtime_code(await evm.get_code(reader_address()), load_artifact(ESCROW_READER))
    # And Subscriptions, bound to that factory.
    assert printed["subscriptions"] == subscriptions_address()
    assert printed["subscriptionsTxHash"] is not None
    subscriptions_code = await evm.get_code(subscriptions_address())
    assert same_runtime_code(subscriptions_code, load_artifact(SUBSCRIPTIONS))
    nonce_after_first = await evm.get_transaction_count(DEPLOYER)

    key_file = tmp_path / "deployer.key"
    key_file.write_text(DEPLOYER_KEY + "\n")
    second = run_deploy("--rpc-url", node.url, "--deployer-key", f"file:{key_file}")

    assert second.returncode == 0, second.stderr
    assert json.loads(one_line(second.stdout)) == {
        "chainId": 31337,
        "factory": printed["factory"],
        "txHash": None,
        "reader": reader_address(),
        "readerTxHash": None,
        "subscriptions": subscriptions_address(),
        "subscriptionsTxHash": None,
    }
    # Nothing was sent the second time.
    assert await evm.get_transaction_count(DEPLOYER) == nonce_after_first
    assert await evm.get_code(printed["factory"]) == code


async def test_missing_proxy_says_how_to_deploy_it_and_that_works(
    fresh_chain: tuple[AnvilProcess, EvmClient],
) -> None:
    node, evm = fresh_chain
    await evm.call_rpc("anvil_setCode", [DETERMINISTIC_DEPLOYMENT_PROXY, "0x"])
    nonce_before = await evm.get_transaction_count(DEPLOYER)

    refused = run_deploy("--rpc-url", node.url, "--deployer-key", "env:DEPLOYER_KEY")

    assert refused.returncode == 1
    assert refused.stdout == ""
    line = one_line(refused.stderr)
    assert DETERMINISTIC_DEPLOYMENT_PROXY in line
    assert PROXY_DEPLOYMENT_SIGNER in line and PROXY_DEPLOYMENT_TX in line
    assert str(PROXY_DEPLOYMENT_COST_WEI) in line
    assert "github.com/Arachnid/deterministic-deployment-proxy" in line
    assert DEPLOYER_KEY[2:] not in line
    assert await evm.get_code(factory_address()) == b""
    assert await evm.get_transaction_count(DEPLOYER) == nonce_before

    # Following the line: fund the one-time signer, send the presigned transaction.
    funded = await evm.transact(
        DEPLOYER_KEY, PROXY_DEPLOYMENT_SIGNER, value=PROXY_DEPLOYMENT_COST_WEI
    )
    assert funded["status"] == 1
    proxy_tx = await evm.send_raw_transaction(bytes.fromhex(PROXY_DEPLOYMENT_TX[2:]))
    assert (await evm.wait_for_receipt(proxy_tx))["status"] == 1
    assert await evm.get_code(DETERMINISTIC_DEPLOYMENT_PROXY) == PROXY_RUNTIME_CODE

    deployed = run_deploy("--rpc-url", node.url, "--deployer-key", "env:DEPLOYER_KEY")

    assert deployed.returncode == 0, deployed.stderr
    printed = json.loads(one_line(deployed.stdout))
    assert printed["factory"] == factory_address() and printed["txHash"] is not None


async def test_other_code_at_the_factory_address_is_refused(
    fresh_chain: tuple[AnvilProcess, EvmClient],
) -> None:
    node, evm = fresh_chain
    impostor = load_artifact(PAYMENT_FACTORY).deployed_bytecode[:-1] + b"\x00"
    await evm.call_rpc("anvil_setCode", [factory_address(), "0x" + impostor.hex()])

    result = run_deploy("--rpc-url", node.url, "--deployer-key", "env:DEPLOYER_KEY")

    assert result.returncode == 1 and result.stdout == ""
    assert one_line(result.stderr) == (
        f"error: chain 31337: {factory_address()} holds code that is not the shipped PaymentFactory"
    )
    assert await evm.get_code(factory_address()) == impostor


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--deployer-key", "env:DEPLOYER_KEY"], {}, "--rpc-url is required"),
        (
            ["--rpc-url", "ws://127.0.0.1:8545", "--deployer-key", "env:DEPLOYER_KEY"],
            {},
            "must be an http(s) URL",
        ),
        (["--rpc-url", "http://127.0.0.1:1"], {}, "--deployer-key is required"),
        (
            ["--rpc-url", "http://127.0.0.1:1", "--deployer-key", "env:NOT_SET_ANYWHERE"],
            {},
            "environment variable NOT_SET_ANYWHERE is not set",
        ),
        (
            ["--rpc-url", "http://127.0.0.1:1", "--deployer-key", "env:DEPLOYER_KEY"],
            {"DEPLOYER_KEY": "0x1234"},
            "--deployer-key env:DEPLOYER_KEY is not a valid private key",
        ),
        (
            ["--rpc-url", "http://127.0.0.1:1", "--deployer-key", DEPLOYER_KEY],
            {},
            "--deployer-key must be env:VAR or file:PATH",
        ),
        (
            ["--rpc-url", "http://127.0.0.1:1", "--deployer-key", "file:/nonexistent/key"],
            {},
            "--deployer-key: cannot read /nonexistent/key",
        ),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    args: list[str], env: dict[str, str], message: str
) -> None:
    result = run_deploy(*args, env=env)

    assert result.returncode == 2
    assert result.stdout == ""
    line = one_line(result.stderr)
    assert line.startswith("error: ") and message in line
    assert DEPLOYER_KEY[2:] not in line


def test_unreachable_node_exits_1_with_one_line() -> None:
    url = f"http://127.0.0.1:{free_port()}/secret-api-key"
    result = run_deploy("--rpc-url", url, "--deployer-key", "env:DEPLOYER_KEY")

    assert result.returncode == 1 and result.stdout == ""
    assert one_line(result.stderr) == "error: the RPC node does not answer"


async def test_dev_deployment_installs_a_missing_proxy_and_lands_at_the_same_address() -> None:
    with AnvilProcess(extra_args=["--disable-default-create2-deployer"]) as node:
        evm = EvmClient.connect(node.url)
        try:
            assert await evm.get_code(DETERMINISTIC_DEPLOYMENT_PROXY) == b""

            deployment = await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])

            assert await evm.get_code(DETERMINISTIC_DEPLOYMENT_PROXY) == PROXY_RUNTIME_CODE
            assert deployment.factory == factory_address()
            assert deployment.token == deterministic_address(artifacts.test_token_bytecode())
        finally:
            await evm.aclose()
