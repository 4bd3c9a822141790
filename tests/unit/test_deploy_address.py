"""Deterministic deployment addresses, and the cited facts about the deployment proxy checked
against the proxy's own presigned deployment transaction."""

from __future__ import annotations

from eth_account import Account

from invoicing.addresses import checksum_encode, normalize_address
from invoicing.chain import artifacts
from invoicing.chain.deploy import (
    DEPLOYMENT_SALT,
    DETERMINISTIC_DEPLOYMENT_PROXY,
    PROXY_DEPLOYMENT_COST_WEI,
    PROXY_DEPLOYMENT_SIGNER,
    PROXY_DEPLOYMENT_TX,
    PROXY_RUNTIME_CODE,
    create2_deployment_address,
    deterministic_address,
    factory_address,
)
from invoicing.chain.versions import V1_FACTORY_ADDRESS, V2_FACTORY_ADDRESS
from invoicing.hashing import keccak256


def test_create2_matches_the_eip_1014_examples() -> None:
    # EIP-1014 (https://eips.ethereum.org/EIPS/eip-1014), "Examples" 0, 1 and 5.
    zero = "0x0000000000000000000000000000000000000000"
    assert create2_deployment_address(zero, bytes(32), b"\x00") == (
        "0x4D1A2e2bB4F88F0250f26Ffff098B0b30B26BF38"
    )
    assert create2_deployment_address(
        "0xdeadbeef00000000000000000000000000000000", bytes(32), b"\x00"
    ) == normalize_address("0xB928f69Bb1D91Cd65274e3c79d8986362984fDA3")
    assert create2_deployment_address(
        "0x00000000000000000000000000000000deadbeef",
        bytes.fromhex("00000000000000000000000000000000000000000000000000000000cafebabe"),
        bytes.fromhex("deadbeef"),
    ) == normalize_address("0x60f3f640a8508fC6a86d45DF051962668E1e8AC7")


def test_the_factory_address_is_create2_from_the_proxy_with_the_zero_salt() -> None:
    assert DEPLOYMENT_SALT == bytes(32)
    expected = keccak256(
        b"\xff"
        + bytes.fromhex(DETERMINISTIC_DEPLOYMENT_PROXY[2:])
        + bytes(32)
        + keccak256(artifacts.factory_bytecode())
    )[12:]
    assert factory_address() == checksum_encode(expected)
    assert deterministic_address(artifacts.test_token_bytecode()) != factory_address()


def test_the_previous_versions_keep_the_addresses_they_were_deployed_at() -> None:
    # The addresses the previous releases' `invoicing deploy` printed, on every chain.
    v2 = artifacts.load_artifact(artifacts.PAYMENT_FACTORY_V2)
    assert deterministic_address(v2.bytecode) == V2_FACTORY_ADDRESS
    v1 = artifacts.load_artifact(artifacts.PAYMENT_FACTORY_V1)
    assert deterministic_address(v1.bytecode) == V1_FACTORY_ADDRESS
    assert factory_address() not in (V2_FACTORY_ADDRESS, V1_FACTORY_ADDRESS)


def test_the_presigned_transaction_creates_the_proxy_with_the_cited_runtime_code() -> None:
    raw = bytes.fromhex(PROXY_DEPLOYMENT_TX[2:])
    # Legacy transaction, RLP list: nonce 0, gasPrice 100 gwei, gas 100,000, no `to`, value 0,
    # then 0x53 bytes of init code, v = 27 (no chain id), r, s.
    header = bytes.fromhex("f8a58085174876e800830186a08080b853")
    assert raw.startswith(header)
    assert int("174876e800", 16) * int("0186a0", 16) == PROXY_DEPLOYMENT_COST_WEI
    init_code = raw[len(header) : len(header) + 0x53]
    # The init code copies the 0x45 bytes after its own 0x0e and returns them.
    assert init_code[:14] == bytes.fromhex("604580600e600039806000f350fe")
    assert init_code[14:] == PROXY_RUNTIME_CODE and len(PROXY_RUNTIME_CODE) == 0x45
    signer = Account.recover_transaction(PROXY_DEPLOYMENT_TX)
    assert signer == normalize_address(PROXY_DEPLOYMENT_SIGNER)
    # CREATE from the signer's nonce 0: keccak256(rlp([signer, 0]))[12:].
    created = keccak256(b"\xd6\x94" + bytes.fromhex(signer[2:]) + b"\x80")[12:]
    assert checksum_encode(created) == DETERMINISTIC_DEPLOYMENT_PROXY
