"""Both SDKs' calls of the team, the payments report, the mailed events and the payer's
receipt on a mocked transport (no server): the bodies and queries they send, which credential
each carries (the team: the owner's request signature even when the client has an API key),
checked with the service's own request verifier, and what each answer is read as."""

from __future__ import annotations

import json
from typing import Any

import httpx

from invoicing.auth.signatures import signed_by
from invoicing_client import Client
from invoicing_client.models import PaymentReport
from tests.support.node import node_json

KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
OWNER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
MEMBER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
PAYMENT_ADDRESS = "0x8C67C726B74AD0f1e397A5a4276a1f0d8214b884"
API_KEY = "sk_test_1"
MEMBER_ROW = {"address": MEMBER, "role": "operator", "createdAt": 5, "updatedAt": 6}
MAIL: dict[str, Any] = {"email": "shop@example.org", "events": ["invoice.paid"]}
MAIL |= {"language": "de", "receipts": True}
LINE = {
    "invoiceId": "order-1",
    "paymentAddress": PAYMENT_ADDRESS,
    "chainId": 31337,
    "token": "native",
    "amount": "1.5",
    "paidAt": 1795463933262,
    "txHash": "0x" + "ab" * 32,
    "from": MEMBER,
    "fiatCurrency": "EUR",
    "fiatAmount": "3000.00",
    "rate": "2000",
    "fee": "",
    "sweepTxHash": "",
}
CSV = "invoiceId,paymentAddress\r\norder-1,0x8C67\r\n"
DAY = (1795400000000, 1795486400000)


def client_answering(answers: list[Any], sent: list[httpx.Request]) -> Client:
    """A client with an API key and the owner's private key whose requests get ``answers``
    (status, JSON body or text) in turn."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        status, body = answers.pop(0)
        if isinstance(body, str):
            return httpx.Response(status, text=body, headers={"content-type": "text/csv"})
        return httpx.Response(status, json=body)

    http = httpx.Client(transport=httpx.MockTransport(handler))
    return Client("http://svc.test", OWNER, api_key=API_KEY, private_key=KEY, http=http)


def body_of(request: httpx.Request) -> dict[str, Any]:
    return dict(json.loads(request.content))


def signed_by_owner(request: httpx.Request, action: str) -> bool:
    """The request carries the owner's signature of ``action`` over what it sends, and no
    API key."""
    assert "x-service-api-key" not in request.headers
    signature = request.headers["x-service-signature"]
    timestamp = int(request.headers["x-service-timestamp"])
    if request.content:
        payload = {key: value for key, value in body_of(request).items() if key != "ownerAddress"}
        return signed_by(OWNER, signature, action, timestamp, payload)
    query = dict(request.url.params.multi_items())
    assert query.pop("ownerAddress") == OWNER
    return signed_by(OWNER, signature, action, timestamp, query, query_types={})


def test_the_team_is_managed_with_the_owners_signature_even_beside_an_api_key() -> None:
    sent: list[httpx.Request] = []
    answers = [
        (200, {"items": [MEMBER_ROW]}),
        (201, MEMBER_ROW),
        (200, {"removed": True, "address": MEMBER}),
    ]
    with client_answering(answers, sent) as client:
        listed = client.members.list()
        added = client.members.add(MEMBER, "operator")
        removed = client.members.remove(MEMBER)

    assert [(r.method, r.url.path, dict(r.url.params)) for r in sent] == [
        ("GET", "/integration/members", {"ownerAddress": OWNER}),
        ("POST", "/integration/members", {}),
        ("DELETE", "/integration/members", {"ownerAddress": OWNER, "address": MEMBER}),
    ]
    assert body_of(sent[1]) == {"ownerAddress": OWNER, "address": MEMBER, "role": "operator"}
    actions = ["member.list", "member.add", "member.remove"]
    assert all(signed_by_owner(r, a) for r, a in zip(sent, actions, strict=True))
    assert [m.address for m in listed] == [MEMBER]
    assert (added.role, added.updated_at, removed.removed) == ("operator", 6, True)


def test_mailed_events_are_read_and_chosen_with_the_api_key() -> None:
    sent: list[httpx.Request] = []
    with client_answering([(200, MAIL), (200, MAIL)], sent) as client:
        read = client.settings.notifications()
        chosen = client.settings.update_notifications(
            "shop@example.org", ["invoice.paid"], language="de", receipts=True
        )

    assert [(r.method, r.url.path, dict(r.url.params)) for r in sent] == [
        ("GET", "/integration/settings/notifications", {"ownerAddress": OWNER}),
        ("PUT", "/integration/settings/notifications", {}),
    ]
    assert body_of(sent[1]) == {"ownerAddress": OWNER, **MAIL}
    assert [r.headers["x-service-api-key"] for r in sent] == [API_KEY, API_KEY]
    assert read == chosen
    assert (read.email, read.events, read.receipts) == ("shop@example.org", ["invoice.paid"], True)


def test_the_payments_report_is_the_csv_text_or_a_json_page() -> None:
    sent: list[httpx.Request] = []
    page = {"items": [LINE], "nextCursor": "c2"}
    with client_answering([(200, CSV), (200, page)], sent) as client:
        text = client.reports.payments(*DAY, currency="EUR")
        report = client.reports.payments(*DAY, format="json", limit=1, cursor="c1")

    assert [dict(r.url.params) for r in sent] == [
        {"ownerAddress": OWNER, "dateFrom": str(DAY[0]), "dateTo": str(DAY[1])}
        | {"currency": "EUR", "format": "csv"},
        {"ownerAddress": OWNER, "dateFrom": str(DAY[0]), "dateTo": str(DAY[1])}
        | {"format": "json", "limit": "1", "cursor": "c1"},
    ]
    assert {r.url.path for r in sent} == {"/integration/reports/payments"}
    assert text == CSV
    assert isinstance(report, PaymentReport)
    assert (report.next_cursor, report.items[0].from_, report.items[0].fee) == ("c2", MEMBER, "")


def test_a_payers_receipt_request_is_sent_without_the_owner_or_a_credential() -> None:
    sent: list[httpx.Request] = []
    with client_answering([(200, {"email": "payer@example.org"})], sent) as client:
        asked = client.public.ask_receipt(PAYMENT_ADDRESS, "payer@example.org", lang="es")

    assert (sent[0].method, sent[0].url.path, dict(sent[0].url.params)) == (
        "POST",
        f"/pay/{PAYMENT_ADDRESS}/receipt",
        {"lang": "es"},
    )
    assert body_of(sent[0]) == {"email": "payer@example.org"}  # the service refuses any other
    assert not {"x-service-api-key", "x-service-signature"} & set(sent[0].headers)
    assert asked.email == "payer@example.org"


JS_CALLS = """
const {{ Client }} = await import('./clients/js/src/index.js');
const answers = {answers};
const sent = [];
const proofs = [];
const fetch = async (url, init) => {{
  const sentBody = init.body ? JSON.parse(init.body) : null;
  sent.push({{ method: init.method, url: String(url), body: sentBody,
    apiKey: init.headers['x-service-api-key'] ?? null,
    signed: 'x-service-signature' in init.headers }});
  proofs.push([init.headers['x-service-signature'] ?? null,
    Number(init.headers['x-service-timestamp'] ?? 0)]);
  const [status, body] = answers.shift();
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return new Response(text, {{ status }});
}};
const client = new Client({{ baseUrl: 'http://svc.test', privateKey: '{key}', apiKey: '{api_key}',
  fetch }});
const got = [];
{calls}
console.log(JSON.stringify({{ sent, proofs, got }}));
"""


def js_request(method: str, path: str, body: Any, credential: dict[str, Any]) -> dict[str, Any]:
    """A request as the JS test's fetch records it."""
    return {"method": method, "url": "http://svc.test" + path, "body": body, **credential}


def test_the_js_sdk_sends_the_same_calls() -> None:
    answers = [
        (200, {"items": [MEMBER_ROW]}),
        (201, MEMBER_ROW),
        (200, {"removed": True, "address": MEMBER}),
        (200, MAIL),
        (200, MAIL),
        (200, CSV),
        (200, {"items": [LINE], "nextCursor": None}),
        (200, {"email": "payer@example.org"}),
    ]
    calls = f"""
        got.push(await client.members.list());
        got.push(await client.members.add('{MEMBER}', 'operator'));
        got.push(await client.members.remove('{MEMBER}'));
        got.push(await client.settings.notifications());
        got.push(await client.settings.updateNotifications({{ email: 'shop@example.org',
          events: ['invoice.paid'], language: 'de', receipts: true }}));
        got.push(await client.reports.payments({{ dateFrom: {DAY[0]}, dateTo: {DAY[1]},
          currency: 'EUR' }}));
        got.push(await client.reports.payments({{ dateFrom: {DAY[0]}, dateTo: {DAY[1]},
          format: 'json', limit: 1, cursor: 'c1' }}));
        got.push(await client.public.askReceipt('{PAYMENT_ADDRESS}', 'payer@example.org',
          {{ lang: 'es' }}));
    """
    script = JS_CALLS.format(answers=json.dumps(answers), key=KEY, api_key=API_KEY, calls=calls)
    result = node_json(script)
    report = f"/integration/reports/payments?ownerAddress={OWNER}&dateFrom={DAY[0]}"
    report += f"&dateTo={DAY[1]}"
    signed = {"apiKey": None, "signed": True}
    keyed = {"apiKey": API_KEY, "signed": False}
    public = {"apiKey": None, "signed": False}

    assert result["sent"] == [
        js_request("GET", f"/integration/members?ownerAddress={OWNER}", None, signed),
        js_request(
            "POST",
            "/integration/members",
            {"ownerAddress": OWNER, "address": MEMBER, "role": "operator"},
            signed,
        ),
        js_request(
            "DELETE", f"/integration/members?ownerAddress={OWNER}&address={MEMBER}", None, signed
        ),
        js_request("GET", f"/integration/settings/notifications?ownerAddress={OWNER}", None, keyed),
        js_request(
            "PUT", "/integration/settings/notifications", {"ownerAddress": OWNER, **MAIL}, keyed
        ),
        js_request("GET", report + "&currency=EUR&format=csv", None, keyed),
        js_request("GET", report + "&format=json&limit=1&cursor=c1", None, keyed),
        js_request(
            "POST",
            f"/pay/{PAYMENT_ADDRESS}/receipt?lang=es",
            {"email": "payer@example.org"},
            public,
        ),
    ]
    # The team's three calls carry the owner's signature of what they send.
    team = [("member.list", {}), ("member.add", {"address": MEMBER, "role": "operator"})]
    team += [("member.remove", {"address": MEMBER})]
    for (action, payload), (signature, timestamp) in zip(team, result["proofs"][:3], strict=True):
        assert signed_by(OWNER, signature, action, timestamp, payload, query_types={})
    got = result["got"]
    assert got[0] == [MEMBER_ROW]
    assert got[2] == {"removed": True, "address": MEMBER}
    assert got[4] == MAIL
    assert got[5] == CSV
    assert got[6] == {"items": [LINE], "nextCursor": None}
    assert got[7] == {"email": "payer@example.org"}
