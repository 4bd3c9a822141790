"""x402 headers, as strangers send them: any text decodes to a payment or to a refusal with
one of the x402 specification's reasons, never anything else; what a client encodes decodes
to the same values, every integer exact (no floats on the way)."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.chain.eip3009 import Authorization
from invoicing.payments.x402.protocol import (
    X402Invalid,
    check_accepted,
    decode_header,
    encode_header,
    parse_payment,
    parse_requirements,
)

REASONS = {
    "invalid_payload",
    "invalid_payment_requirements",
    "invalid_scheme",
    "invalid_network",
    "invalid_x402_version",
    "invalid_exact_evm_payload_signature",
}
ADDRESS = st.binary(min_size=20, max_size=20).map(lambda b: "0x" + b.hex())
UINT256 = st.integers(min_value=0, max_value=2**256 - 1)


def payload(
    chain_id: int, amount: int, asset: str, pay_to: str, payer: str, value: int,
    valid_after: int, valid_before: int, nonce: bytes, signature: bytes,
) -> dict[str, Any]:  # fmt: skip
    return {
        "x402Version": 2,
        "accepted": {
            "scheme": "exact",
            "network": f"eip155:{chain_id}",
            "amount": str(amount),
            "asset": asset,
            "payTo": pay_to,
            "maxTimeoutSeconds": 300,
            "extra": {"name": "USD Coin", "version": "2"},
        },
        "payload": {
            "signature": "0x" + signature.hex(),
            "authorization": {
                "from": payer,
                "to": pay_to,
                "value": str(value),
                "validAfter": str(valid_after),
                "validBefore": str(valid_before),
                "nonce": "0x" + nonce.hex(),
            },
        },
    }


@settings(deadline=None)  # a loaded machine must not fail a pure parser
@given(
    st.integers(min_value=1, max_value=2**63 - 1), UINT256, ADDRESS, ADDRESS, ADDRESS, UINT256,
    UINT256, UINT256, st.binary(min_size=32, max_size=32), st.binary(min_size=1, max_size=200),
)  # fmt: skip
def test_what_a_client_encodes_decodes_to_the_same_exact_values(
    chain_id: int, amount: int, asset: str, pay_to: str, payer: str, value: int,
    valid_after: int, valid_before: int, nonce: bytes, signature: bytes,
) -> None:  # fmt: skip
    sent = payload(
        chain_id, amount, asset, pay_to, payer, value, valid_after, valid_before, nonce, signature
    )
    payment = parse_payment(decode_header(encode_header(sent)))
    assert payment.accepted.chain_id == chain_id
    assert payment.accepted.amount == amount
    assert payment.accepted.as_json() == {
        **sent["accepted"],
        "asset": payment.accepted.asset,
        "payTo": payment.accepted.pay_to,
    }
    assert payment.accepted.asset.lower() == asset
    assert payment.authorization == Authorization(
        payment.authorization.from_address, payment.accepted.pay_to, value, valid_after,
        valid_before, nonce,
    )  # fmt: skip
    assert payment.authorization.from_address.lower() == payer
    assert payment.signature == "0x" + signature.hex()


@settings(deadline=None)  # a loaded machine must not fail a pure parser
@given(st.text(max_size=300))
def test_any_text_is_a_payment_or_a_refusal_with_a_spec_reason(text: str) -> None:
    try:
        parse_payment(decode_header(text))
    except X402Invalid as exc:
        assert exc.reason in REASONS
        assert exc.status == 400


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(deadline=None)  # a loaded machine must not fail a pure parser
@given(JSON)
def test_any_json_is_a_payment_or_a_refusal_with_a_spec_reason(value: Any) -> None:
    header = base64.b64encode(json.dumps(value).encode()).decode()
    try:
        parse_payment(decode_header(header))
    except X402Invalid as exc:
        assert exc.reason in REASONS


@settings(deadline=None)  # a loaded machine must not fail a pure parser
@given(st.dictionaries(st.sampled_from(["scheme", "network", "amount", "asset", "payTo",
                                         "maxTimeoutSeconds", "extra"]), JSON))  # fmt: skip
def test_any_requirements_parse_or_are_refused(value: dict[str, Any]) -> None:
    try:
        parse_requirements(value)
    except X402Invalid as exc:
        assert exc.reason in REASONS


def test_floats_duplicates_and_oversized_headers_are_refused() -> None:
    for raw in (b'{"x402Version": 2.0}', b'{"a": 1, "a": 1}', b"[2]", b'{"x": NaN}', b"\xff"):
        try:
            decode_header(base64.b64encode(raw).decode())
        except X402Invalid as exc:
            assert exc.reason == "invalid_payload"
        else:
            raise AssertionError(raw)
    huge = base64.b64encode(b'{"a":"' + b"x" * 20_000 + b'"}').decode()
    try:
        decode_header(huge)
    except X402Invalid as exc:
        assert exc.reason == "invalid_payload"
    else:
        raise AssertionError("oversized")


@settings(deadline=None)  # a loaded machine must not fail a pure parser
@given(UINT256, UINT256)
def test_a_payment_for_another_amount_is_refused(required: int, offered: int) -> None:
    sent = payload(1, offered, "0x" + "11" * 20, "0x" + "22" * 20, "0x" + "33" * 20, offered,
                   0, 1, bytes(32), b"\x01")  # fmt: skip
    mine = parse_requirements({**sent["accepted"], "amount": str(required)})
    payment = parse_payment(sent)
    if required == offered:
        check_accepted(payment, mine)
    else:
        try:
            check_accepted(payment, mine)
        except X402Invalid as exc:
            assert exc.reason == "invalid_exact_evm_payload_authorization_value_mismatch"
        else:
            raise AssertionError("accepted another amount")
