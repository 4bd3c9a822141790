"""Calldata from the shipped ABI: the selectors and encodings the contracts expect."""

from __future__ import annotations

import pytest
from eth_abi.abi import encode

from invoicing.chain.abi import abi_function, decode_result, encode_call, event_topic
from invoicing.chain.artifacts import ERC20, PAYMENT_FACTORY
from invoicing.chain.calldata import encode_withdraw
from invoicing.chain.reverts import RevertReason, decode_revert, revert_name

OWNER = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"


@pytest.mark.parametrize(
    ("contract", "name", "selector"),
    [
        # The well-known 4-byte selectors (see any 4byte directory).
        (ERC20, "transfer", "a9059cbb"),
        (ERC20, "balanceOf", "70a08231"),
        (ERC20, "decimals", "313ce567"),
        (ERC20, "symbol", "95d89b41"),
        (PAYMENT_FACTORY, "nonces", "7ecebe00"),
        (PAYMENT_FACTORY, "DOMAIN_SEPARATOR", "3644e515"),
    ],
)
def test_selectors_come_from_the_abi(contract: str, name: str, selector: str) -> None:
    assert abi_function(contract, name).selector.hex() == selector


def test_encode_call_is_the_selector_then_the_abi_encoded_arguments() -> None:
    salts = [bytes([1]) * 32, bytes([2]) * 32]

    data = encode_call(PAYMENT_FACTORY, "withdraw", OWNER, OWNER, salts)

    function = abi_function(PAYMENT_FACTORY, "withdraw")
    assert function.inputs == ("address", "address", "bytes32[]")
    assert data == function.selector + encode(
        ["address", "address", "bytes32[]"], [OWNER, OWNER, salts]
    )
    assert encode_withdraw(OWNER, OWNER, salts) == data


def test_encode_withdraw_refuses_a_salt_that_is_not_32_bytes() -> None:
    with pytest.raises(ValueError):
        encode_withdraw(OWNER, OWNER, [bytes(31)])


def test_decode_result_answers_one_value_and_checksums_addresses() -> None:
    assert decode_result(PAYMENT_FACTORY, "nonces", (7).to_bytes(32, "big")) == 7
    answer = encode(["address"], [OWNER.lower()])
    assert decode_result(PAYMENT_FACTORY, "payoutOf", answer) == OWNER


def test_an_unknown_function_or_event_is_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        encode_call(PAYMENT_FACTORY, "transfer", OWNER, 1)
    with pytest.raises(LookupError):
        event_topic(PAYMENT_FACTORY, "Transfer")


def test_reverts_are_named_from_the_abi_errors() -> None:
    data = bytes.fromhex("e450d38c") + encode(["address", "uint256", "uint256"], [OWNER, 1, 2])

    assert decode_revert(data) == RevertReason("ERC20InsufficientBalance", (OWNER.lower(), 1, 2))
    assert revert_name(bytes.fromhex("8baa579f")) == "InvalidSignature"
    assert revert_name(bytes.fromhex("e450d38c")) is None  # arguments missing
    assert revert_name(b"\x00\x00\x00\x00") is None
