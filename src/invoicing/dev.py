"""``invoicing dev``: local chains, deployed contracts, SQLite, the API and every worker.

``--chains N`` starts N anvil nodes (chain ids 31337, 31338, …; ports ``chain_port``,
``chain_port + 1``, …). Each gets PaymentFactory at the same deterministic address (the one
``invoicing deploy`` prints) and its own TestToken (TUSD, also deterministic, so the same
address on each chain). The ready line keeps the first chain's keys and lists all chains
under ``"chains"``. It also names an owner, anvil account 0, and a fresh API key of that
owner (``"owner"``, ``"api_key"``), so a first request needs no signing step.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from eth_account import Account
from pydantic import SecretStr

from invoicing.auth.api_keys import create_api_key
from invoicing.chain.anvil import DEV_CHAIN_ID, DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.checks import verify_chains
from invoicing.chain.config import ChainConfig, TokenConfig
from invoicing.chain.deploy import DevDeployment, deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.migrate import upgrade
from invoicing.runtime import freeze_startup_objects
from invoicing.services import Services, build_services
from invoicing.settings import Settings
from invoicing.web.app import create_app

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DevOptions:
    host: str
    port: int
    chain_port: int
    rpc_url: str | None
    database_url: str
    ready_file: Path | None
    chains: int = 1


async def run_dev(options: DevOptions) -> None:
    """Run until Ctrl-C / SIGTERM; stops the anvil nodes it started on the way out."""
    anvils = (
        []
        if options.rpc_url
        else [
            AnvilProcess(options.chain_port + i, chain_id=DEV_CHAIN_ID + i, block_time_s=None)
            for i in range(options.chains)
        ]
    )
    try:
        for anvil in anvils:
            anvil.start()
        rpc_urls = [options.rpc_url] if options.rpc_url else [anvil.url for anvil in anvils]
        await _serve(options, rpc_urls)
    finally:
        for anvil in anvils:
            anvil.stop()


def _chain_name(chain_id: int) -> str:
    if chain_id == DEV_CHAIN_ID:
        return "Anvil (local)"
    if DEV_CHAIN_ID < chain_id < DEV_CHAIN_ID + 100:
        return f"Anvil (local {chain_id})"
    return "Dev chain"


def _chain_config(rpc_url: str, deployment: DevDeployment, relayer_key: str) -> ChainConfig:
    return ChainConfig(
        chain_id=deployment.chain_id,
        name=_chain_name(deployment.chain_id),
        rpc_url=rpc_url,
        factory=deployment.factory,
        confirmations=1,
        relayer_key=SecretStr(relayer_key),
        tokens=(TokenConfig(deployment.token, deployment.token_symbol, deployment.token_decimals),),
    )


async def _deploy(rpc_url: str, relayer_key: str) -> DevDeployment:
    evm = EvmClient.connect(rpc_url)
    try:
        return await deploy_dev_contracts(evm, relayer_key)
    finally:
        await evm.aclose()


async def _serve(options: DevOptions, rpc_urls: Sequence[str]) -> None:
    relayer_key = DEV_PRIVATE_KEYS[0]
    deployments = [await _deploy(url, relayer_key) for url in rpc_urls]
    base_url = f"http://{options.host}:{options.port}"
    settings = Settings(
        environment="development",
        database_url=options.database_url,
        base_url=base_url,
        payment_page_url=base_url,
        webhook_allow_private=True,
        chains=[
            _chain_config(url, deployment, relayer_key)
            for url, deployment in zip(rpc_urls, deployments, strict=True)
        ],
    )
    chains = list(settings.chain_configs().values())
    await verify_chains(chains)
    await upgrade(settings.database_url)
    services = build_services(settings)
    owner = Account.from_key(DEV_PRIVATE_KEYS[0]).address
    api_key = await _issue_dev_key(services, owner)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(services),
            host=options.host,
            port=options.port,
            log_level="warning",
            log_config=None,  # uvicorn's lines go through invoicing.logs like every other
            proxy_headers=False,
        )
    )
    freeze_startup_objects()
    first = chains[0]
    ready = {
        "base_url": base_url,
        "rpc_url": rpc_urls[0],
        "chain_id": first.chain_id,
        "factory": first.factory,
        "tokens": {token.symbol: token.address for token in first.tokens},
        "relayer": Account.from_key(relayer_key).address,
        # A first curl needs no signing step: anvil account 0 as owner, with a key of its own.
        "owner": owner,
        "api_key": api_key,
        "chains": [
            {
                "chain_id": chain.chain_id,
                "rpc_url": url,
                "factory": chain.factory,
                "tokens": {token.symbol: token.address for token in chain.tokens},
            }
            for url, chain in zip(rpc_urls, chains, strict=True)
        ],
    }
    try:
        serving = _announce_when_started(server, ready, options.ready_file)
        await serving
    finally:
        await services.aclose()


async def _issue_dev_key(services: Services, owner: str) -> str:
    """A new API key for ``owner`` on every start (keys are stored hashed, so an earlier
    one cannot be shown again)."""
    async with services.db.transaction() as session:
        _row, api_key = await create_api_key(
            session, owner, "invoicing dev", services.settings.secret, services.clock.now_ms()
        )
    return api_key.get_secret_value()


async def _announce_when_started(
    server: uvicorn.Server, ready: dict[str, object], ready_file: Path | None
) -> None:
    import asyncio

    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # startup failed: surface the error
            return
        await asyncio.sleep(0.05)
    line = json.dumps(ready)
    print(line, flush=True)  # noqa: T201 - the ready line is the command's output
    if ready_file is not None:
        ready_file.write_text(line + "\n")  # noqa: ASYNC240 - once, tiny
    with contextlib.suppress(asyncio.CancelledError):
        await task
