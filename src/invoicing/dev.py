"""``invoicing dev``: a local chain, deployed contracts, SQLite, the API and every worker."""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from eth_account import Account
from pydantic import SecretStr

from invoicing.api.app import create_app
from invoicing.chain.anvil import DEV_CHAIN_ID, DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.checks import verify_chains
from invoicing.chain.deploy import deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.migrate import upgrade
from invoicing.runtime import freeze_startup_objects
from invoicing.services import build_services
from invoicing.settings import ChainConfig, Settings, TokenConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DevOptions:
    host: str
    port: int
    chain_port: int
    rpc_url: str | None
    database_url: str
    ready_file: Path | None


async def run_dev(options: DevOptions) -> None:
    """Run until Ctrl-C / SIGTERM; stops anvil (if it started one) on the way out."""
    anvil = None if options.rpc_url else AnvilProcess(options.chain_port, block_time_s=None)
    try:
        if anvil is not None:
            anvil.start()
        rpc_url = options.rpc_url or (anvil.url if anvil else "")
        await _serve(options, rpc_url)
    finally:
        if anvil is not None:
            anvil.stop()


async def _serve(options: DevOptions, rpc_url: str) -> None:
    relayer_key = DEV_PRIVATE_KEYS[0]
    evm = EvmClient.connect(rpc_url)
    try:
        deployment = await deploy_dev_contracts(evm, relayer_key)
    finally:
        await evm.aclose()
    base_url = f"http://{options.host}:{options.port}"
    settings = Settings(
        environment="development",
        database_url=options.database_url,
        base_url=base_url,
        payment_page_url=base_url,
        webhook_allow_private=True,
        chains=[
            ChainConfig(
                chain_id=deployment.chain_id,
                name="Anvil (local)" if deployment.chain_id == DEV_CHAIN_ID else "Dev chain",
                rpc_url=rpc_url,
                factory=deployment.factory,
                confirmations=1,
                relayer_key=SecretStr(relayer_key),
                tokens=(
                    TokenConfig(
                        deployment.token, deployment.token_symbol, deployment.token_decimals
                    ),
                ),
            )
        ],
    )
    chains = settings.chain_configs().values()
    await verify_chains(chains)
    await upgrade(settings.database_url)
    services = build_services(settings)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(services),
            host=options.host,
            port=options.port,
            log_level="warning",
            proxy_headers=False,
        )
    )
    freeze_startup_objects()
    ready = {
        "base_url": base_url,
        "rpc_url": rpc_url,
        "chain_id": deployment.chain_id,
        "factory": deployment.factory,
        "tokens": {token.symbol: token.address for chain in chains for token in chain.tokens},
        "relayer": Account.from_key(relayer_key).address,
    }
    try:
        serving = _announce_when_started(server, ready, options.ready_file)
        await serving
    finally:
        await services.aclose()


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
