"""Shared fixtures: a real database (SQLite or PostgreSQL), a real anvil node, the real app.

The database comes from ``INVOICING_TEST_DATABASE``: ``sqlite`` (default) or a PostgreSQL
URL such as ``postgresql://postgres@127.0.0.1:5432/test``; for PostgreSQL a fresh database
is created for the run and dropped afterwards. Tests share one chain and one database, so
each test works with fresh owners (random keys) rather than resetting state.

``make test`` runs the suite on several pytest-xdist workers (``tests/support/workers.py``).
Each worker is a pytest run of its own, so it starts its own anvil and makes its own
database; nothing is shared between workers but the machine (every port is a free one, every
file a temporary one).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import hypothesis
import pytest
from pydantic import SecretStr
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from invoicing.chain.anvil import DEV_PRIVATE_KEYS, AnvilProcess
from invoicing.chain.config import NATIVE, ChainConfig, FeedConfig, TokenConfig
from invoicing.chain.deploy import DevDeployment, deploy_dev_contracts
from invoicing.chain.evm import EvmClient
from invoicing.migrate import upgrade
from invoicing.services import Services, build_services
from invoicing.settings import Settings
from invoicing.web.app import create_app
from tests.support.receiver import Receiver, receiver
from tests.support.server import serve

# Property tests judge what they find, not how fast: a machine loaded by both suites at once
# must not turn a slow example into a failure (hypothesis's default deadline is 200 ms).
hypothesis.settings.register_profile("suite", deadline=None)
hypothesis.settings.load_profile("suite")

pytest_plugins = ("tests.support.workers", "tests.support.database_kind")

TEST_DATABASE = os.environ.get("INVOICING_TEST_DATABASE", "sqlite")


def _sync_pg_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql+psycopg2").render_as_string(False)


def new_database_url(template: str | None = None) -> tuple[str, Callable[[], None]]:
    """A fresh database for this run and a function that drops it: empty, or a copy of
    ``template`` (a database of this run that nothing is connected to): its file copied on
    SQLite, ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL."""
    if TEST_DATABASE == "sqlite":
        path = os.path.join(tempfile.mkdtemp(prefix="invoicing-test-"), "test.db")
        if template is not None:
            source = make_url(template).database
            assert source is not None
            for suffix in ("", "-wal"):  # WAL mode: the log may hold committed pages
                if os.path.exists(source + suffix):
                    shutil.copyfile(source + suffix, path + suffix)
        return f"sqlite+aiosqlite:///{path}", lambda: None
    admin_url = _sync_pg_url(TEST_DATABASE)
    name = f"invoicing_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    copy = "" if template is None else f' TEMPLATE "{make_url(template).database}"'
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"{copy}'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    url = make_url(TEST_DATABASE).set(database=name, drivername="postgresql+asyncpg")
    return url.render_as_string(False), drop


@pytest.fixture(scope="session")
async def migrated_template() -> AsyncIterator[str]:
    """A database brought to the newest schema by ``upgrade`` once for the run; nothing
    connects to it: the migrated databases of the tests are copies of it (a copy takes a
    fraction of a second, running the migrations seconds on a loaded machine)."""
    url, drop = new_database_url()
    await upgrade(url)
    yield url
    drop()


@pytest.fixture(scope="session")
def database_url(migrated_template: str) -> Iterator[str]:
    """One migrated database shared by the run."""
    url, drop = new_database_url(template=migrated_template)
    yield url
    drop()


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilProcess]:
    """anvil on a free port, automining (every transaction gets its own block)."""
    with AnvilProcess() as node:
        yield node


@pytest.fixture(scope="session")
async def evm(anvil: AnvilProcess) -> AsyncIterator[EvmClient]:
    client = EvmClient.connect(anvil.url)
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
async def dev(evm: EvmClient) -> DevDeployment:
    """PaymentFactory and TestToken deployed by anvil account 0."""
    return await deploy_dev_contracts(evm, DEV_PRIVATE_KEYS[0])


@pytest.fixture(scope="session")
def factory(dev: DevDeployment) -> str:
    return dev.factory


def dev_tokens(dev: DevDeployment) -> tuple[TokenConfig, ...]:
    """The allow-list of the test chain: the dev TestToken (TUSD, 6 decimals, EIP-3009,
    pegged to USD)."""
    return (dev.token_config,)


def dev_feeds(dev: DevDeployment) -> tuple[FeedConfig, ...]:
    """The test chain's price feed: the MockAggregator pricing ETH in USD (1 h heartbeat)."""
    return (FeedConfig(NATIVE, "USD", dev.aggregator, 3600),)


def chain_config(anvil: AnvilProcess, dev: DevDeployment, **overrides: Any) -> ChainConfig:
    fields: dict[str, Any] = {
        "chain_id": dev.chain_id,
        "name": "Anvil (local)",
        "rpc_url": anvil.url,
        "factory": dev.factory,
        "confirmations": 1,
        "relayer_key": SecretStr(DEV_PRIVATE_KEYS[0]),
        "tokens": dev_tokens(dev),
        "feeds": dev_feeds(dev),
    }
    fields.update(overrides)
    return ChainConfig(**fields)


# ``record_property(title, line)``: the line is printed under ``title`` at the end of the run
# when the title ends in " summary" (the chaos scenarios' lines). It travels in the test's
# report, so it reaches the terminal from an xdist worker too.
RecordProperty = Callable[[str, object], None]
_summaries: dict[str, list[str]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for title, line in report.user_properties:
        if report.when == "call" and title.endswith(" summary"):
            _summaries.setdefault(title, []).append(str(line))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for title, lines in _summaries.items():
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)


MakeServices = Callable[..., Awaitable[Services]]


@pytest.fixture
async def make_services(
    database_url: str, anvil: AnvilProcess, dev: DevDeployment
) -> AsyncIterator[MakeServices]:
    """Build Services on the test database and anvil; ``make_services(monitor_interval_s=1)``
    overrides settings, ``chain=dict(confirmations=3)`` overrides the chain config."""
    built: list[Services] = []

    async def make(chain: dict[str, Any] | None = None, **overrides: Any) -> Services:
        fields: dict[str, Any] = {
            "environment": "development",
            "database_url": database_url,
            "base_url": "http://127.0.0.1:8000",
            "payment_page_url": "http://pay.test",
            "webhook_allow_private": True,
            # Every test's client is 127.0.0.1 on one shared database: the payment-page tests
            # together would pass a per-client limit meant for one payer (tests of the limit
            # set their own).
            "pay_rate_limit_per_minute": 100_000,
            "run_workers": False,
            "chains": [chain_config(anvil, dev, **(chain or {}))],
        }
        fields.update(overrides)
        services = build_services(Settings(**fields))
        built.append(services)
        return services

    yield make
    for services in built:
        await services.aclose()


class RunningApp:
    """The real app on a real port, with an HTTP client and its Services."""

    def __init__(self, base_url: str, services: Services, http: httpx.AsyncClient) -> None:
        self.base_url = base_url
        self.services = services
        self.http = http


@pytest.fixture
async def app(make_services: MakeServices) -> AsyncIterator[RunningApp]:
    """The API served by uvicorn on a free port (workers off; tests drive them)."""
    services = await make_services()
    async with (
        serve(create_app(services)) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=30) as http,
    ):
        yield RunningApp(base_url, services, http)


@pytest.fixture
async def hooks() -> AsyncIterator[Receiver]:
    """A real HTTP receiver of webhooks (``tests/support/receiver.py``) on a local port."""
    async with receiver() as recv:
        yield recv
