"""The Python SDK's own rules on httpx's MockTransport (no server): what it signs, when it
tries again, which exception each error answer raises. Signatures are checked with the
service's own verifier, so client and server agree on the canonical message."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from eth_account import Account

from invoicing.auth.signatures import signed_by
from invoicing_client import Client
from invoicing_client import errors as e
from invoicing_client.signing import sign_request
from tests.support.node import node_json

KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
OWNER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
PAYMENT_ADDRESS = "0x8C67C726B74AD0f1e397A5a4276a1f0d8214b884"
INVOICE = {
    "id": "01a2",
    "ownerAddress": OWNER,
    "chainId": 31337,
    "invoiceId": "order-1",
    "paymentAddress": PAYMENT_ADDRESS,
    "salt": "0x" + "11" * 32,
    "amount": "1.5",
    "tokenAddress": None,
    "expiresAt": 1795550333262,
    "status": "pending",
    "paid": False,
    "paidAt": None,
    "withdrawn": False,
    "withdrawnAt": None,
    "requiredRaw": "1500000000000000000",
    "balanceRaw": "0",
    "metaBalance": "0",
    "lastCheckedAt": 1795463933262,
    "createdAt": 1795463933262,
    "updatedAt": 1795463933262,
    "url": "http://pay.test/pay/" + PAYMENT_ADDRESS,
    "someFutureField": 1,
}

Answer = Callable[[httpx.Request], httpx.Response]


def error(status: int, code: str, details: dict[str, object] | None = None) -> httpx.Response:
    body: dict[str, object] = {"code": code, "message": f"{code} happened"}
    if details:
        body["details"] = details
    return httpx.Response(status, json={"error": body})


def client_answering(
    answers: list[httpx.Response | Exception], sent: list[httpx.Request], **options: object
) -> Client:
    """A signature-mode client whose requests get ``answers`` in turn."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    http = httpx.Client(transport=httpx.MockTransport(handler))
    return Client("http://svc.test", OWNER, private_key=KEY, http=http, backoff_s=0, **options)  # type: ignore[arg-type]


def signed_by_owner(request: httpx.Request, action: str) -> bool:
    """The service's own check of a request as sent."""
    signature = request.headers["x-service-signature"]
    timestamp = int(request.headers["x-service-timestamp"])
    if request.method == "POST":
        body = json.loads(request.content)
        assert next(iter(body)) == "ownerAddress"
        payload = {key: value for key, value in body.items() if key != "ownerAddress"}
        return signed_by(OWNER, signature, action, timestamp, payload)
    query = dict(request.url.params.multi_items())
    assert query.pop("ownerAddress") == OWNER
    return signed_by(OWNER, signature, action, timestamp, query, query_types={})


def test_request_signature_matches_the_documented_test_vector() -> None:
    payload = {"chainId": 31337, "amount": "1.5", "invoiceId": "order-1"}
    signature = sign_request(KEY, "invoice.create", OWNER, 1760000000000, payload)
    assert signature == (
        "0x2f9d1ea8828f958b4665ab2a6801cde01d41ea5334d98b7fb35abfb1c02cbea33beff295b1ca80fdc32b"
        "611b4471967304793bbb4f1708c105c915300ee24adb1c"
    )


def test_create_sends_the_body_it_signs_with_omitted_fields_left_out() -> None:
    sent: list[httpx.Request] = []
    with client_answering([httpx.Response(201, json=INVOICE)], sent) as client:
        invoice = client.invoices.create(31337, "1.5", invoice_id="order-1", metadata={"a": "é"})

    (request,) = sent
    assert json.loads(request.content) == {
        "ownerAddress": OWNER,
        "chainId": 31337,
        "amount": "1.5",
        "invoiceId": "order-1",
        "metadata": {"a": "é"},
    }
    assert signed_by_owner(request, "invoice.create")
    assert (invoice.created, invoice.request_signature) == (
        True, request.headers["x-service-signature"],
    )  # fmt: skip
    assert (invoice.required_raw, invoice.balance_raw, invoice.chain_id) == (15 * 10**17, 0, 31337)


def test_queries_are_signed_as_all_strings_in_url_order() -> None:
    sent: list[httpx.Request] = []
    page = {"items": [INVOICE], "total": 1, "page": 1, "limit": 100}
    with client_answering([httpx.Response(200, json=page)], sent) as client:
        listed = list(client.invoices.list(chain_id=31337, paid=False, invoice_id="007"))

    (request,) = sent
    assert list(request.url.params.multi_items()) == [
        ("ownerAddress", OWNER), ("chainId", "31337"), ("paid", "false"),
        ("invoiceId", "007"), ("page", "1"), ("limit", "100"),
    ]  # fmt: skip
    assert signed_by_owner(request, "invoice.list")
    assert [invoice.invoice_id for invoice in listed] == ["order-1"]


def test_an_idempotent_create_is_retried_after_5xx_and_lost_connections_each_signed_anew() -> None:
    sent: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        error(503, "chain_unavailable"),
        httpx.ReadTimeout("slow"),
        httpx.Response(502, text="<html>bad gateway</html>"),
        httpx.Response(200, json=INVOICE),
    ]
    with client_answering(answers, sent) as client:
        invoice = client.invoices.create(31337, "1.5", invoice_id="order-1")

    assert len(sent) == 4
    assert len({request.content for request in sent}) == 1  # the same body each time
    assert len({request.headers["x-service-timestamp"] for request in sent}) == 4
    assert all(signed_by_owner(request, "invoice.create") for request in sent)
    # 200: the invoice existed already (an earlier attempt made it).
    assert (invoice.created, invoice.request_signature) == (False, None)


def test_a_create_without_invoice_id_is_not_retried_once_it_may_have_arrived() -> None:
    for answer in (error(503, "chain_unavailable"), httpx.ReadTimeout("slow")):
        sent: list[httpx.Request] = []
        with client_answering([answer], sent) as client:
            with pytest.raises((e.ChainUnavailable, e.ServiceUnreachable)):
                client.invoices.create(31337, "1.5")
        assert len(sent) == 1


def test_a_refused_connection_is_retried_for_any_call_since_nothing_was_sent() -> None:
    sent: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        httpx.ConnectError("refused"),
        httpx.Response(201, json=INVOICE),
    ]
    with client_answering(answers, sent) as client:
        invoice = client.invoices.create(31337, "1.5")
    assert len(sent) == 2 and invoice.created is True


def test_retries_stop_after_max_retries() -> None:
    sent: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [httpx.ConnectError("refused")] * 3
    with client_answering(answers, sent, max_retries=2) as client:
        with pytest.raises(e.ServiceUnreachable, match="GET /integration/invoices/status"):
            client.invoices.status(PAYMENT_ADDRESS)
    assert len(sent) == 3


def test_a_replayed_timestamp_is_retried_once_with_a_new_one() -> None:
    sent: list[httpx.Request] = []
    answers: list[httpx.Response | Exception] = [
        error(401, "replayed_request"),
        httpx.Response(200, json={"invoice": INVOICE}),
    ]
    with client_answering(answers, sent) as client:
        invoice = client.invoices.status(PAYMENT_ADDRESS)
    assert invoice.payment_address == PAYMENT_ADDRESS
    assert sent[0].headers["x-service-timestamp"] != sent[1].headers["x-service-timestamp"]


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (400, "invalid_request", e.InvalidRequest),
        (400, "unsupported_chain", e.UnsupportedChain),
        (400, "unsupported_token", e.UnsupportedToken),
        (400, "fee_too_high", e.FeeTooHigh),
        (400, "deadline_expired", e.DeadlineExpired),
        (400, "invalid_owner_signature", e.InvalidOwnerSignature),
        (400, "insufficient_balance", e.InsufficientBalance),
        (401, "unauthorized", e.Unauthorized),
        (401, "timestamp_out_of_window", e.TimestampOutOfWindow),
        (403, "forbidden", e.Forbidden),
        (404, "not_found", e.NotFound),
        (405, "method_not_allowed", e.MethodNotAllowed),
        (409, "invoice_exists", e.InvoiceExists),
        (409, "nonce_mismatch", e.NonceMismatch),
        (409, "sweep_in_progress", e.SweepInProgress),
        (409, "invoice_pending", e.InvoicePending),
        (409, "too_many_webhook_secrets", e.TooManyWebhookSecrets),
        (409, "too_many_webhook_endpoints", e.TooManyWebhookEndpoints),
        (413, "payload_too_large", e.PayloadTooLarge),
        (415, "unsupported_media_type", e.UnsupportedMediaType),
        (429, "rate_limited", e.RateLimited),
        (418, "brand_new_code", e.ApiError),
    ],
)
def test_each_error_code_raises_its_own_class_without_retry(
    status: int, code: str, cls: type[e.ApiError]
) -> None:
    sent: list[httpx.Request] = []
    details = {"retryAfterS": 7} if code == "rate_limited" else {"expected": "3"}
    with client_answering([error(status, code, details)], sent) as client:
        with pytest.raises(e.ApiError) as raised:
            client.invoices.delete(31337, "order-1")

    assert type(raised.value) is cls
    assert (raised.value.status, raised.value.code, raised.value.details) == (status, code, details)
    assert raised.value.message == f"{code} happened"
    assert len(sent) == 1
    if code == "rate_limited":
        assert isinstance(raised.value, e.RateLimited) and raised.value.retry_after_s == 7


def test_every_code_of_the_service_has_its_class() -> None:
    from invoicing import errors as service_errors

    def codes(cls: type[service_errors.ServiceError]) -> set[str]:
        found = {cls.code}
        for sub in cls.__subclasses__():
            found |= codes(sub)
        return found

    missing = codes(service_errors.ServiceError) - set(e.ERRORS_BY_CODE)
    assert missing == set()


def test_credentials_never_show_in_reprs() -> None:
    api = Client("http://svc.test", OWNER, api_key="sk_secret-value")
    signing = Client("http://svc.test", OWNER, private_key=KEY)
    shown = repr(api) + repr(signing) + repr(signing._transport.signer)
    assert "sk_secret-value" not in shown and KEY[2:] not in shown
    assert "api_key" in repr(api) and "signature" in repr(signing)


def test_a_private_key_of_another_wallet_is_refused() -> None:
    with pytest.raises(ValueError, match="not to owner_address"):
        Client("http://svc.test", Account.create().address, private_key=KEY)
    with pytest.raises(ValueError, match="give api_key= or private_key="):
        Client("http://svc.test", OWNER)


def test_the_sdk_stands_alone() -> None:
    # Integrators install the client without the server: it never imports `invoicing`, and
    # it depends on exactly httpx, pydantic, eth-account and coincurve.
    import ast
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "clients" / "python"
    imported = set()
    for path in (root / "src" / "invoicing_client").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]

    assert "invoicing" not in imported
    assert imported - {"invoicing_client"} <= {
        "__future__", "asyncio", "base64", "collections", "contextlib", "dataclasses", "decimal",
        "enum", "functools", "hashlib", "hmac", "json", "random", "threading", "time", "typing",
        "urllib", "httpx", "pydantic", "eth_account", "eth_utils",
    }  # fmt: skip
    names = [dependency.split(">")[0] for dependency in project["dependencies"]]
    assert names == ["httpx", "pydantic", "eth-account", "coincurve"]


FIAT = {"currency": "USD", "amount": "25.00", "rate": "2500", "source": "chainlink"}
FIAT_ROUND = {"feed": PAYMENT_ADDRESS, "roundId": "18446744073709551617", "roundUpdatedAt": 1}
TOLERANCE = {"bps": 100, "minimumRaw": "9900", "acceptedUnder": True, "shortfallRaw": "50"}


def test_create_sends_a_currency_and_reads_the_locked_price_and_tolerance() -> None:
    sent: list[httpx.Request] = []
    answer = {**INVOICE, "fiat": {**FIAT, **FIAT_ROUND}, "tolerance": TOLERANCE}
    with client_answering([httpx.Response(201, json=answer)], sent) as client:
        invoice = client.invoices.create(31337, "25.00", currency="USD")

    (request,) = sent
    assert json.loads(request.content) == {
        "ownerAddress": OWNER,
        "chainId": 31337,
        "amount": "25.00",
        "currency": "USD",
    }
    assert signed_by_owner(request, "invoice.create")
    assert invoice.fiat is not None and invoice.tolerance is not None
    assert (invoice.fiat.rate, invoice.fiat.round_id) == ("2500", 2**64 + 1)
    assert (invoice.tolerance.minimum_raw, invoice.tolerance.shortfall_raw) == (9900, 50)


def test_settings_update_sends_only_what_is_given() -> None:
    sent: list[httpx.Request] = []
    answer = {"webhookApiKeyHeader": True, "underpaymentToleranceBps": 250}
    with client_answering([httpx.Response(200, json=answer)], sent) as client:
        settings = client.settings.update(underpayment_tolerance_bps=250)

    assert json.loads(sent[0].content) == {"ownerAddress": OWNER, "underpaymentToleranceBps": 250}
    assert settings.underpayment_tolerance_bps == 250


def test_the_js_sdk_sends_a_currency_and_reads_raw_price_fields_as_bigints() -> None:
    answer = json.dumps({**INVOICE, "fiat": {**FIAT, **FIAT_ROUND}, "tolerance": TOLERANCE})
    script = (
        "const { Client } = await import('./clients/js/src/index.js');"
        "const sent = [];"
        "const fetch = async (url, init) => { sent.push(JSON.parse(init.body));"
        f" return new Response({json.dumps(answer)},"
        " { status: 201, headers: { 'content-type': 'application/json' } }); };"
        f"const client = new Client({{ baseUrl: 'http://svc.test', ownerAddress: '{OWNER}',"
        " apiKey: 'sk_test', fetch });"
        "const invoice = await client.invoices.create("
        "{ chainId: 31337, amount: '25.00', currency: 'USD' });"
        "console.log(JSON.stringify({ sent, rate: invoice.fiat.rate,"
        " round: typeof invoice.fiat.roundId, shortfall: String(invoice.tolerance.shortfallRaw),"
        " kind: typeof invoice.tolerance.shortfallRaw }));"
    )
    found = node_json(script)

    assert found["sent"] == [
        {"ownerAddress": OWNER, "chainId": 31337, "amount": "25.00", "currency": "USD"}
    ]
    assert (found["rate"], found["round"], found["shortfall"], found["kind"]) == (
        "2500",
        "bigint",
        "50",
        "bigint",
    )


def test_update_brand_sends_the_logo_as_base64_and_null_for_what_is_removed() -> None:
    sent: list[httpx.Request] = []
    answer = {"displayName": "Shop", "accentColor": None, "textColor": None, "logoUrl": None}
    with client_answering([httpx.Response(200, json=answer)], sent) as client:
        brand = client.settings.update_brand(
            display_name="Shop", logo=b"\x89PNG", remove=("accent_color",)
        )
        with pytest.raises(TypeError, match="remove takes"):
            client.settings.update_brand(remove=("colour",))

    assert (sent[0].method, sent[0].url.path) == ("PUT", "/integration/settings/brand")
    body = json.loads(sent[0].content)
    assert {k: v for k, v in body.items() if k != "ownerAddress"} == {
        "displayName": "Shop",
        "logo": "iVBORw==",
        "accentColor": None,
    }
    assert brand.display_name == "Shop" and brand.logo_url is None
