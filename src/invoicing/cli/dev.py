"""``invoicing dev``: local chains, deployed contracts, SQLite, the API and every worker.

``--chains N`` starts N anvil nodes (chain ids 31337, 31338, …; ports ``chain_port``,
``chain_port + 1``, …). Each gets PaymentFactory at the same deterministic address (the one
``invoicing deploy`` prints) and its own TestToken (TUSD, also deterministic, so the same
address on each chain), listed as pegged to USD, and a MockAggregator pricing the native coin
in USD (``"feeds"`` in the ready line; its answer can be set with ``setAnswer``). The feed's
answer is posted again, unchanged, when it is half its heartbeat old: at start-up (a node
given with ``--rpc-url`` may have run for weeks) and hourly while the command runs. The ready
line keeps the first chain's keys and lists all chains
under ``"chains"``. It also names an owner, anvil account 0, and a fresh API key of that
owner (``"owner"``, ``"api_key"``), so a first request needs no signing step.

A run keeps its files in a directory of its own under the system's temporary directory
(``invoicing-dev-…``), removed when it stops (Ctrl-C, SIGTERM, or a refusal to start): the
SQLite database, unless ``--database-url`` names one (then it is the user's, and kept), and
``dev.env``, the ``INVOICING_*`` settings of this service. The ready line names both
(``"database_url"``, without a password, and ``"env_file"``); the operator commands read the
file with ``--env-file`` to work on the running service (``invoicing withdraw --now
--env-file …``, ``invoicing parked --env-file …``).

A busy port (the API's, or a chain's) is refused before anything starts, in one line that
names the option to change it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import signal
import socket
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
import uvicorn
from eth_account import Account
from pydantic import SecretStr
from sqlalchemy.engine import make_url

from invoicing.auth.api_keys import create_api_key
from invoicing.auth.secrets import ServerSecrets
from invoicing.auth.sign_in import issue_link, login_url
from invoicing.chain.anvil import DEV_CHAIN_ID, DEV_PRIVATE_KEYS, AnvilError, AnvilProcess
from invoicing.chain.checks import ChainCheckFailed, verify_chains
from invoicing.chain.config import NATIVE, ChainConfig, FeedConfig
from invoicing.chain.deploy import DeploymentFailed, DevDeployment, deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.cli.common import configure_logging, refuse, verify_secrets_or_refuse
from invoicing.cli.dev_feeds import (
    DEV_FEED_CHECK_S,
    DEV_FEED_HEARTBEAT_S,
    keep_dev_feeds_fresh,
    refresh_feed,
)
from invoicing.migrate import upgrade
from invoicing.runtime import freeze_startup_objects
from invoicing.services import Services, build_services
from invoicing.settings import Settings
from invoicing.web.app import create_app

log = logging.getLogger(__name__)

MAX_DEV_CHAINS = 8
ENV_FILE_NAME = "dev.env"


@dataclass(frozen=True)
class DevOptions:
    host: str
    port: int
    chain_port: int
    rpc_url: str | None
    database_url: str
    ready_file: Path | None
    run_dir: Path  # where ENV_FILE_NAME goes
    chains: int = 1


def dev(
    port: Annotated[int, typer.Option(help="API port")] = 8000,
    chain_port: Annotated[int, typer.Option(help="anvil port")] = 8545,
    rpc_url: Annotated[str | None, typer.Option(help="use a running node instead")] = None,
    database_url: Annotated[
        str | None, typer.Option(help="default: a fresh SQLite file, removed on stop")
    ] = None,
    ready_file: Annotated[Path | None, typer.Option(help="also write the ready line here")] = None,
    host: Annotated[str, typer.Option(help="API bind address")] = "127.0.0.1",
    chains: Annotated[
        int,
        typer.Option(
            min=1,
            max=MAX_DEV_CHAINS,
            help="how many anvil chains (ids 31337, 31338, …; ports chain-port, chain-port+1, …)",
        ),
    ] = 1,
) -> None:
    """Everything in one process: anvil, contracts, SQLite, the API and all workers.

    Its files (the SQLite database, and dev.env: this service's settings for the operator
    commands' --env-file) live in a temporary directory removed when it stops; the ready line
    names them (database_url, env_file)."""
    configure_logging()
    # SIGTERM unwinds like Ctrl-C, so the anvil node this command started is stopped too
    # (uvicorn re-raises the signal it caught once the server has shut down).
    signal.signal(signal.SIGTERM, _exit_on_signal)
    if rpc_url and chains > 1:
        raise typer.BadParameter("--rpc-url runs one chain", param_hint="--chains")
    _refuse_busy_ports(host, port, [] if rpc_url else [chain_port + i for i in range(chains)])
    with tempfile.TemporaryDirectory(prefix="invoicing-dev-") as run_dir:
        options = DevOptions(
            host=host,
            port=port,
            chain_port=chain_port,
            rpc_url=rpc_url,
            database_url=database_url or f"sqlite+aiosqlite:///{run_dir}/dev.db",
            ready_file=ready_file,
            run_dir=Path(run_dir),
            chains=chains,
        )
        try:
            asyncio.run(run_dev(options))
        except (ChainCheckFailed, DeploymentFailed, AnvilError) as exc:
            refuse(exc)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _refuse_busy_ports(host: str, port: int, chain_ports: Sequence[int]) -> None:
    """Refuse, in one line naming the option, a port something else already listens on."""
    if _port_in_use(host, port):
        refuse(f"port {port} (the API's) is in use; choose another with --port")
    for i, chain_port in enumerate(chain_ports):
        if _port_in_use("127.0.0.1", chain_port):
            refuse(
                f"port {chain_port} (anvil's, chain {DEV_CHAIN_ID + i}) is in use; "
                "choose another with --chain-port"
            )


def _port_in_use(host: str, port: int) -> bool:
    """Whether binding ``host:port`` fails because the address is taken (bound as uvicorn
    and anvil bind, with SO_REUSEADDR, so a closed connection's TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


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
        tokens=(deployment.token_config,),
        feeds=(FeedConfig(NATIVE, "USD", deployment.aggregator, DEV_FEED_HEARTBEAT_S),),
    )


async def _deploy(rpc_url: str, relayer_key: str) -> DevDeployment:
    evm = EvmClient.connect(rpc_url)
    try:
        deployment = await deploy_dev_contracts(evm, relayer_key)
        await refresh_feed(evm, deployment.aggregator)
        return deployment
    finally:
        await evm.aclose()


async def _serve(options: DevOptions, rpc_urls: Sequence[str]) -> None:
    relayer_key = DEV_PRIVATE_KEYS[0]
    deployments = [await _deploy(url, relayer_key) for url in rpc_urls]
    base_url = f"http://{options.host}:{options.port}"
    chain_configs = [
        _chain_config(url, deployment, relayer_key)
        for url, deployment in zip(rpc_urls, deployments, strict=True)
    ]
    fields = _settings_fields(base_url, options.database_url, chain_configs)
    settings = Settings(**fields)
    env_file = options.run_dir / ENV_FILE_NAME
    env_file.write_text(env_file_text(fields))  # noqa: ASYNC240 - once, tiny
    chains = [_chain_facts(chain) for chain in settings.chain_configs().values()]
    await verify_chains(settings.chain_configs().values())
    await upgrade(settings.database_url)
    await verify_secrets_or_refuse(settings)  # --database-url may name a kept database
    services = build_services(settings)
    owner = Account.from_key(DEV_PRIVATE_KEYS[0]).address
    api_key = await _issue_dev_key(services, owner)
    link_token = await issue_link(
        services.db, owner, services.clock.now_ms(), settings.dashboard_link_ttl_s * 1000
    )
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
        "rpc_url": first["rpc_url"],
        "chain_id": first["chain_id"],
        "factory": first["factory"],
        "tokens": first["tokens"],
        "feeds": first["feeds"],
        "relayer": Account.from_key(relayer_key).address,
        "refund_delegate": Account.from_key(DEV_PRIVATE_KEYS[-1]).address,
        # A first curl needs no signing step: anvil account 0 as owner, with a key of its own.
        "owner": owner,
        "api_key": api_key,
        # One click into the dashboard as that owner, without a wallet (single-use, minutes).
        "dashboard": login_url(base_url, link_token),
        "chains": chains,
        "database_url": make_url(options.database_url).render_as_string(hide_password=True),
        "env_file": str(env_file),
    }
    keeper = asyncio.create_task(keep_dev_feeds_fresh(chain_configs, DEV_FEED_CHECK_S))
    try:
        await _announce_when_started(server, ready, options.ready_file)
    finally:
        keeper.cancel()
        await services.aclose()


def _settings_fields(base_url: str, database_url: str, chains: list[ChainConfig]) -> dict[str, Any]:
    """The settings this command sets; the rest come from the environment (INVOICING_*)."""
    return {
        "environment": "development",
        "database_url": database_url,
        "base_url": base_url,
        "payment_page_url": base_url,
        "webhook_allow_private": True,
        # The service's refund delegate (docs/integration/refunds.md#refunds-the-service-signs):
        # anvil's last public test key.
        "refund_delegate_key": DEV_PRIVATE_KEYS[-1],
        "chains": chains,
    }


def _chain_facts(chain: ChainConfig) -> dict[str, object]:
    """What the ready line tells of a chain."""
    return {
        "chain_id": chain.chain_id,
        "rpc_url": chain.rpc_url,
        "factory": chain.factory,
        "tokens": {token.symbol: token.address for token in chain.tokens},
        "feeds": {
            f"{chain.asset_symbol(None if f.asset == NATIVE else f.asset)}/{f.currency}": f.address
            for f in chain.feeds
        },
    }


def env_file_text(fields: dict[str, Any]) -> str:
    """``INVOICING_*`` lines (dotenv, also sh-sourceable) that give ``Settings`` these fields;
    a chain's relayer key is written in clear (anvil's public test key)."""
    lines = []
    for name, value in fields.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list):
            text = json.dumps([_chain_json(chain) for chain in value])
        else:
            text = str(value)
        quoted = f"'{text}'" if "'" not in text else json.dumps(text)
        lines.append(f"INVOICING_{name.upper()}={quoted}\n")
    return "".join(lines)


def _chain_json(chain: ChainConfig) -> dict[str, object]:
    return {
        "chain_id": chain.chain_id,
        "name": chain.name,
        "rpc_url": chain.rpc_url,
        "factory": chain.factory,
        "confirmations": chain.confirmations,
        "relayer_key": chain.relayer_private_key(),
        "tokens": [
            {
                "address": token.address,
                "symbol": token.symbol,
                "decimals": token.decimals,
                "pegged": token.pegged,
            }
            for token in chain.tokens
        ],
        "feeds": [
            {
                "asset": feed.asset,
                "currency": feed.currency,
                "address": feed.address,
                "heartbeat_s": feed.heartbeat_s,
            }
            for feed in chain.feeds
        ],
    }


async def _issue_dev_key(services: Services, owner: str) -> str:
    """A new API key for ``owner`` on every start (keys are stored hashed, so an earlier
    one cannot be shown again)."""
    async with services.db.transaction() as session:
        _row, api_key = await create_api_key(
            session,
            owner,
            "invoicing dev",
            ServerSecrets.of(services.settings),
            services.clock.now_ms(),
        )
    return api_key.get_secret_value()


async def _announce_when_started(
    server: uvicorn.Server, ready: dict[str, object], ready_file: Path | None
) -> None:
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
