"""The Python SDK against a real ``invoicing dev``, in both authentication modes: invoices
created, paid on anvil, looked up, listed page by page, deleted; webhooks verified as
delivered; fees relayed; API keys issued and revoked; every refusal its own exception."""

from __future__ import annotations

import time
from decimal import Decimal

import httpx
import pytest
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing_client import AsyncClient, Client, webhooks
from invoicing_client import errors as e
from invoicing_client.webhooks import WebhookVerificationError
from tests.clients.conftest import DevService, RawReceiver, mined, pay

PAYER = Account.from_key(DEV_PRIVATE_KEYS[6]).address
WEI = 10**18


def new_owner() -> LocalAccount:
    owner: LocalAccount = Account.create()
    return owner


def signing_client(dev: DevService, owner: LocalAccount, **options: object) -> Client:
    return Client(dev.base_url, owner.address, private_key=owner.key.to_0x_hex(), **options)  # type: ignore[arg-type]


def key_client(dev: DevService, owner: LocalAccount) -> Client:
    """An API-key client for a fresh owner, its key issued through signature mode."""
    with signing_client(dev, owner) as signer:
        issued = signer.api_keys.create(label="shop")
    return Client(dev.base_url, owner.address, api_key=issued.api_key)


def wait_status(client: Client, payment_address: str, wanted: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while client.invoices.status(payment_address).status != wanted:
        assert time.monotonic() < deadline, f"invoice not {wanted} in time"
        time.sleep(0.2)


def test_the_dev_commands_own_key_creates_an_invoice(dev_service: DevService) -> None:
    # The README's first request: the ready line's owner and api_key, nothing else.
    with Client(dev_service.base_url, dev_service.owner, api_key=dev_service.api_key) as client:
        invoice = client.invoices.create(dev_service.chain_id, "0.5", invoice_id="first-curl")

    assert invoice.created is True and invoice.request_signature is None
    assert (invoice.owner_address, invoice.invoice_id) == (dev_service.owner, "first-curl")
    assert invoice.required_raw == 5 * 10**17 and invoice.amount == "0.5"
    assert invoice.url == f"{dev_service.base_url}/pay/{invoice.payment_address}"


def test_api_key_mode_invoice_paid_and_webhook_verified(
    dev_service: DevService, raw_receiver: RawReceiver
) -> None:
    owner = new_owner()
    with key_client(dev_service, owner) as client:
        invoice = client.invoices.create(
            dev_service.chain_id,
            Decimal("0.25"),
            invoice_id="order-1",
            webhook_url=raw_receiver.url("/paid"),
            description="one mug",
            metadata={"cart": [1, 2]},
        )
        assert (invoice.status, invoice.paid, invoice.balance_raw) == ("pending", False, 0)
        pay(dev_service, PAYER, invoice.payment_address, WEI // 4)
        paid = client.invoices.status(invoice.payment_address)
        (delivery,) = raw_receiver.wait_for("/paid")
        api_key = client._transport._api_key

    assert (paid.status, paid.paid, paid.balance_raw, paid.meta_balance) == (
        "paid",
        True,
        WEI // 4,
        "0.25",
    )
    assert paid.paid_at is not None and paid.description == "one mug"
    assert paid.metadata == {"cart": [1, 2]}
    assert api_key is not None
    event = webhooks.verify(delivery.headers, delivery.body, api_key=api_key)
    assert isinstance(event, webhooks.WebhookEvent)
    assert (event.invoice_id, event.payment_address, event.status) == (
        "order-1",
        invoice.payment_address,
        "paid",
    )
    assert (
        event.required_raw == WEI // 4 and event.event_id == delivery.headers["x-service-event-id"]
    )
    # Another key, or the right key on a changed body's owner, is refused.
    with pytest.raises(WebhookVerificationError):
        webhooks.verify(delivery.headers, delivery.body, api_key="sk_" + "x" * 43)
    with pytest.raises(WebhookVerificationError):
        webhooks.verify(
            delivery.headers, delivery.body, api_key=api_key, owner_address=new_owner().address
        )


async def test_signature_mode_async_invoice_paid_and_webhook_verified(
    dev_service: DevService, raw_receiver: RawReceiver
) -> None:
    owner = new_owner()
    async with AsyncClient(
        dev_service.base_url, owner.address, private_key=owner.key.to_0x_hex()
    ) as client:
        invoice = await client.invoices.create(
            dev_service.chain_id, "1.5", invoice_id="123", webhook_url=raw_receiver.url("/sig")
        )
        again = await client.invoices.create(
            dev_service.chain_id, "1.5", invoice_id="123", webhook_url=raw_receiver.url("/sig")
        )
        pay(dev_service, PAYER, invoice.payment_address, 3 * WEI // 2)
        paid = await client.invoices.status(invoice.payment_address)
        listed = [i async for i in client.invoices.list(invoice_id="123")]

    (delivery,) = raw_receiver.wait_for("/sig")
    # The identical retry is the same invoice, not a second one.
    assert (again.created, again.id, again.request_signature) == (False, invoice.id, None)
    assert invoice.request_signature is not None
    assert (paid.status, paid.balance_raw) == ("paid", 3 * WEI // 2)
    assert [i.id for i in listed] == [invoice.id]
    assert delivery.headers["x-service-signature"] == invoice.request_signature
    event = webhooks.verify(
        delivery.headers,
        delivery.body,
        owner_address=owner.address,
        request_signature=invoice.request_signature,
    )
    assert isinstance(event, webhooks.WebhookEvent) and event.invoice_id == "123"
    with pytest.raises(WebhookVerificationError, match="x-service-signature does not match"):
        webhooks.verify(
            delivery.headers,
            delivery.body,
            owner_address=owner.address,
            request_signature="0x" + "ab" * 65,
        )
    with pytest.raises(WebhookVerificationError, match="another ownerAddress"):
        webhooks.verify(
            delivery.headers,
            delivery.body,
            owner_address=new_owner().address,
            request_signature=invoice.request_signature,
        )


@pytest.mark.parametrize("mode", ["api_key", "signature"])
def test_list_pages_by_itself_and_delete(dev_service: DevService, mode: str) -> None:
    owner = new_owner()
    client = (
        key_client(dev_service, owner) if mode == "api_key" else signing_client(dev_service, owner)
    )
    with client:
        ids = [
            client.invoices.create(dev_service.chain_id, "1", invoice_id=f"o-{n}").invoice_id
            for n in range(5)
        ]
        everything = [invoice.invoice_id for invoice in client.invoices.list(page_size=2)]
        first_page = client.invoices.page(page=1, limit=2)
        deleted = client.invoices.delete(dev_service.chain_id, "o-3")
        after = [invoice.invoice_id for invoice in client.invoices.list(page_size=2)]
        cancelled = [i.invoice_id for i in client.invoices.list(status="cancelled", paid=False)]
        chain_only = list(client.invoices.list(chain_id=dev_service.chain_id + 1))

    assert everything == list(reversed(ids))  # newest first, each once, over three pages
    assert (first_page.total, first_page.page, first_page.limit) == (5, 1, 2)
    assert (deleted.deleted, deleted.invoice_id, deleted.chain_id) == (
        True,
        "o-3",
        dev_service.chain_id,
    )
    assert after == ["o-4", "o-2", "o-1", "o-0"]
    assert cancelled == ["o-3"]
    assert chain_only == []


def test_refusals_raise_their_own_exception_and_change_nothing(dev_service: DevService) -> None:
    owner, other = new_owner(), new_owner()
    with key_client(dev_service, owner) as client, key_client(dev_service, other) as others:
        client.invoices.create(dev_service.chain_id, "2", invoice_id="taken")
        with pytest.raises(e.InvoiceExists) as exists:
            client.invoices.create(dev_service.chain_id, "3", invoice_id="taken")
        with pytest.raises(e.UnsupportedChain) as chain:
            client.invoices.create(999_999, "1", invoice_id="elsewhere")
        with pytest.raises(e.UnsupportedToken):
            client.invoices.create(dev_service.chain_id, "1", token_address=other.address)
        with pytest.raises(e.InvalidRequest) as amount:
            client.invoices.create(dev_service.chain_id, "1e3", invoice_id="exp")
        with pytest.raises(e.NotFound):
            client.invoices.status(
                others.invoices.create(dev_service.chain_id, "1").payment_address
            )
        with pytest.raises(TypeError, match="a float is inexact"):
            client.invoices.create(dev_service.chain_id, 1.5)  # type: ignore[arg-type]
        # An int is raw units in this SDK; amount is in token units (docs/integration/sdks.md).
        with pytest.raises(TypeError, match="an int would be read as raw units"):
            client.invoices.create(dev_service.chain_id, 10**16)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="unknown list filters: colour"):
            list(client.invoices.list(colour="red"))
        stolen = Client(dev_service.base_url, other.address, api_key=client._transport._api_key)
        with stolen, pytest.raises(e.Forbidden) as forbidden:
            stolen.invoices.create(dev_service.chain_id, "1", invoice_id="stolen")
        bad_key = Client(dev_service.base_url, owner.address, api_key="sk_not-a-key")
        with bad_key, pytest.raises(e.Unauthorized) as unauthorized:
            list(bad_key.invoices.list())
        mine = [invoice.invoice_id for invoice in client.invoices.list()]
        theirs = [invoice.invoice_id for invoice in others.invoices.list()]

    assert (exists.value.status, exists.value.code) == (409, "invoice_exists")
    assert (chain.value.status, chain.value.code) == (400, "unsupported_chain")
    assert amount.value.code == "invalid_request" and amount.value.details
    assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")
    assert type(unauthorized.value) is e.Unauthorized and unauthorized.value.status == 401
    # Nothing refused was stored: the first invoice, unchanged; the other owner's own one.
    assert mine == ["taken"]
    assert theirs == ["1"]


def test_api_keys_issued_listed_and_revoked_in_signature_mode(dev_service: DevService) -> None:
    owner = new_owner()
    with signing_client(dev_service, owner) as client:
        issued = client.api_keys.create(label="pos")
        keyed = Client(dev_service.base_url, owner.address, api_key=issued.api_key)
        with keyed:
            keyed.invoices.create(dev_service.chain_id, "1", invoice_id="with-key")
            with pytest.raises(e.Unauthorized, match="request signature"):
                keyed.api_keys.create(label="by key")
            listed = client.api_keys.list()
            revoked = client.api_keys.revoke(issued.id)
            time.sleep(1.1)  # each API process caches an active key for up to 1 s
            with pytest.raises(e.Unauthorized):
                keyed.invoices.create(dev_service.chain_id, "1", invoice_id="after-revoke")
        invoices = [invoice.invoice_id for invoice in client.invoices.list()]

    assert issued.api_key.startswith("sk_") and issued.label == "pos"
    assert [(k.id, k.label, k.revoked_at) for k in listed] == [(issued.id, "pos", None)]
    assert (revoked.revoked, revoked.id) == (True, issued.id)
    assert invoices == ["with-key"]


def test_fees_set_and_payout_relayed_with_nonce_retry(dev_service: DevService) -> None:
    owner, payout = new_owner(), new_owner().address
    # Another submission lands between the client's nonce read and its own submission: the
    # service answers nonce_mismatch, the client reads the nonce again and succeeds.
    racer = {"armed": True}

    def race(request: httpx.Request) -> None:
        if racer["armed"] and request.url.path == "/integration/fees/set-meta":
            racer["armed"] = False
            with signing_client(dev_service, owner) as other:
                other.fees.set_fee(dev_service.chain_id, 100)

    http = httpx.Client(timeout=30, event_hooks={"request": [race]})
    with signing_client(dev_service, owner, http=http) as client:
        before = client.fees.get(dev_service.chain_id)
        submitted = client.fees.set_fee(dev_service.chain_id, 250)
        receipt = mined(dev_service, submitted.tx_hash)
        middle = client.fees.get(dev_service.chain_id)
        payout_sent = client.fees.set_payout(dev_service.chain_id, payout)
        mined(dev_service, payout_sent.tx_hash)
        after = client.fees.get(dev_service.chain_id)
        with pytest.raises(e.FeeTooHigh):
            client.fees.set_fee(dev_service.chain_id, 501)
        unchanged = client.fees.get(dev_service.chain_id)

    assert (before.fee_bps, before.payout_address, before.nonce) == (0, None, 0)
    assert before.factory == dev_service.factory
    # The racer's SetFee took nonce 0; the client's went out with nonce 1, once.
    assert (submitted.nonce, submitted.status, submitted.owner_address) == (
        1,
        "submitted",
        owner.address,
    )
    assert receipt["status"] == "0x1"
    assert (middle.fee_bps, middle.nonce) == (250, 2)
    assert payout_sent.nonce == 2
    assert (after.fee_bps, after.payout_address, after.nonce) == (250, payout, 3)
    assert (unchanged.fee_bps, unchanged.nonce) == (250, 3)


def test_fees_in_api_key_mode_sign_with_the_given_signer(dev_service: DevService) -> None:
    owner = new_owner()
    with key_client(dev_service, owner) as client:
        with pytest.raises(ValueError, match="give signer="):
            client.fees.set_fee(dev_service.chain_id, 10)
        with pytest.raises(ValueError, match="not the owner_address wallet"):
            client.fees.set_fee(dev_service.chain_id, 10, signer=new_owner())
        sent = client.fees.set_fee(dev_service.chain_id, 10, signer=owner)
        settings = client.fees.get(dev_service.chain_id)

    assert sent.nonce == 0
    assert (settings.fee_bps, settings.nonce) == (10, 1)


async def test_async_client_keys_fees_and_delete(dev_service: DevService) -> None:
    owner, payout = new_owner(), new_owner().address
    async with AsyncClient(
        dev_service.base_url, owner.address, private_key=owner.key.to_0x_hex()
    ) as client:
        issued = await client.api_keys.create()
        listed = await client.api_keys.list()
        revoked = await client.api_keys.revoke(issued.id)
        sent = await client.fees.set_payout(dev_service.chain_id, payout)
        settings = await client.fees.get(dev_service.chain_id)
        await client.invoices.create(dev_service.chain_id, "3", invoice_id="gone")
        deleted = await client.invoices.delete(dev_service.chain_id, "gone")
        first = await client.invoices.page(status="cancelled")
        with pytest.raises(e.NotFound):
            await client.invoices.delete(dev_service.chain_id, "never-made")

    assert [key.id for key in listed] == [issued.id] and issued.label is None
    assert revoked.id == issued.id
    assert (sent.nonce, settings.payout_address, settings.nonce) == (0, payout, 1)
    assert (deleted.deleted, deleted.invoice_id) == (True, "gone")
    assert [(i.invoice_id, i.status) for i in first.items] == [("gone", "cancelled")]
    assert first.total == 1


def test_signed_webhooks_verify_with_each_active_secret(
    dev_service: DevService, raw_receiver: RawReceiver
) -> None:
    owner = new_owner()
    with key_client(dev_service, owner) as client:
        api_key = client._transport._api_key
        assert api_key is not None
        secrets = [client.webhook_secrets.create().secret for _ in range(2)]
        invoice = client.invoices.create(
            dev_service.chain_id, "0.1", invoice_id="signed", webhook_url=raw_receiver.url("/h")
        )
        pay(dev_service, PAYER, invoice.payment_address, WEI // 10)
        client.invoices.status(invoice.payment_address)
        (delivery,) = raw_receiver.wait_for("/h")

    # One v1 per active secret: either verifies alone (rotation), with the API key too.
    for secret in secrets:
        event = webhooks.verify(
            delivery.headers,
            delivery.body,
            signing_secret=secret,
            api_key=api_key,
            owner_address=owner.address,
        )
        assert isinstance(event, webhooks.WebhookEvent) and event.invoice_id == "signed"
    with pytest.raises(WebhookVerificationError, match="v1 matches"):
        webhooks.verify(delivery.headers, delivery.body, signing_secret="whsec_other")
    with pytest.raises(WebhookVerificationError, match="v1 matches"):
        webhooks.verify(delivery.headers, delivery.body + b" ", signing_secret=secrets[0])
    with pytest.raises(WebhookVerificationError, match="s old"):
        webhooks.verify(
            delivery.headers, delivery.body, signing_secret=secrets[0], now_s=time.time() + 301
        )
