"""balancesOf calldata and answers are written by hand; they must equal the ABI encoding."""

from __future__ import annotations

import pytest
from eth_abi.abi import encode
from eth_abi.exceptions import DecodingError

from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.calldata import UNREADABLE, decode_balances_of, encode_balances_of

ACCOUNTS = [
    "0x52908400098527886E0F7030069857D2E4169EE7",
    "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
    "0xde709f2102306220921060314715629080e2fb77",
]
TOKEN = "0x27b1fdb04752bbc536007a920d24acb045561c26"


@pytest.mark.parametrize("accounts", [ACCOUNTS, []])
def test_encode_balances_of_equals_the_abi_encoding(accounts: list[str]) -> None:
    expected = encode_call(PAYMENT_FACTORY, "balancesOf", TOKEN, accounts)

    assert encode_balances_of(TOKEN, accounts) == expected


def test_encode_balances_of_refuses_an_address_that_is_not_20_bytes() -> None:
    with pytest.raises(ValueError):
        encode_balances_of(TOKEN, [ACCOUNTS[0][:-2]])


@pytest.mark.parametrize("values", [[0, 1, 10**18, 2**255, 2**256 - 2], []])
def test_decode_balances_of_reads_the_abi_encoding(values: list[int]) -> None:
    assert decode_balances_of(encode(["uint256[]"], [values])) == values


def test_decode_balances_of_reads_the_unreadable_sentinel_as_none() -> None:
    answer = encode(["uint256[]"], [[5, UNREADABLE, 2**255, UNREADABLE]])

    assert UNREADABLE == 2**256 - 1
    assert decode_balances_of(answer) == [5, None, 2**255, None]


@pytest.mark.parametrize(
    "data",
    [b"", bytes(63), encode(["uint256[]"], [[1, 2]])[:-1], (7).to_bytes(32, "big") + bytes(32)],
)
def test_decode_balances_of_refuses_a_malformed_answer(data: bytes) -> None:
    with pytest.raises(DecodingError):
        decode_balances_of(data)
