"""``Client`` (blocking) and ``AsyncClient``: the same operations, sent with httpx."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from decimal import Decimal
from typing import Any, TypeVar

import httpx
from eth_account import Account
from eth_account.signers.local import LocalAccount

from invoicing_client import _calls as calls
from invoicing_client._transport import Call, Prepared, Reply, Transport
from invoicing_client.errors import ApiError, NonceMismatch, ServiceUnreachable
from invoicing_client.models import (
    ApiKey,
    CreatedInvoice,
    DeletedInvoice,
    FeeSettings,
    FeeSubmission,
    Invoice,
    IssuedApiKey,
    RevokedApiKey,
)
from invoicing_client.signing import sign_typed_data

T = TypeVar("T")
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


def _http_request(prepared: Prepared) -> dict[str, Any]:
    return {
        "method": prepared.method,
        "url": prepared.url,
        "params": prepared.params,
        "content": prepared.content,
        "headers": prepared.headers,
    }


class Client:
    """A blocking client for one owner wallet.

    ``Client(base_url, owner_address, api_key=...)`` or, signing every request with the
    owner's wallet (EIP-191), ``Client(base_url, owner_address, private_key=...)``. Both may
    be given: the API key is sent, and the key signs API-key management and fee messages.
    Idempotent calls are retried ``max_retries`` times after a lost connection or a 5xx,
    with jittered exponential backoff from ``backoff_s``."""

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
        http: httpx.Client | None = None,
    ) -> None:
        self.owner_address = owner_address
        self._transport = Transport(
            base_url, owner_address, api_key, private_key, max_retries, backoff_s
        )
        self._http = http or httpx.Client(timeout=timeout_s)
        self.invoices = Invoices(self)
        self.fees = Fees(self)
        self.api_keys = ApiKeys(self)

    def __repr__(self) -> str:
        return f"Client({self._transport!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call, read: Callable[[Reply], T]) -> T:
        attempt = 1
        while True:
            prepared = self._transport.prepare(call)
            try:
                response = self._http.request(**_http_request(prepared))
                return read(self._transport.reply(response, prepared))
            except (httpx.TransportError, ApiError) as exc:
                delay = self._transport.retry_delay(call, attempt, exc)
                if delay is None:
                    if isinstance(exc, httpx.TransportError):
                        raise ServiceUnreachable(f"{call.method} {call.path}: {exc!r}") from exc
                    raise
            time.sleep(delay)
            attempt += 1


class Invoices:
    def __init__(self, client: Client) -> None:
        self._client = client

    def create(
        self,
        chain_id: int,
        amount: str | int | Decimal,
        token_address: str | None = None,
        invoice_id: str | None = None,
        webhook_url: str | None = None,
        expires_at: int | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CreatedInvoice:
        """Create an invoice (spec 4.1); with ``invoice_id`` a retry is safe and an identical
        earlier invoice comes back with ``created=False``."""
        call = calls.create_invoice(
            chain_id,
            amount,
            token_address,
            invoice_id,
            webhook_url,
            expires_at,
            description,
            metadata,
        )
        return self._client._send(call, calls.read_created)

    def status(self, payment_address: str) -> Invoice:
        """One invoice by its payment address, re-checked on-chain by the service."""
        return self._client._send(calls.invoice_status(payment_address), calls.read_status)

    def list(self, *, page_size: int = calls.MAX_PAGE_SIZE, **filters: Any) -> Iterator[Invoice]:
        """Every invoice matching ``filters`` (chain_id, status, paid, token_address,
        invoice_id, date_from, date_to), newest first, fetching pages as it goes."""
        query = calls.list_query(filters)
        seen: set[str] = set()
        page = 1
        while True:
            result = self._client._send(calls.list_page(query, page, page_size), calls.read_page)
            for invoice in result.items:
                # An invoice created while paging shifts the pages by one: never twice.
                if invoice.id not in seen:
                    seen.add(invoice.id)
                    yield invoice
            if result.is_last:
                return
            page += 1

    def page(self, page: int = 1, limit: int = 20, **filters: Any) -> calls.InvoicePage:
        """One page of the list (spec 4.3), with its ``total``."""
        call = calls.list_page(calls.list_query(filters), page, limit)
        return self._client._send(call, calls.read_page)

    def delete(self, chain_id: int, invoice_id: str) -> DeletedInvoice:
        """Soft-delete an invoice (spec 4.4): a pending one is cancelled."""
        return self._client._send(calls.delete_invoice(chain_id, invoice_id), calls.read_deleted)


class Fees:
    def __init__(self, client: Client) -> None:
        self._client = client

    def get(self, chain_id: int) -> FeeSettings:
        """The owner's fee, payout address and next nonce, read from the chain."""
        return self._client._send(calls.get_fees(chain_id), calls.read_fees)

    def set_fee(
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
        sign = _typed_signer(signer, self._client._transport, self._client.owner_address)
        build = functools.partial(
            calls.signed_fee,
            sign,
            self._client.owner_address,
            chain_id,
            fee_bps,
            deadline=deadline,
            factory=factory,
        )

        return self._submit(chain_id, build)

    def set_payout(
        self,
        chain_id: int,
        payout_address: str,
        *,
        signer: Signer | None = None,
        deadline: int | None = None,
        factory: str | None = None,
    ) -> FeeSubmission:
        """Sign SetPayout (EIP-712) with the owner's key and have the service relay it."""
        sign = _typed_signer(signer, self._client._transport, self._client.owner_address)
        build = functools.partial(
            calls.signed_payout,
            sign,
            self._client.owner_address,
            chain_id,
            payout_address,
            deadline=deadline,
            factory=factory,
        )

        return self._submit(chain_id, build)

    def _submit(self, chain_id: int, build: Callable[[FeeSettings], Call]) -> FeeSubmission:
        """Read the nonce, sign, submit; after a nonce_mismatch read it again, once."""
        try:
            return self._client._send(build(self.get(chain_id)), calls.read_submission)
        except NonceMismatch:
            return self._client._send(build(self.get(chain_id)), calls.read_submission)


class ApiKeys:
    """API keys of the owner; managed in signature mode (the client needs private_key)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create(self, label: str | None = None) -> IssuedApiKey:
        return self._client._send(calls.create_api_key(label), calls.read_issued_key)

    def list(self) -> list[ApiKey]:
        return self._client._send(calls.list_api_keys(), calls.read_api_keys)

    def revoke(self, key_id: str) -> RevokedApiKey:
        return self._client._send(calls.revoke_api_key(key_id), calls.read_revoked_key)


class AsyncClient:
    """The same as ``Client`` for asyncio code; every operation is awaited and ``list``
    is an async iterator."""

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
        self.api_keys = AsyncApiKeys(self)

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
                response = await self._http.request(**_http_request(prepared))
                return read(self._transport.reply(response, prepared))
            except (httpx.TransportError, ApiError) as exc:
                delay = self._transport.retry_delay(call, attempt, exc)
                if delay is None:
                    if isinstance(exc, httpx.TransportError):
                        raise ServiceUnreachable(f"{call.method} {call.path}: {exc!r}") from exc
                    raise
            await asyncio.sleep(delay)
            attempt += 1


class AsyncInvoices:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(
        self,
        chain_id: int,
        amount: str | int | Decimal,
        token_address: str | None = None,
        invoice_id: str | None = None,
        webhook_url: str | None = None,
        expires_at: int | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CreatedInvoice:
        call = calls.create_invoice(
            chain_id,
            amount,
            token_address,
            invoice_id,
            webhook_url,
            expires_at,
            description,
            metadata,
        )
        return await self._client._send(call, calls.read_created)

    async def status(self, payment_address: str) -> Invoice:
        return await self._client._send(calls.invoice_status(payment_address), calls.read_status)

    async def list(
        self, *, page_size: int = calls.MAX_PAGE_SIZE, **filters: Any
    ) -> AsyncIterator[Invoice]:
        query = calls.list_query(filters)
        seen: set[str] = set()
        page = 1
        while True:
            call = calls.list_page(query, page, page_size)
            result = await self._client._send(call, calls.read_page)
            for invoice in result.items:
                if invoice.id not in seen:
                    seen.add(invoice.id)
                    yield invoice
            if result.is_last:
                return
            page += 1

    async def page(self, page: int = 1, limit: int = 20, **filters: Any) -> calls.InvoicePage:
        call = calls.list_page(calls.list_query(filters), page, limit)
        return await self._client._send(call, calls.read_page)

    async def delete(self, chain_id: int, invoice_id: str) -> DeletedInvoice:
        call = calls.delete_invoice(chain_id, invoice_id)
        return await self._client._send(call, calls.read_deleted)


class AsyncFees:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, chain_id: int) -> FeeSettings:
        return await self._client._send(calls.get_fees(chain_id), calls.read_fees)

    async def set_fee(
        self,
        chain_id: int,
        fee_bps: int,
        *,
        signer: Signer | None = None,
        deadline: int | None = None,
        factory: str | None = None,
    ) -> FeeSubmission:
        sign = _typed_signer(signer, self._client._transport, self._client.owner_address)
        build = functools.partial(
            calls.signed_fee,
            sign,
            self._client.owner_address,
            chain_id,
            fee_bps,
            deadline=deadline,
            factory=factory,
        )

        return await self._submit(chain_id, build)

    async def set_payout(
        self,
        chain_id: int,
        payout_address: str,
        *,
        signer: Signer | None = None,
        deadline: int | None = None,
        factory: str | None = None,
    ) -> FeeSubmission:
        sign = _typed_signer(signer, self._client._transport, self._client.owner_address)
        build = functools.partial(
            calls.signed_payout,
            sign,
            self._client.owner_address,
            chain_id,
            payout_address,
            deadline=deadline,
            factory=factory,
        )

        return await self._submit(chain_id, build)

    async def _submit(self, chain_id: int, build: Callable[[FeeSettings], Call]) -> FeeSubmission:
        try:
            return await self._client._send(build(await self.get(chain_id)), calls.read_submission)
        except NonceMismatch:
            return await self._client._send(build(await self.get(chain_id)), calls.read_submission)


class AsyncApiKeys:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create(self, label: str | None = None) -> IssuedApiKey:
        return await self._client._send(calls.create_api_key(label), calls.read_issued_key)

    async def list(self) -> list[ApiKey]:
        return await self._client._send(calls.list_api_keys(), calls.read_api_keys)

    async def revoke(self, key_id: str) -> RevokedApiKey:
        return await self._client._send(calls.revoke_api_key(key_id), calls.read_revoked_key)
