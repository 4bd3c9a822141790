"""Integration tests run against a real anvil node with the dev contracts deployed.

The session fixtures they use (``anvil``, ``evm``, ``dev``, ``factory``) live in
``tests/conftest.py`` so that the acceptance tests share the same node. Tests share the
chain, so each one works with fresh owners (random keys) and fresh escrow salts instead of
resetting state.
"""

from collections.abc import Iterator

import pytest

from invoicing.chain.fake import FakeChain
from tests.conftest import new_database_url
from tests.support.monitoring import new_fake_chain


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration is an integration test."""
    for item in items:
        if "tests/integration/" in item.nodeid:
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def fake() -> FakeChain:
    """An in-memory chain for tests that drive a worker against a real database."""
    return new_fake_chain()


@pytest.fixture
def own_database(migrated_template: str) -> Iterator[str]:
    """A fresh migrated database per test (a copy of the run's migrated template): claims
    take every due event, so tests must not share."""
    url, drop = new_database_url(template=migrated_template)
    yield url
    drop()


@pytest.fixture(scope="module")
def module_database(migrated_template: str) -> Iterator[str]:
    """A fresh migrated database for one test module, whose tests each leave no due event
    behind (cheaper than ``own_database`` per test on PostgreSQL)."""
    url, drop = new_database_url(template=migrated_template)
    yield url
    drop()
