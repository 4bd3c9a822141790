"""Keccak-256 and the hand-written EIP-55 checksum give the known answers."""

from __future__ import annotations

import os

import pytest
from eth_utils.address import to_checksum_address

from invoicing.addresses import ZERO_ADDRESS, address_bytes, checksum_encode, normalize_address
from invoicing.hashing import keccak256

# EIP-55's own examples.
EIP55 = [
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
]


def test_keccak256_is_keccak_not_sha3() -> None:
    # SHA3-256 of b"" would be a7ffc6f8bf1ed766…; Keccak-256's is the one Ethereum uses.
    assert keccak256(b"").hex() == (
        "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    )
    assert keccak256(b"abc").hex() == (
        "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
    )


@pytest.mark.parametrize("address", EIP55)
def test_normalize_address_gives_the_eip55_form_from_any_case(address: str) -> None:
    assert normalize_address(address) == address
    assert normalize_address(address.lower()) == address
    assert normalize_address("0x" + address[2:].upper()) == address


def test_checksum_encode_equals_eth_utils() -> None:
    for _ in range(200):
        raw = os.urandom(20)
        assert checksum_encode(raw) == to_checksum_address(raw)
    assert checksum_encode(bytes(20)) == ZERO_ADDRESS


@pytest.mark.parametrize(
    "text",
    [
        EIP55[0][2:],  # no prefix
        "0X" + EIP55[0][2:],
        EIP55[0][:-1],
        EIP55[0] + "0",
        EIP55[0][:-1] + "g",
        "0x" + " " * 40,
        "",
    ],
)
def test_normalize_address_refuses_what_is_not_0x_and_40_hex_digits(text: str) -> None:
    with pytest.raises(ValueError):
        normalize_address(text)


def test_address_bytes_reads_20_bytes_with_or_without_prefix() -> None:
    raw = bytes.fromhex(EIP55[0][2:])
    assert address_bytes(EIP55[0]) == address_bytes(EIP55[0][2:].lower()) == raw
    with pytest.raises(ValueError):
        address_bytes(EIP55[0][:-2])
