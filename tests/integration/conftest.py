"""Integration tests run against a real anvil node with the dev contracts deployed.

The session fixtures they use (``anvil``, ``evm``, ``dev``, ``factory``) live in
``tests/conftest.py`` so that the acceptance tests share the same node. Tests share the
chain, so each one works with fresh owners (random keys) and fresh escrow salts instead of
resetting state.
"""

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/integration is an integration test."""
    for item in items:
        if "tests/integration/" in item.nodeid:
            item.add_marker(pytest.mark.integration)
