"""Signature mode's canonical message and recovery (DESIGN section 4 test vector)."""

from __future__ import annotations

from invoicing.auth.signatures import (
    canonical_json,
    payload_forms,
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
    assert signed_by(OWNER, VECTOR, "invoice.create", 1760000000000, PAYLOAD, from_query=False)
    reordered = {"invoiceId": "order-1", "amount": "1.5", "chainId": 31337}
    assert signed_by(OWNER, VECTOR, "invoice.create", 1760000000000, reordered, False) is False


def test_any_change_breaks_the_signature() -> None:
    assert not signed_by(OWNER, VECTOR, "invoice.status", 1760000000000, PAYLOAD, False)
    assert not signed_by(OWNER, VECTOR, "invoice.create", 1760000000001, PAYLOAD, False)
    assert not signed_by(
        OWNER, VECTOR, "invoice.create", 1760000000000, {**PAYLOAD, "amount": "1.6"}, False
    )
    assert not signed_by(
        OWNER, VECTOR, "invoice.create", 1760000000000, {**PAYLOAD, "description": None}, False
    )
    other = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
    assert not signed_by(other, VECTOR, "invoice.create", 1760000000000, PAYLOAD, False)


def test_malformed_signatures_are_not_signed() -> None:
    message = request_message("invoice.create", OWNER, 1, PAYLOAD)
    for bad in ("", "0x", "0x1234", "zz" * 65, "0x" + "00" * 65, VECTOR[:-2]):
        assert recover_signer(message, bad) is None


def test_query_payload_forms_include_typed_and_sorted_variants() -> None:
    forms = list(payload_forms({"paymentAddress": "0xab", "chainId": "5", "paid": "true"}, True))

    assert forms == [
        {"paymentAddress": "0xab", "chainId": "5", "paid": "true"},
        {"chainId": "5", "paid": "true", "paymentAddress": "0xab"},
        {"paymentAddress": "0xab", "chainId": 5, "paid": True},
        {"chainId": 5, "paid": True, "paymentAddress": "0xab"},
    ]


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
