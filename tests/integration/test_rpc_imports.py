"""The chain client's hot path imports nothing: a module that fails to import is searched for
again on every attempt (its failure is not cached), which cost the status lookup a fifth of
its time when httpcore looked for sniffio on every request."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

import pytest

from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.rpc import JsonRpc

pytestmark = pytest.mark.integration


class Searches(MetaPathFinder):
    """Records every module the import system searches for (it never finds one itself)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        self.names.append(fullname)
        return None


async def test_chain_requests_search_for_no_module(anvil: AnvilProcess) -> None:
    rpc = JsonRpc([anvil.url])
    await rpc.call("eth_chainId")  # the first request may import the client's parts
    searches = Searches()
    sys.meta_path.insert(0, searches)
    try:
        for _ in range(20):
            await rpc.call("eth_blockNumber")
    finally:
        sys.meta_path.remove(searches)
        await rpc.aclose()
    assert searches.names == []
