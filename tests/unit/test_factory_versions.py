"""The factory versions: which known version deployed code is, which factory made an escrow,
and the previous factories a chain lists (the chains file's default keeps versions 2 and 1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.chain.artifacts import (
    ESCROW,
    PAYMENT_FACTORY,
    PAYMENT_FACTORY_V1,
    PAYMENT_FACTORY_V2,
    load_artifact,
)
from invoicing.chain.chains_file import load_chains_file
from invoicing.chain.config import ChainConfig
from invoicing.chain.deploy import factory_address
from invoicing.chain.escrows import escrow_address
from invoicing.chain.versions import (
    V1_FACTORY_ADDRESS,
    V2_FACTORY_ADDRESS,
    escrow_factory,
    factory_version,
)

OWNER = "0x00000000000000000000000000000000000000A1"
CURRENT, PREVIOUS, OLDEST = "0x" + "11" * 20, "0x" + "22" * 20, "0x" + "44" * 20


def test_deployed_code_is_named_by_its_version() -> None:
    versions = (PAYMENT_FACTORY, PAYMENT_FACTORY_V2, PAYMENT_FACTORY_V1)
    codes = [load_artifact(name).deployed_bytecode for name in versions]
    assert [factory_version(code) for code in codes] == list(versions)
    assert len(set(codes)) == 3
    assert factory_version(load_artifact(ESCROW).deployed_bytecode) is None
    assert factory_version(codes[1][:-1]) is None


@given(st.binary(min_size=32, max_size=32))
def test_an_escrow_is_swept_by_the_factory_that_derives_its_address(salt: bytes) -> None:
    factories = (CURRENT, PREVIOUS, OLDEST)
    for factory in factories:
        address = escrow_address(factory, OWNER, salt)
        assert escrow_factory(factories, OWNER, salt, address).lower() == factory.lower()
        assert escrow_factory(factories, OWNER, salt, address.lower()).lower() == factory.lower()
    # An address no listed factory derives falls back to the current one.
    stranger = escrow_address("0x" + "33" * 20, OWNER, salt)
    assert escrow_factory(factories, OWNER, salt, stranger).lower() == CURRENT


def test_a_chain_lists_each_previous_factory_once_and_never_the_current_one() -> None:
    config = ChainConfig(
        1, "x", "https://a.example", CURRENT, previous_factories=(PREVIOUS, CURRENT, PREVIOUS)
    )
    assert [f.lower() for f in config.factories] == [CURRENT, PREVIOUS]
    assert ChainConfig(1, "x", "https://a.example", CURRENT).factories == (config.factories[0],)
    with pytest.raises(ValueError):
        ChainConfig(1, "x", "https://a.example", CURRENT, previous_factories=("0x12",))


def chains_file(tmp_path: Path, body: str) -> ChainConfig:
    path = tmp_path / f"chains-{os.urandom(4).hex()}.toml"
    path.write_text(f'[[chain]]\nchain_id = 8453\nrpc_url = "https://a.example"\n{body}')
    (chain,) = load_chains_file(path)
    return chain


def test_the_chains_file_keeps_versions_two_and_one_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    default = chains_file(tmp_path, "")
    assert default.factories == (factory_address(), V2_FACTORY_ADDRESS, V1_FACTORY_ADDRESS)
    on_v2 = chains_file(tmp_path, f'factory = "{V2_FACTORY_ADDRESS}"\n')
    assert on_v2.factories == (V2_FACTORY_ADDRESS, V1_FACTORY_ADDRESS)
    on_v1 = chains_file(tmp_path, f'factory = "{V1_FACTORY_ADDRESS}"\n')
    assert on_v1.factories == (V1_FACTORY_ADDRESS, V2_FACTORY_ADDRESS)
    listed = chains_file(tmp_path, f'previous_factories = ["{PREVIOUS}"]\n')
    assert [f.lower() for f in listed.factories] == [factory_address().lower(), PREVIOUS]
    assert chains_file(tmp_path, "previous_factories = []\n").factories == (factory_address(),)
    with pytest.raises(ValueError, match="previous_factories must be a list"):
        chains_file(tmp_path, f'previous_factories = "{PREVIOUS}"\n')
