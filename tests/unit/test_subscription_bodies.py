"""What a stranger sends the subscription routes: the create body (an owner's program) and
the authorization body (anyone). Properties: any JSON either parses into fields within
their documented bounds or is refused with a 400 in the documented shape, never another
exception; the amount per period parses to the exact raw units it spells; a signature
names its signer, or nothing is accepted for it; a webhookUrl is taken or refused exactly as
an invoice's, by the body and then by the creation rules."""

from __future__ import annotations

from decimal import Context, Decimal
from typing import Any
from urllib.parse import urlsplit

from eth_account import Account
from hypothesis import example, given
from hypothesis import strategies as st

from invoicing.errors import InvalidAuthorization, InvalidRequest
from invoicing.invoices.amounts import to_raw
from invoicing.payments.subscriptions.periods import payer_of
from invoicing.payments.subscriptions.routes import (
    CreateSubscriptionBody,
    SubscriptionAuthorizationBody,
)
from invoicing.payments.subscriptions.service import check_webhook_url
from invoicing.payments.subscriptions.terms import Terms
from invoicing.settings import Settings
from invoicing.web.api.inputs import validate
from invoicing.web.api.invoices import CreateInvoiceBody
from tests.support.factory import sign_typed

OWNER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
VALID: dict[str, Any] = {
    "ownerAddress": OWNER,
    "chainId": 31337,
    "tokenAddress": TOKEN,
    "amount": "2.5",
    "periodSeconds": 3600,
    "maxPeriods": 12,
    "subscriptionId": "plan-1",
    "description": "Monthly",
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=80),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
CREATE_KEYS = st.sampled_from([*VALID, "redirectUrl", "cancelUrl", "webhookUrl", "payer", "x"])


def refused_in_shape(exc: InvalidRequest) -> None:
    body = exc.body()["error"]
    assert exc.status == 400 and body["code"] == "invalid_request"
    assert body["details"]["problems"] and all("field" in p for p in body["details"]["problems"])


@given(st.dictionaries(CREATE_KEYS, JSON, max_size=6), st.sets(st.sampled_from(list(VALID))))
def test_a_create_body_parses_within_bounds_or_is_a_400(
    changes: dict[str, Any], dropped: set[str]
) -> None:
    data = {k: v for k, v in {**VALID, **changes}.items() if k not in dropped}
    try:
        body = validate(CreateSubscriptionBody, data)
    except InvalidRequest as exc:
        refused_in_shape(exc)
        return
    assert set(data) <= set(CreateSubscriptionBody.model_fields)
    assert isinstance(body.chainId, int) and 0 < body.chainId < 2**63
    assert isinstance(body.periodSeconds, int) and 0 < body.periodSeconds < 2**40
    assert isinstance(body.maxPeriods, int) and 0 <= body.maxPeriods < 2**32
    assert isinstance(body.amount, str) and len(body.amount) <= 100
    assert body.subscriptionId is None or 1 <= len(body.subscriptionId) <= 128
    assert body.ownerAddress == OWNER and body.tokenAddress == TOKEN
    assert body.webhookUrl is None or 0 < len(body.webhookUrl) <= 2048


URLS = st.text(max_size=60) | st.from_regex(
    r"(https?|ftp)?(://)?(localhost|127\.0\.0\.1|10\.1\.2\.3|\[::1\]|hooks\.example\.com)?"
    r"(:[0-9]{1,6})?/[a-z]{0,4}",
    fullmatch=True,
)
PRODUCTION = Settings(environment="production", secret="s" * 40, webhook_allow_private=False)
DEVELOPMENT = Settings(environment="development", webhook_allow_private=True)


def refusal(check: Any) -> str | None:
    """The field a refusal names, or None when taken."""
    try:
        check()
    except InvalidRequest as exc:
        details = exc.body()["error"]["details"]
        return str(details.get("field") or details["problems"][0]["field"])
    return None


@given(URLS | st.just("https://hooks.example.com/" + "a" * 2048))
@example("http://hooks.example.com/paid")
@example("https://10.1.2.3/paid")
def test_a_webhook_url_is_taken_or_refused_as_an_invoices(url: str) -> None:
    invoice = {"ownerAddress": OWNER, "chainId": 31337, "amount": "1", "webhookUrl": url}
    as_invoice = refusal(lambda: validate(CreateInvoiceBody, invoice))
    subscription = {**VALID, "webhookUrl": url}
    as_subscription = refusal(lambda: validate(CreateSubscriptionBody, subscription))
    assert as_subscription == as_invoice and as_invoice in (None, "webhookUrl")
    if as_invoice is not None:
        return
    refused = refusal(lambda: check_webhook_url(PRODUCTION, url))
    assert refused in (None, "webhookUrl")
    if refused is None:
        parts = urlsplit(url)
        assert parts.scheme == "https"
        assert parts.hostname not in ("localhost", "127.0.0.1", "10.1.2.3", "::1")
    assert refusal(lambda: check_webhook_url(DEVELOPMENT, url)) is None


BOUNDS = {"chainId": (1, 2**63), "periodSeconds": (1, 2**40), "maxPeriods": (0, 2**32)}


@given(
    st.sampled_from(list(BOUNDS)),
    st.integers(min_value=-(2**5), max_value=2**5)
    | st.integers(min_value=-(2**70), max_value=2**70),
)
def test_an_integer_field_is_taken_exactly_within_its_bounds(field: str, value: int) -> None:
    low, high = BOUNDS[field]
    try:
        body = validate(CreateSubscriptionBody, {**VALID, field: value})
    except InvalidRequest as exc:
        refused_in_shape(exc)
        assert not low <= value < high
        return
    assert low <= value < high and getattr(body, field) == value


@given(st.decimals(min_value=Decimal("0.000001"), max_value=Decimal(10**30), places=6))
def test_an_amount_per_period_is_exactly_its_raw_units(amount: Decimal) -> None:
    spelled = format(amount, "f")
    assert to_raw(spelled, 6) == int(amount.scaleb(6, Context(prec=100)))


@given(
    st.text(max_size=40) | st.from_regex(r"-?[0-9]{0,5}(\.[0-9]{0,9})?(e[0-9])?", fullmatch=True)
)
@example("10000000000000000000000000001")  # past Decimal's default 28 digits
def test_any_other_amount_is_exact_or_a_400(amount: str) -> None:
    try:
        raw = to_raw(amount, 6)
    except InvalidRequest as exc:
        assert exc.status == 400 and exc.body()["error"]["details"]["field"] == "amount"
        return
    assert raw > 0 and Decimal(amount).scaleb(6, Context(prec=100)) == raw


@given(st.dictionaries(st.sampled_from(["signature", "payer", "permit", "x"]), JSON, max_size=4))
def test_an_authorization_body_parses_or_is_a_400(data: dict[str, Any]) -> None:
    try:
        body = validate(SubscriptionAuthorizationBody, data)
    except InvalidRequest as exc:
        refused_in_shape(exc)
        return
    assert isinstance(body.signature, str) and len(body.signature) <= 4098
    assert set(data) <= {"signature", "payer"}


TERMS = Terms(
    chain_id=31337,
    contract="0x" + "ab" * 20,
    owner=OWNER,
    token=TOKEN,
    amount_raw=2_500_000,
    period_seconds=3600,
    start_s=1_700_000_000,
    max_periods=0,
    salt=b"\x01" * 32,
)
SIGNER = Account.from_key("0x" + "42" * 32)
SIGNED = "0x" + sign_typed(SIGNER.key, TERMS.typed_data()).hex()


@given(st.text(max_size=140) | st.binary(max_size=80).map(lambda b: "0x" + b.hex()))
def test_a_signature_names_its_signer_or_is_refused(signature: str) -> None:
    try:
        payer = payer_of(TERMS, signature, None)
    except InvalidAuthorization as exc:
        assert exc.status == 400 and exc.body()["error"]["code"] == "invalid_authorization"
        return
    assert payer != SIGNER.address  # a random signature recovers some other address


def test_the_payers_signature_names_the_payer_and_no_one_else() -> None:
    assert payer_of(TERMS, SIGNED, None) == SIGNER.address
    assert payer_of(TERMS, SIGNED, SIGNER.address.lower()) == SIGNER.address
    other = Account.create().address
    try:
        payer_of(TERMS, SIGNED, other)
    except InvalidAuthorization as exc:
        assert exc.body()["error"]["details"] == {"field": "payer"}
    else:
        raise AssertionError("another payer was accepted for the signer's signature")
