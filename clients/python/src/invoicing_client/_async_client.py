"""The client of one owner wallet: every route of the service, sent with httpx.

Written once, for asyncio, in ``_async_client.py`` and ``_async_resources.py``;
``clients/python/generate_sync.py`` writes the blocking ``_sync_*.py`` modules from them, and
a test fails when they differ. Each method builds its ``Call`` in ``_calls.py`` from its row
of ``ROUTES`` (``_generated/routes.py``, generated from openapi.json)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from decimal import Decimal
from typing import Any, TypeVar

import httpx
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing_client import _calls as calls
from invoicing_client._async_account import AsyncMembers, AsyncReports, AsyncSettings
from invoicing_client._async_resources import (
    AsyncApiKeys,
    AsyncEscrows,
    AsyncEvents,
    AsyncFacilitator,
    AsyncGasless,
    AsyncPublic,
    AsyncWebhookEndpoints,
    AsyncWebhookSecrets,
)
from invoicing_client._async_subscriptions import AsyncSubscriptions
from invoicing_client._transport import Call, Reply, Transport
from invoicing_client.errors import ApiError, NonceMismatch, ServiceUnreachable
from invoicing_client.models import (
    Captured,
    CreatedInvoice,
    DeletedInvoice,
    FeeSettings,
    FeeSubmission,
    Invoice,
    RefundSubmission,
    ServiceRefundSubmission,
    WebhookLog,
)
from invoicing_client.signing import sign_typed_data

T = TypeVar("T")
S = TypeVar("S", FeeSubmission, RefundSubmission)
Signer = str | LocalAccount
DEFAULT_TIMEOUT_S = 30.0


def _typed_signer(
    signer: Signer | None, transport: Transport, owner_address: str
) -> Callable[[dict[str, Any]], str]:
    """What signs the owner's EIP-712 messages: ``signer``, else the client's private_key."""
    if signer is None:
        if transport.signer is None:
            raise ValueError("give signer= (the owner's private key) in API-key mode")
        return transport.signer.sign_typed_data
    key = signer if isinstance(signer, str) else "0x" + bytes(signer.key).hex()
    if Account.from_key(key).address.lower() != owner_address.lower():
        raise ValueError("signer is not the owner_address wallet")
    return functools.partial(sign_typed_data, key)


class AsyncClient:
    """A client for one owner wallet.

    ``AsyncClient(base_url, owner_address, api_key=...)`` or, signing every request with the
    owner's wallet (EIP-191), ``AsyncClient(base_url, owner_address, private_key=...)``. Both
    may be given: the API key is sent, and the key signs API-key management and the owner's
    EIP-712 messages. Idempotent calls are retried ``max_retries`` times after a lost
    connection or a 5xx, with jittered exponential backoff from ``backoff_s``."""

    def __init__(
        self,
        base_url: str,
        owner_address: str,
        *,
        api_key: str | None = None,
        private_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 3,
        backoff_s: float = 0.25,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.owner_address = owner_address
        self._transport = Transport(
            base_url, owner_address, api_key, private_key, max_retries, backoff_s
        )
        self._http = http or httpx.AsyncClient(timeout=timeout_s)
        self.invoices = AsyncInvoices(self)
        self.fees = AsyncFees(self)
        self.api_keys = AsyncApiKeys(self._send)
        self.webhook_secrets = AsyncWebhookSecrets(self._send)
        self.webhook_endpoints = AsyncWebhookEndpoints(self._send)
        self.events = AsyncEvents(self._send)
        self.escrows = AsyncEscrows(self._send)
        self.settings = AsyncSettings(self._send)
        self.members = AsyncMembers(self._send)
        self.reports = AsyncReports(self._send)
        self.subscriptions = AsyncSubscriptions(self._send)
        self.gasless = AsyncGasless(self._send)
        self.facilitator = AsyncFacilitator(self._send)
        self.public = AsyncPublic(self._send)

    def __repr__(self) -> str:
        return f"AsyncClient({self._transport!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call, read: Callable[[Reply], T]) -> T:
        attempt = 1
        while True:
            prepared = self._transport.prepare(call)
            try:
                response = await self._http.request(
                    prepared.method,
                    prepared.url,
                    params=prepared.params,
                    content=prepared.content,
                    headers=prepared.headers,
                )
                return read(self._transport.reply(call, response, prepared))
            except (httpx.TransportError, ApiError) as exc:
                delay = self._transport.retry_delay(call, attempt, exc)
                if delay is None:
                    if isinstance(exc, httpx.TransportError):
                        raise ServiceUnreachable(f"{call.method} {call.path}: {exc!r}") from exc
                    raise
            await asyncio.sleep(delay)
            attempt += 1

    async def _relay(
        self,
        chain_id: int,
        build: Callable[[FeeSettings], Call],
        read: Callable[[Reply], S],
        payment_address: str | None = None,
    ) -> S:
        """Read the owner's nonce (at the factory of ``payment_address``'s escrow, if given),
        sign, submit; after a nonce_mismatch read it again, once."""
        try:
            return await self._send(build(await self.fees.get(chain_id, payment_address)), read)
        except NonceMismatch:
            return await self._send(build(await self.fees.get(chain_id, payment_address)), read)

    def _message(
        self,
        build: Callable[..., Call],
        *args: Any,
        signer: Signer | None,
        deadline: int | None,
        factory: str | None,
    ) -> Callable[[FeeSettings], Call]:
        """The owner's EIP-712 message ``build`` (``_calls.signed_*``) signed by ``signer``,
        once the owner's settings (the nonce) are read."""
        sign = _typed_signer(signer, self._transport, self.owner_address)
        return functools.partial(
            build, sign, self.owner_address, *args, deadline=deadline, factory=factory
        )


class AsyncInvoices:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(
        self,
        chain_id: int,
        amount: str | Decimal,
        token_address: str | None = None,
        invoice_id: str | None = None,
        webhook_url: str | None = None,
        expires_at: int | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        currency: str | None = None,
        *,
        redirect_url: str | None = None,
        cancel_url: str | None = None,
        capture: str | None = None,
    ) -> CreatedInvoice:
        """Create an invoice of ``amount`` in the token's units (a decimal string), or with
        ``currency`` (ISO 4217, ``"USD"``) a price in that currency, locked into the token
        amount by the service (``invoice.fiat``); with ``invoice_id`` a retry is safe and an
        identical earlier invoice comes back with ``created=False``. The payment page sends
        the payer to ``redirect_url`` after payment, and offers ``cancel_url`` to leave
        without paying. ``capture="manual"``: once paid the funds wait in the escrow for
        ``invoices.capture`` or ``invoices.void`` (default ``"automatic"``)."""
        call = calls.create_invoice(
            chain_id,
            amount,
            token_address,
            invoice_id,
            webhook_url,
            expires_at,
            description,
            metadata,
            currency,
            redirect_url,
            cancel_url,
            capture,
        )
        return await self._client._send(call, calls.read_created)

    async def status(self, payment_address: str) -> Invoice:
        """One invoice by its payment address, re-checked on-chain by the service."""
        call = calls.call("invoices.status", query={"paymentAddress": payment_address})
        return await self._client._send(call, calls.model(Invoice, "invoice"))

    async def page(self, page: int = 1, limit: int = 20, **filters: Any) -> calls.InvoicePage:
        """One page of the list, with its ``total``."""
        query = {**calls.list_query(filters), "page": page, "limit": limit}
        return await self._client._send(calls.call("invoices.page", query=query), calls.read_page)

    async def list(
        self, *, page_size: int = calls.MAX_PAGE_SIZE, **filters: Any
    ) -> AsyncIterator[Invoice]:
        """Every invoice matching ``filters`` (chain_id, status, paid, token_address,
        invoice_id, date_from, date_to), newest first, fetching pages as it goes."""
        seen: set[str] = set()
        page = 1
        while True:
            result = await self.page(page, page_size, **filters)
            for invoice in result.items:
                # An invoice created while paging shifts the pages by one: never twice.
                if invoice.id not in seen:
                    seen.add(invoice.id)
                    yield invoice
            if result.is_last:
                return
            page += 1

    async def delete(self, chain_id: int, invoice_id: str) -> DeletedInvoice:
        """Soft-delete an invoice: a pending one is cancelled."""
        query = {"chainId": chain_id, "invoiceId": invoice_id}
        call = calls.call("invoices.delete", query=query)
        return await self._client._send(call, calls.model(DeletedInvoice))

    async def refund(
        self,
        payment_address: str,
        to: str,
        amount_raw: int,
        *,
        token_address: str | None | calls.InvoiceToken = calls.INVOICE_TOKEN,
        signer: Signer | None = None,
        deadline: int | None = None,
        factory: str | None = None,
    ) -> RefundSubmission:
        """Sign a Refund (EIP-712) of ``amount_raw`` (raw units) from the invoice's escrow to
        ``to`` and have the service relay it. ``token_address``: the asset (default the
        invoice's own; None: the native coin); ``signer``, ``deadline`` and ``factory`` as
        for ``fees.set_fee``."""
        invoice = await self.status(payment_address)
        token = invoice.token_address if token_address is calls.INVOICE_TOKEN else token_address
        assert not isinstance(token, calls.InvoiceToken)
        order = calls.RefundOrder(invoice, to, amount_raw, token)
        build = self._client._message(
            calls.signed_refund, order, signer=signer, deadline=deadline, factory=factory
        )
        read = calls.model(RefundSubmission)
        # Signed for the factory that made the escrow (after an upgrade, maybe a previous one).
        return await self._client._relay(invoice.chain_id, build, read, invoice.payment_address)

    async def capture(self, chain_id: int, payment_address: str) -> Captured:
        """Capture a paid manual-capture invoice: its escrow is swept to the owner from now
        on. A repeated capture gets the same answer."""
        body = {"chainId": chain_id, "paymentAddress": payment_address}
        call = calls.call("invoices.capture", body=body, idempotent=True)
        return await self._client._send(call, calls.model(Captured))

    async def service_refund(
        self,
        chain_id: int,
        payment_address: str,
        *,
        amount: str | None = None,
        amount_raw: int | None = None,
    ) -> ServiceRefundSubmission:
        """Refund the payer of record of an invoice with no signature at hand: the service
        signs the Refund with its own key, which the owner named as its refund delegate.
        Exactly one of ``amount`` (a decimal string in the invoice's price: its currency when
        priced in one) and ``amount_raw``. Not idempotent: each call is a new refund."""
        body: dict[str, object] = {"chainId": chain_id, "paymentAddress": payment_address}
        if amount is not None:
            body["amount"] = amount
        if amount_raw is not None:
            body["amountRaw"] = str(amount_raw)
        call = calls.call("invoices.service_refund", body=body)
        return await self._client._send(call, calls.model(ServiceRefundSubmission))

    async def void(
        self,
        payment_address: str,
        to: str,
        *,
        signer: Signer | None = None,
        deadline: int | None = None,
        factory: str | None = None,
    ) -> RefundSubmission:
        """Void a paid manual-capture invoice: sign a Refund (EIP-712) of its whole payment
        (what the escrow holds of the invoice's token, its ``balance_raw`` as ``status``
        reads it) to ``to``, the payer, and have the service relay it. ``signer`` (the owner
        or the owner's refund delegate), ``deadline`` and ``factory`` as for ``refund``."""
        invoice = await self.status(payment_address)
        order = calls.RefundOrder(invoice, to, invoice.balance_raw, invoice.token_address, True)
        build = self._client._message(
            calls.signed_refund, order, signer=signer, deadline=deadline, factory=factory
        )
        read = calls.model(RefundSubmission)
        return await self._client._relay(invoice.chain_id, build, read, invoice.payment_address)

    async def webhooks(self, payment_address: str) -> WebhookLog:
        """The paid webhook's events and delivery attempts of one invoice."""
        call = calls.call("invoices.webhooks", query={"paymentAddress": payment_address})
        return await self._client._send(call, calls.model(WebhookLog))


class AsyncFees:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, chain_id: int, payment_address: str | None = None) -> FeeSettings:
        """The owner's fee, payout address and next nonce, read from the chain; with
        ``payment_address`` (one of the owner's escrows), those of the factory that made it."""
        query: dict[str, Any] = {"chainId": chain_id}
        if payment_address is not None:
            query["paymentAddress"] = payment_address
        call = calls.call("fees.get", query=query)
        return await self._client._send(call, calls.model(FeeSettings))

    async def set_fee(
        self,
        chain_id: int,
        fee_bps: int,
        *,
        signer: Signer | None = None,
        deadline: int | None = None,
        factory: str | None = None,
    ) -> FeeSubmission:
        """Sign SetFee (EIP-712) with the owner's key (``signer``, else the client's
        private_key) and have the service relay it. ``deadline``: unix seconds (default in
        10 minutes); ``factory``: the factory the service names, unless given."""
        build = self._client._message(
            calls.signed_fee, chain_id, fee_bps, signer=signer, deadline=deadline, factory=factory
        )
        return await self._client._relay(chain_id, build, calls.model(FeeSubmission))

    async def set_payout(
        self,
        chain_id: int,
        payout_address: str,
        *,
        signer: Signer | None = None,
        deadline: int | None = None,
        factory: str | None = None,
    ) -> FeeSubmission:
        """Sign SetPayout (EIP-712) with the owner's key and have the service relay it."""
        build = self._client._message(
            calls.signed_payout,
            chain_id,
            payout_address,
            signer=signer,
            deadline=deadline,
            factory=factory,
        )
        return await self._client._relay(chain_id, build, calls.model(FeeSubmission))

    async def set_refund_delegate(
        self,
        chain_id: int,
        delegate: str,
        *,
        signer: Signer | None = None,
        deadline: int | None = None,
        factory: str | None = None,
    ) -> FeeSubmission:
        """Sign SetRefundDelegate (EIP-712) with the owner's key and have the service relay
        it: ``delegate`` may then sign the owner's refunds and voids (the zero address
        revokes)."""
        build = self._client._message(
            calls.signed_refund_delegate,
            chain_id,
            delegate,
            signer=signer,
            deadline=deadline,
            factory=factory,
        )
        return await self._client._relay(chain_id, build, calls.model(FeeSubmission))
