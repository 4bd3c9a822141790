"""The EIP-4361 parser and checks (``auth.siwe``) against the EIP's published test vectors
(spruceid/siwe ``test/*.json``, kept in ``data/siwe_vectors.json``), the sign-in checks of
``auth.sign_in`` with a fake chain, and hypothesis properties: any text either parses to a
message that writes back to the same text, or is refused with ``SiweParseError``."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct
from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.addresses import checksum_encode
from invoicing.auth.sign_in import verify_sign_in
from invoicing.auth.signatures import personal_message_hash, recover_signer
from invoicing.auth.siwe import (
    SiweExpectations,
    SiweMessage,
    SiweParseError,
    parse_siwe,
    rfc3339_ms,
    siwe_problem,
)
from invoicing.chain.fake import FakeChain
from invoicing.errors import InvalidRequest, Unauthorized

VECTORS = json.loads((Path(__file__).parent / "data" / "siwe_vectors.json").read_text())
FIELDS = {
    "domain": "domain",
    "address": "address",
    "statement": "statement",
    "uri": "uri",
    "version": "version",
    "chainId": "chain_id",
    "nonce": "nonce",
    "issuedAt": "issued_at",
    "expirationTime": "expiration_time",
    "notBefore": "not_before",
    "requestId": "request_id",
    "resources": "resources",
}


def message_of(fields: dict[str, Any]) -> SiweMessage:
    values = {FIELDS[k]: v for k, v in fields.items() if k in FIELDS}
    values["chain_id"] = int(values["chain_id"])
    values["resources"] = tuple(values.get("resources", ()))
    return SiweMessage(**values)


@pytest.mark.parametrize("name", sorted(VECTORS["parsing_positive"]))
def test_the_eips_positive_vectors_parse_to_their_fields(name: str) -> None:
    vector = VECTORS["parsing_positive"][name]
    parsed = parse_siwe(vector["message"])
    assert parsed == message_of(vector["fields"])
    assert parsed.text() == vector["message"]


@pytest.mark.parametrize("name", sorted(VECTORS["parsing_negative"]))
def test_the_eips_negative_vectors_are_refused(name: str) -> None:
    with pytest.raises(SiweParseError):
        parse_siwe(VECTORS["parsing_negative"][name])


@pytest.mark.parametrize("name", sorted(VECTORS["verification_positive"]))
def test_the_eips_signed_vectors_are_signed_by_their_address(name: str) -> None:
    """Recovery as sign-in does it (coincurve; v = 0/1 through eth-account's parsing)."""
    vector = VECTORS["verification_positive"][name]
    text = message_of(vector).text()
    assert parse_siwe(text) == message_of(vector)
    assert recover_signer(text, vector["signature"]) == vector["address"]
    assert recover_signer(text + " ", vector["signature"]) != vector["address"]


class FakeChains:
    def __init__(self, chain: FakeChain) -> None:
        self.chain = chain

    def get(self, _chain_id: int) -> FakeChain:
        return self.chain


SIGNER = Account.from_key("0x" + "11" * 32)
NOW_MS = 1_800_000_000_000
EXPECTED = SiweExpectations("https", "pay.example.com", frozenset({1, 8453}), max_age_ms=600_000)


def siwe(**changes: Any) -> SiweMessage:
    base = SiweMessage(
        domain="pay.example.com",
        address=SIGNER.address,
        statement="Sign in to the invoicing dashboard.",
        uri="https://pay.example.com/dashboard/login",
        chain_id=8453,
        nonce="abcdEFGH2345",
        issued_at="2027-01-15T08:00:00.000Z",
        expiration_time="2027-01-15T08:05:00.000Z",
    )
    return replace(base, **changes)


def signed(message: SiweMessage, account: Any = SIGNER) -> str:
    return str(account.sign_message(encode_defunct(text=message.text())).signature.to_0x_hex())


ISSUED_MS = rfc3339_ms("2027-01-15T08:00:00.000Z")


async def test_a_message_signed_by_its_address_signs_in() -> None:
    message = siwe()
    checked = await verify_sign_in(
        FakeChains(FakeChain()), message.text(), signed(message), EXPECTED, ISSUED_MS + 5000, 1
    )
    assert checked.owner_address == SIGNER.address
    assert checked.message == message


@pytest.mark.parametrize(
    ("changes", "now_delta_ms", "problem"),
    [
        ({"domain": "evil.example.com"}, 0, "the message is for another domain"),
        ({"scheme": "http"}, 0, "the message is for another scheme"),
        ({"uri": "https://evil.example.com/x"}, 0, "the message's URI is not this service"),
        ({"uri": "https://pay.example.com.evil.io/"}, 0, "the message's URI is not this service"),
        ({"chain_id": 5}, 0, "the message's chain is not one this service runs on"),
        ({}, 300_000, "the message has expired"),
        ({"expiration_time": None}, 600_001, "the message is too old"),
        ({}, -61_000, "the message is issued in the future"),
        ({"not_before": "2027-01-15T08:01:00Z"}, 1000, "the message is not valid yet"),
    ],
)
async def test_a_message_that_is_not_for_here_now_is_refused(
    changes: dict[str, Any], now_delta_ms: int, problem: str
) -> None:
    message = siwe(**changes)
    with pytest.raises(Unauthorized) as refused:
        await verify_sign_in(
            FakeChains(FakeChain()),
            message.text(),
            signed(message),
            EXPECTED,
            ISSUED_MS + now_delta_ms,
            1,
        )
    assert refused.value.message == problem


async def test_a_signature_by_another_key_is_refused() -> None:
    message = siwe()
    other = Account.from_key("0x" + "22" * 32)
    with pytest.raises(Unauthorized) as refused:
        await verify_sign_in(
            FakeChains(FakeChain()), message.text(), signed(message, other), EXPECTED, ISSUED_MS, 1
        )
    assert refused.value.message == "the signature is not by the message's address"


async def test_a_contract_wallet_signs_in_by_eip1271_under_the_gas_cap() -> None:
    wallet = checksum_encode(bytes.fromhex("ab" * 20))
    message = siwe(address=wallet)
    signature = signed(message)  # the wallet's owner key signs; the wallet vouches for it
    chain = FakeChain()
    chains = FakeChains(chain)
    with pytest.raises(Unauthorized):  # no code there: no contract wallet
        await verify_sign_in(chains, message.text(), signature, EXPECTED, ISSUED_MS, 50_000)
    chain.contracts.add(wallet.lower())
    with pytest.raises(Unauthorized):  # code, but it does not accept this signature
        await verify_sign_in(chains, message.text(), signature, EXPECTED, ISSUED_MS, 50_000)
    digest = personal_message_hash(message.text())
    chain.wallet_signatures.add((wallet.lower(), digest, bytes.fromhex(signature[2:])))

    checked = await verify_sign_in(chains, message.text(), signature, EXPECTED, ISSUED_MS, 50_000)

    assert checked.owner_address == wallet


async def test_text_that_is_not_a_message_is_a_bad_request() -> None:
    with pytest.raises(InvalidRequest):
        await verify_sign_in(FakeChains(FakeChain()), "hello", "0x00", EXPECTED, ISSUED_MS, 1)


def test_problems_are_none_for_a_good_message() -> None:
    assert siwe_problem(siwe(), EXPECTED, ISSUED_MS) is None


# --- properties -----------------------------------------------------------------------------

_alnum = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_host = st.from_regex(r"[a-z][a-z0-9\-]{0,20}(\.[a-z]{2,6}){0,2}(:[0-9]{1,5})?", fullmatch=True)
_statement = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " .,:;/?#[]@!$&'()*+=-_~",
    min_size=1,
    max_size=80,
)
_time = st.datetimes(
    min_value=datetime(2000, 1, 1),  # noqa: DTZ001 - naive bounds; written with a Z
    max_value=datetime(2100, 1, 1),  # noqa: DTZ001
).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S") + ".000Z")
_uri = st.from_regex(r"https://[a-z]{1,12}\.[a-z]{2,4}(/[a-z0-9]{0,8}){0,3}", fullmatch=True)


@st.composite
def messages(draw: st.DrawFn) -> SiweMessage:
    return SiweMessage(
        domain=draw(_host),
        address=checksum_encode(draw(st.binary(min_size=20, max_size=20))),
        uri=draw(_uri),
        chain_id=draw(st.integers(min_value=0, max_value=10**18 - 1)),
        nonce=draw(_alnum.filter(lambda s: len(s) >= 8)),
        issued_at=draw(_time),
        scheme=draw(st.none() | st.sampled_from(["https", "http"])),
        statement=draw(st.none() | _statement.filter(lambda s: s.strip(" ") == s and s)),
        expiration_time=draw(st.none() | _time),
        not_before=draw(st.none() | _time),
        request_id=draw(st.none() | st.from_regex(r"[A-Za-z0-9\-._~]{0,20}", fullmatch=True)),
        resources=tuple(draw(st.lists(_uri, max_size=3))),
    )


@settings(max_examples=120, deadline=None)
@given(messages())
def test_every_message_writes_and_parses_back_to_itself(message: SiweMessage) -> None:
    assert parse_siwe(message.text()) == message


@settings(max_examples=120, deadline=None)
@given(st.text(max_size=600))
def test_any_text_parses_or_is_refused_with_a_parse_error(text: str) -> None:
    try:
        message = parse_siwe(text)
    except SiweParseError:
        return
    assert message.text() == text


@settings(max_examples=120, deadline=None)
@given(messages(), st.data())
def test_a_message_with_one_line_changed_is_refused_or_says_something_else(
    message: SiweMessage, data: st.DataObject
) -> None:
    lines = message.text().split("\n")
    index = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    lines[index] = data.draw(st.text(max_size=40))
    text = "\n".join(lines)
    try:
        parsed = parse_siwe(text)
    except SiweParseError:
        return
    assert parsed.text() == text
