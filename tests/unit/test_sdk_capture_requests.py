"""Both SDKs' calls of manual capture, the refund delegate and subscriptions on a mocked
transport (no server): the bodies and queries they send, and the owner's EIP-712 messages
they sign, checked with the service's own typed data and request verifier."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from eth_account import Account
from eth_account.messages import encode_typed_data

from invoicing.auth.signatures import signed_by
from invoicing.chain.eip712 import refund_typed_data, set_refund_delegate_typed_data
from invoicing_client import Client
from tests.support.node import node_json

KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
OWNER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
PAYER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
DELEGATE = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
FACTORY = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
TOKEN = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
PAYMENT_ADDRESS = "0x8C67C726B74AD0f1e397A5a4276a1f0d8214b884"
SALT = "11" * 32
DEADLINE = 1900000000
BALANCE_RAW = 1_500_000_000_000_000_001  # more than a float holds exactly
INVOICE = {
    "id": "01a2",
    "ownerAddress": OWNER,
    "chainId": 31337,
    "invoiceId": "order-1",
    "paymentAddress": PAYMENT_ADDRESS,
    "salt": "0x" + SALT,
    "amount": "1.5",
    "tokenAddress": TOKEN,
    "expiresAt": 1795550333262,
    "status": "paid",
    "paid": True,
    "paidAt": 1795463933262,
    "withdrawn": False,
    "withdrawnAt": None,
    "requiredRaw": "1500000000000000000",
    "balanceRaw": str(BALANCE_RAW),
    "metaBalance": "1.500000000000000001",
    "lastCheckedAt": 1795463933262,
    "createdAt": 1795463933262,
    "updatedAt": 1795463933262,
    "url": "http://pay.test/pay/" + PAYMENT_ADDRESS,
    "capture": "manual",
    "capturedAt": None,
    "voidedAt": None,
}
FEES = {"feeBps": 0, "payoutAddress": OWNER, "nonce": "7", "factory": FACTORY}
SUBMITTED = {"txHash": "0x" + "ab" * 32, "chainId": 31337, "ownerAddress": OWNER}
SUBMITTED |= {"nonce": "7", "status": "submitted"}
SUBSCRIPTION = {
    "id": "0f9e",
    "subscriptionId": "plan-1",
    "ownerAddress": OWNER,
    "chainId": 31337,
    "tokenAddress": TOKEN,
    "amount": "9.99",
    "amountRaw": "9990000",
    "periodSeconds": 2592000,
    "maxPeriods": 0,
    "status": "active",
    "url": "http://pay.test/subscribe/0f9e",
    "payer": PAYER,
    "nextChargeAt": 1795463933262,
    "description": None,
    "authorization": {"spender": FACTORY, "typedData": {"primaryType": "Authorize"}},
    "charges": [],
    "createdAt": 1795463933262,
}


def client_answering(answers: list[Any], sent: list[httpx.Request]) -> Client:
    """A signature-mode client whose requests get the JSON ``answers`` (status, body) in turn."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        status, body = answers.pop(0)
        return httpx.Response(status, json=body)

    http = httpx.Client(transport=httpx.MockTransport(handler))
    return Client("http://svc.test", OWNER, private_key=KEY, http=http)


def signer_of(typed: dict[str, Any], signature: str) -> str:
    return str(Account.recover_message(encode_typed_data(full_message=typed), signature=signature))


def body_of(request: httpx.Request) -> dict[str, Any]:
    return dict(json.loads(request.content))


def signed_by_owner(request: httpx.Request, action: str) -> bool:
    signature = request.headers["x-service-signature"]
    timestamp = int(request.headers["x-service-timestamp"])
    if request.method == "POST":
        payload = {key: value for key, value in body_of(request).items() if key != "ownerAddress"}
        return signed_by(OWNER, signature, action, timestamp, payload)
    query = dict(request.url.params.multi_items())
    assert query.pop("ownerAddress") == OWNER
    return signed_by(OWNER, signature, action, timestamp, query, query_types={})


def expected_delegate_typed_data() -> dict[str, Any]:
    return set_refund_delegate_typed_data(31337, FACTORY, OWNER, DELEGATE, 7, DEADLINE)


def expected_void_typed_data() -> dict[str, Any]:
    salt = bytes.fromhex(SALT)
    return refund_typed_data(31337, FACTORY, OWNER, salt, TOKEN, PAYER, BALANCE_RAW, 7, DEADLINE)


def assert_relayed(
    sent_bodies: list[dict[str, Any]], expected: dict[str, Any], typed: Callable[[], Any]
) -> None:
    """The last body is ``expected`` plus a signature the service recovers to the owner."""
    body = dict(sent_bodies[-1])
    signature = body.pop("signature")
    assert body == expected
    assert signer_of(typed(), signature) == OWNER


DELEGATE_BODY = {
    "ownerAddress": OWNER,
    "chainId": 31337,
    "delegate": DELEGATE,
    "nonce": "7",
    "deadline": str(DEADLINE),
}
# The whole payment, to the payer, in the invoice's token: no tokenAddress in the body.
VOID_BODY = {
    "ownerAddress": OWNER,
    "chainId": 31337,
    "paymentAddress": PAYMENT_ADDRESS,
    "to": PAYER,
    "amountRaw": str(BALANCE_RAW),
    "nonce": "7",
    "deadline": str(DEADLINE),
}


def test_set_refund_delegate_signs_the_services_typed_data_at_the_owners_nonce() -> None:
    sent: list[httpx.Request] = []
    with client_answering([(200, FEES), (202, SUBMITTED)], sent) as client:
        submission = client.fees.set_refund_delegate(31337, DELEGATE, deadline=DEADLINE)

    assert [request.url.path for request in sent] == [
        "/integration/fees",
        "/integration/refund-delegate",
    ]
    assert_relayed([body_of(sent[1])], DELEGATE_BODY, expected_delegate_typed_data)
    assert signed_by_owner(sent[1], "refund_delegate.set")
    assert submission.nonce == 7


def test_void_signs_a_refund_of_the_whole_balance_to_the_payer() -> None:
    sent: list[httpx.Request] = []
    answers = [(200, {"invoice": INVOICE}), (200, FEES), (202, SUBMITTED)]
    with client_answering(answers, sent) as client:
        client.invoices.void(PAYMENT_ADDRESS, PAYER, deadline=DEADLINE)

    assert sent[1].url.params["paymentAddress"] == PAYMENT_ADDRESS  # the escrow's factory
    assert sent[2].url.path == "/integration/invoices/void"
    assert_relayed([body_of(sent[2])], VOID_BODY, expected_void_typed_data)
    assert signed_by_owner(sent[2], "invoice.void")


def test_capture_and_create_with_manual_capture_send_what_the_service_takes() -> None:
    sent: list[httpx.Request] = []
    captured = {key: INVOICE[key] for key in ("ownerAddress", "chainId", "invoiceId")}
    captured |= {"paymentAddress": PAYMENT_ADDRESS, "capture": "manual", "capturedAt": 5}
    answers = [(201, {**INVOICE, "status": "pending"}), (200, captured)]
    with client_answering(answers, sent) as client:
        invoice = client.invoices.create(31337, "1.5", TOKEN, capture="manual")
        result = client.invoices.capture(31337, PAYMENT_ADDRESS)

    assert body_of(sent[0]) == {
        "ownerAddress": OWNER,
        "chainId": 31337,
        "amount": "1.5",
        "tokenAddress": TOKEN,
        "capture": "manual",
    }
    assert body_of(sent[1]) == {
        "ownerAddress": OWNER,
        "chainId": 31337,
        "paymentAddress": PAYMENT_ADDRESS,
    }
    assert signed_by_owner(sent[1], "invoice.capture")
    assert (invoice.capture, result.captured_at) == ("manual", 5)


def test_subscriptions_send_their_bodies_and_queries_and_read_the_subscription() -> None:
    sent: list[httpx.Request] = []
    second = {**SUBSCRIPTION, "id": "0f9f"}
    answers = [
        (201, SUBSCRIPTION),
        (200, {"subscription": SUBSCRIPTION}),
        (200, {"items": [SUBSCRIPTION], "total": 2, "page": 1, "limit": 1}),
        (200, {"items": [second], "total": 2, "page": 2, "limit": 1}),
        (200, {"subscription": {**SUBSCRIPTION, "status": "cancelled"}}),
        (200, {"subscription": SUBSCRIPTION}),
        (200, {"subscription": {**SUBSCRIPTION, "status": "cancelled"}}),
    ]
    permit = {"value": "9990000", "deadline": 1_900_000_000, "signature": "0x" + "ef" * 65}
    with client_answering(answers, sent) as client:
        created = client.subscriptions.create(
            31337, TOKEN, "9.99", 2592000, subscription_id="plan-1"
        )
        status = client.subscriptions.status("0f9e")
        listed = [item.id for item in client.subscriptions.list(page_size=1)]
        cancelled = client.subscriptions.cancel("0f9e")
        authorized = client.public.authorize_subscription("0f9e", "0x" + "cd" * 65, permit=permit)
        ended = client.public.cancel_subscription("0f9e", "0x" + "ab" * 65)

    assert body_of(sent[0]) == {
        "ownerAddress": OWNER,
        "chainId": 31337,
        "tokenAddress": TOKEN,
        "amount": "9.99",
        "periodSeconds": 2592000,
        "subscriptionId": "plan-1",
    }
    assert [(r.method, r.url.path, dict(r.url.params)) for r in sent[1:5]] == [
        ("GET", "/integration/subscriptions/status", {"ownerAddress": OWNER, "id": "0f9e"}),
        ("GET", "/integration/subscriptions", {"ownerAddress": OWNER, "page": "1", "limit": "1"}),
        ("GET", "/integration/subscriptions", {"ownerAddress": OWNER, "page": "2", "limit": "1"}),
        ("DELETE", "/integration/subscriptions", {"ownerAddress": OWNER, "id": "0f9e"}),
    ]
    actions = ["subscription.create", "subscription.status", "subscription.list"]
    actions += ["subscription.list", "subscription.cancel"]
    assert all(signed_by_owner(r, a) for r, a in zip(sent[:5], actions, strict=True))
    assert (sent[5].url.path, body_of(sent[5])) == (
        "/subscribe/0f9e/authorization",
        {"signature": "0x" + "cd" * 65, "permit": permit},
    )
    assert (sent[6].url.path, body_of(sent[6])) == (
        "/subscribe/0f9e/cancellation",
        {"signature": "0x" + "ab" * 65},
    )
    assert "x-service-signature" not in sent[5].headers  # a public route: no credential
    assert "x-service-signature" not in sent[6].headers
    assert ended.status == "cancelled"
    assert (created.amount_raw, status.payer, listed) == (9990000, PAYER, ["0f9e", "0f9f"])
    assert (cancelled.status, authorized.id) == ("cancelled", "0f9e")


JS_RELAY = """
const {{ Client }} = await import('./clients/js/src/index.js');
const answers = {answers};
const sent = [];
const fetch = async (url, init) => {{
  sent.push({{ url: String(url), body: init.body ? JSON.parse(init.body) : null }});
  const [status, body] = answers.shift();
  return new Response(JSON.stringify(body),
    {{ status, headers: {{ 'content-type': 'application/json' }} }});
}};
const client = new Client({{ baseUrl: 'http://svc.test', privateKey: '{key}', fetch }});
{calls}
console.log(JSON.stringify(sent));
"""


def js_sent(answers: list[Any], calls: str) -> list[dict[str, Any]]:
    script = JS_RELAY.format(answers=json.dumps(answers), key=KEY, calls=calls)
    return list(node_json(script))


def test_the_js_sdk_signs_the_same_refund_delegate_and_void() -> None:
    answers = [(200, FEES), (202, SUBMITTED), (200, {"invoice": INVOICE})]
    answers += [(200, FEES), (202, SUBMITTED)]
    sent = js_sent(
        answers,
        f"await client.fees.setRefundDelegate(31337, '{DELEGATE}', {{ deadline: {DEADLINE} }});"
        f"await client.invoices.void('{PAYMENT_ADDRESS}', '{PAYER}', {{ deadline: {DEADLINE} }});",
    )

    assert [item["url"].split("?")[0] for item in sent] == [
        "http://svc.test/integration/fees",
        "http://svc.test/integration/refund-delegate",
        "http://svc.test/integration/invoices/status",
        "http://svc.test/integration/fees",
        "http://svc.test/integration/invoices/void",
    ]
    assert_relayed([sent[1]["body"]], DELEGATE_BODY, expected_delegate_typed_data)
    assert_relayed([sent[4]["body"]], VOID_BODY, expected_void_typed_data)


def test_the_js_sdk_sends_capture_and_subscription_calls() -> None:
    captured = {"ownerAddress": OWNER, "chainId": 31337, "invoiceId": "order-1"}
    captured |= {"paymentAddress": PAYMENT_ADDRESS, "capture": "manual", "capturedAt": 5}
    answers = [
        (200, captured),
        (201, SUBSCRIPTION),
        (200, {"items": [SUBSCRIPTION], "total": 1, "page": 1, "limit": 100}),
        (200, {"subscription": SUBSCRIPTION}),
        (200, {"subscription": SUBSCRIPTION}),
        (200, {"subscription": SUBSCRIPTION}),
    ]
    sent = js_sent(
        answers,
        f"await client.invoices.capture(31337, '{PAYMENT_ADDRESS}');"
        f"await client.subscriptions.create({{ chainId: 31337, tokenAddress: '{TOKEN}',"
        " amount: '9.99', periodSeconds: 60, maxPeriods: 3 });"
        "for await (const s of client.subscriptions.list()) {}"
        "await client.subscriptions.cancel('0f9e');"
        "await client.public.authorizeSubscription('0f9e',"
        f" {{ signature: '0x12', payer: '{PAYER}' }});"
        "await client.public.cancelSubscription('0f9e', { signature: '0x34' });",
    )

    assert sent == [
        {
            "url": "http://svc.test/integration/invoices/capture",
            "body": {"ownerAddress": OWNER, "chainId": 31337, "paymentAddress": PAYMENT_ADDRESS},
        },
        {
            "url": "http://svc.test/integration/subscriptions",
            "body": {
                "ownerAddress": OWNER,
                "chainId": 31337,
                "tokenAddress": TOKEN,
                "amount": "9.99",
                "periodSeconds": 60,
                "maxPeriods": 3,
            },
        },
        {
            "url": f"http://svc.test/integration/subscriptions?ownerAddress={OWNER}&page=1&limit=100",
            "body": None,
        },
        {
            "url": f"http://svc.test/integration/subscriptions?ownerAddress={OWNER}&id=0f9e",
            "body": None,
        },
        {
            "url": "http://svc.test/subscribe/0f9e/authorization",
            "body": {"signature": "0x12", "payer": PAYER},
        },
        {"url": "http://svc.test/subscribe/0f9e/cancellation", "body": {"signature": "0x34"}},
    ]


def test_a_payers_gasless_authorization_is_sent_without_the_owner() -> None:
    sent: list[httpx.Request] = []
    authorization = {"chainId": 31337, "tokenAddress": TOKEN, "from": PAYER, "value": "1"}
    answer = {"txHash": "0x" + "ab" * 32, "chainId": 31337, "payer": PAYER, "nonce": "0x01"}
    answer |= {"status": "submitted"}
    with client_answering([(202, answer)], sent) as client:
        client.public.pay_without_gas(PAYMENT_ADDRESS, authorization)

    assert body_of(sent[0]) == authorization  # the service refuses any other field
