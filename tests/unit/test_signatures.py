"""Signature mode's canonical message and recovery (the test vector of
docs/integration/authentication.md)."""

from __future__ import annotations

import pytest

from invoicing.auth.jsjson import number_to_string, stringify
from invoicing.auth.signatures import (
    canonical_json,
    payload_forms,
    payload_texts,
    recover_signer,
    request_message,
    sign_request,
    signed_by,
)

OWNER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
PAYLOAD = {"chainId": 31337, "amount": "1.5", "invoiceId": "order-1"}
VECTOR = (
    "0x2f9d1ea8828f958b4665ab2a6801cde01d41ea5334d98b7fb35abfb1c02cbea33beff295b1ca80fdc32b611b"
    "4471967304793bbb4f1708c105c915300ee24adb1c"
)


def test_design_test_vector_message_and_signature() -> None:
    message = request_message("invoice.create", OWNER, 1760000000000, PAYLOAD)

    assert message == (
        'Service API Request Signature\n{"action":"invoice.create","ownerAddress":'
        '"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","timestamp":1760000000000,"payload":'
        '{"chainId":31337,"amount":"1.5","invoiceId":"order-1"}}'
    )
    assert sign_request(KEY, "invoice.create", OWNER, 1760000000000, PAYLOAD) == VECTOR
    assert recover_signer(message, VECTOR) == OWNER


def test_vector_verifies_as_sent_and_with_sorted_keys() -> None:
    assert signed_by(OWNER, VECTOR, "invoice.create", 1760000000000, PAYLOAD)
    reordered = {"invoiceId": "order-1", "amount": "1.5", "chainId": 31337}
    assert signed_by(OWNER, VECTOR, "invoice.create", 1760000000000, reordered) is False


def test_any_change_breaks_the_signature() -> None:
    assert not signed_by(OWNER, VECTOR, "invoice.status", 1760000000000, PAYLOAD)
    assert not signed_by(OWNER, VECTOR, "invoice.create", 1760000000001, PAYLOAD)
    assert not signed_by(
        OWNER, VECTOR, "invoice.create", 1760000000000, {**PAYLOAD, "amount": "1.6"}
    )
    assert not signed_by(
        OWNER, VECTOR, "invoice.create", 1760000000000, {**PAYLOAD, "description": None}
    )
    other = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
    assert not signed_by(other, VECTOR, "invoice.create", 1760000000000, PAYLOAD)


def test_malformed_signatures_are_not_signed() -> None:
    message = request_message("invoice.create", OWNER, 1, PAYLOAD)
    for bad in ("", "0x", "0x1234", "zz" * 65, "0x" + "00" * 65, VECTOR[:-2]):
        assert recover_signer(message, bad) is None


LIST_TYPES = {"paymentAddress": "string", "chainId": "integer", "paid": "boolean"}


def test_query_payload_forms_are_typed_by_the_route_schema_not_by_look() -> None:
    sent = {"paymentAddress": "0xab", "invoiceId": "7", "chainId": "5", "paid": "true"}
    types = {**LIST_TYPES, "invoiceId": "string"}

    forms = list(payload_forms(sent, types))

    assert forms == [
        sent,
        {"chainId": "5", "invoiceId": "7", "paid": "true", "paymentAddress": "0xab"},
        {"paymentAddress": "0xab", "invoiceId": "7", "chainId": 5, "paid": True},
        {"chainId": 5, "invoiceId": "7", "paid": True, "paymentAddress": "0xab"},
    ]


def test_query_values_that_do_not_fit_their_type_stay_strings() -> None:
    sent = {"chainId": "05", "paid": "yes", "limit": "\u00b2", "page": "-0"}
    types = {"chainId": "integer", "paid": "boolean", "limit": "integer", "page": "integer"}

    typed = list(payload_forms(sent, types))[2]

    assert typed == sent


def test_a_typed_query_signature_verifies_and_a_look_typed_one_does_not() -> None:
    sent = {"chainId": "31337", "invoiceId": "1"}
    types = {"chainId": "integer", "invoiceId": "string"}
    by_schema = sign_request(KEY, "invoice.delete", OWNER, 5, {"chainId": 31337, "invoiceId": "1"})
    by_look = sign_request(KEY, "invoice.delete", OWNER, 5, {"chainId": 31337, "invoiceId": 1})
    as_strings = sign_request(KEY, "invoice.delete", OWNER, 5, sent)

    assert signed_by(OWNER, by_schema, "invoice.delete", 5, sent, types)
    assert signed_by(OWNER, as_strings, "invoice.delete", 5, sent, types)
    assert not signed_by(OWNER, by_look, "invoice.delete", 5, sent, types)
    # A body is never re-typed: the numbers must be signed as they were sent.
    assert not signed_by(OWNER, by_schema, "invoice.delete", 5, sent)


def test_body_numbers_verify_as_json_stringify_and_as_json_dumps_write_them() -> None:
    body = {"chainId": 31337, "amount": "1", "metadata": {"a": 1e-7, "b": 1e21, "c": 1e16}}
    js_text = '{"chainId":31337,"amount":"1","metadata":{"a":1e-7,"b":1e+21,"c":10000000000000000}}'
    py_text = '{"chainId":31337,"amount":"1","metadata":{"a":1e-07,"b":1e+21,"c":1e+16}}'

    assert list(payload_texts(body))[:2] == [py_text, js_text]
    assert canonical_json("invoice.create", OWNER, 1, body).endswith(',"payload":' + js_text + "}")
    signature = sign_request(KEY, "invoice.create", OWNER, 9, body)
    assert signed_by(OWNER, signature, "invoice.create", 9, body)


@pytest.mark.parametrize(
    ("value", "js"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (0.1, "0.1"),
        (-1.5, "-1.5"),
        (123.456, "123.456"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.2345e22, "1.2345e+22"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.30000000000000004, "0.30000000000000004"),
        (float("inf"), "null"),
    ],
)
def test_numbers_are_written_as_javascript_writes_them(value: float, js: str) -> None:
    assert number_to_string(value) == js


def test_stringify_matches_javascript_for_big_integers_strings_and_nesting() -> None:
    assert stringify(2**53) == "9007199254740992"
    assert stringify(12345678901234567890) == "12345678901234567000"
    assert stringify(10**400) == "null"
    assert stringify({"s": 'a"\\\n\u0001\ud800é', "l": [True, None, 2]}) == (
        '{"s":"a\\"\\\\\\n\\u0001\\ud800é","l":[true,null,2]}'
    )


def test_canonical_json_has_no_whitespace_and_keeps_unicode() -> None:
    text = canonical_json("invoice.create", OWNER, 1, {"description": "café ☕"})

    assert text == (
        '{"action":"invoice.create","ownerAddress":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",'
        '"timestamp":1,"payload":{"description":"café ☕"}}'
    )


SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def _eth_account_recover(message: str, signature: str) -> str | None:
    from eth_account import Account
    from eth_account.messages import encode_defunct

    try:
        return str(Account.recover_message(encode_defunct(text=message), signature=signature))
    except Exception:  # noqa: BLE001
        return None


def test_fast_recovery_accepts_exactly_what_eth_account_accepts() -> None:
    message = request_message("invoice.create", OWNER, 1760000000000, PAYLOAD)
    r, s, v = VECTOR[2:66], int(VECTOR[66:130], 16), VECTOR[130:]
    high_s_twin = (
        "0x" + r + (SECP256K1_ORDER - s).to_bytes(32, "big").hex() + ("1b" if v == "1c" else "1c")
    )
    cases = [
        VECTOR,
        VECTOR.upper().replace("0X", "0x"),
        VECTOR[:-2] + ("1b" if v == "1c" else "1c"),  # other recovery id: another signer
        high_s_twin,
        "0x" + "00" * 64 + "1b",  # r = s = 0
        "0x" + SECP256K1_ORDER.to_bytes(32, "big").hex() + VECTOR[66:],  # r out of range
        "0x" + r + "ff" * 32 + v,  # s out of range
        VECTOR[:-2] + "00",  # v = 0: not a personal_sign v
        VECTOR[2:],  # without 0x
    ]
    for signature in cases:
        assert recover_signer(message, signature) == _eth_account_recover(message, signature)
    assert recover_signer(message, VECTOR) == OWNER
    assert recover_signer(message, high_s_twin) == OWNER
    assert recover_signer(message, VECTOR[:-2] + ("1b" if v == "1c" else "1c")) != OWNER
