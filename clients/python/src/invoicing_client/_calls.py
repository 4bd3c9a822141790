"""Every operation as a ``Call`` built from its row of ``ROUTES`` (generated from openapi.json
into ``_generated/routes.py``), and a reader of its answer: the one description of the API
that ``AsyncClient`` (and ``Client``, generated from it) send."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from invoicing_client import _typed
from invoicing_client._generated.routes import ROUTES
from invoicing_client._transport import Call, Reply
from invoicing_client.models import (
    CreatedInvoice,
    EscrowExportLine,
    FeeSettings,
    Invoice,
)

M = TypeVar("M", bound=BaseModel)

# invoices.list(**filters): the keyword, the query parameter it becomes.
LIST_FILTERS = {
    "chain_id": "chainId",
    "status": "status",
    "paid": "paid",
    "token_address": "tokenAddress",
    "invoice_id": "invoiceId",
    "date_from": "dateFrom",
    "date_to": "dateTo",
}
MAX_PAGE_SIZE = 100  # the service caps limit at 100 (invoices and events)
DEFAULT_DEADLINE_S = 600


def call(
    name: str,
    *,
    query: Mapping[str, Any] | None = None,
    body: Mapping[str, Any] | None = None,
    idempotent: bool = False,
    signed_id: str | None = None,
    path: Mapping[str, str] | None = None,
    accept: frozenset[int] = frozenset(),
    ownerless: bool = False,
) -> Call:
    """The call of the SDK method ``name`` (its route, its signed action)."""
    route = ROUTES[name]
    unknown = set(query or {}) - set(route.query)
    if unknown:
        raise TypeError(f"{name} takes no query parameter {', '.join(sorted(unknown))}")
    quoted = {key: quote(value, safe="") for key, value in (path or {}).items()}
    return Call(
        route.method,
        route.path.format(**quoted),
        route.action,
        query=dict(query or {}),
        body=None if body is None else dict(body),
        idempotent=idempotent or route.method in ("GET", "DELETE", "PUT"),
        signed_id=signed_id,
        accept=accept,
        ownerless=ownerless,
    )


def model(cls: type[M], key: str | None = None) -> Callable[[Reply], M]:
    """A reader of an answer that is one ``cls`` (under ``key``, when given)."""
    return lambda reply: cls.model_validate(reply.data if key is None else reply.data[key])


def models(cls: type[M], key: str = "items") -> Callable[[Reply], list[M]]:
    """A reader of an answer that lists ``cls`` under ``key``."""
    return lambda reply: [cls.model_validate(item) for item in reply.data[key]]


def given(**fields: Any) -> dict[str, Any]:
    """The fields that are given: omitted, never null (a null is another signed payload)."""
    return {key: value for key, value in fields.items() if value is not None}


BRAND_FIELDS = {
    "display_name": "displayName",
    "accent_color": "accentColor",
    "logo": "logo",
}


def brand_body(
    display_name: str | None, accent_color: str | None, logo: bytes | None, remove: Any
) -> dict[str, Any]:
    """The brand update: the given parts, and null for each part named in ``remove``."""
    unknown = set(remove) - set(BRAND_FIELDS)
    if unknown:
        raise TypeError(f"remove takes {', '.join(BRAND_FIELDS)}, not {', '.join(sorted(unknown))}")
    body = given(
        displayName=display_name,
        accentColor=accent_color,
        logo=None if logo is None else base64.b64encode(logo).decode("ascii"),
    )
    body.update({BRAND_FIELDS[name]: None for name in remove})
    return body


def decimal_amount(amount: str | Decimal) -> str:
    """An amount in the token's units as the service takes it: a decimal string.

    An ``int`` is refused: in this SDK integers are raw units (docs/integration/sdks.md),
    and the service takes ``amount`` in token units; a float is never exact."""
    if isinstance(amount, Decimal):
        return format(amount, "f")
    if isinstance(amount, str):
        return amount
    raise TypeError(
        "amount is in the token's units: give a decimal str or Decimal (an int would be read"
        " as raw units, a float is inexact)"
    )


def create_invoice(
    chain_id: int,
    amount: str | Decimal,
    token_address: str | None,
    invoice_id: str | None,
    webhook_url: str | None,
    expires_at: int | None,
    description: str | None,
    metadata: Mapping[str, Any] | None,
    currency: str | None = None,
    redirect_url: str | None = None,
    cancel_url: str | None = None,
    capture: str | None = None,
) -> Call:
    body = {
        "chainId": chain_id,
        "amount": decimal_amount(amount),
        **given(
            invoiceId=invoice_id,
            tokenAddress=token_address,
            webhookUrl=webhook_url,
            description=description,
            expiresAt=expires_at,
            metadata=dict(metadata) if metadata is not None else None,
            currency=currency,
            redirectUrl=redirect_url,
            cancelUrl=cancel_url,
            capture=capture,
        ),
    }
    # Idempotent by invoiceId: an identical retry gets the same invoice back (200). Without
    # one the service numbers the invoice itself, so a retry could create a second one.
    return call("invoices.create", body=body, idempotent=invoice_id is not None)


def read_created(reply: Reply) -> CreatedInvoice:
    created = reply.status == 201
    return CreatedInvoice.model_validate(
        {
            **reply.data,
            "created": created,
            "requestSignature": reply.signature if created else None,
        }
    )


def list_query(filters: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(filters) - set(LIST_FILTERS)
    if unknown:
        raise TypeError(f"unknown list filters: {', '.join(sorted(unknown))}")
    return {LIST_FILTERS[key]: value for key, value in filters.items() if value is not None}


@dataclass(frozen=True)
class InvoicePage:
    items: list[Invoice]
    total: int
    page: int
    limit: int

    @property
    def is_last(self) -> bool:
        """Everything has been read when page * limit >= total."""
        return not self.items or self.page * self.limit >= self.total


def read_page(reply: Reply) -> InvoicePage:
    data = reply.data
    items = [Invoice.model_validate(item) for item in data["items"]]
    return InvoicePage(items, data["total"], data["page"], data["limit"])


def read_export(reply: Reply) -> list[EscrowExportLine]:
    """The escrow export is NDJSON: one escrow per line."""
    lines = reply.text.splitlines()
    return [EscrowExportLine.model_validate(json.loads(line)) for line in lines if line]


def read_json(reply: Reply) -> dict[str, Any]:
    """The answer's JSON object as it came."""
    return dict(reply.data)


def read_text(reply: Reply) -> str:
    return reply.text


def deadline_s(deadline: int | None) -> int:
    return deadline if deadline is not None else int(time.time()) + DEFAULT_DEADLINE_S


def factory_of(settings: FeeSettings, factory: str | None) -> str:
    found = factory or settings.factory
    if found is None:
        raise ValueError("the service did not name its factory: give factory=")
    return found


def fee_body(chain_id: int, fields: Mapping[str, Any], nonce: int, deadline: int) -> dict[str, Any]:
    """A SetFee/SetPayout/Refund body: raw amounts, nonce and deadline as decimal strings."""
    return {
        "chainId": chain_id,
        **fields,
        "nonce": str(nonce),
        "deadline": str(deadline),
    }


def signed_fee(
    sign: Callable[[dict[str, Any]], str],
    owner: str,
    chain_id: int,
    fee_bps: int,
    settings: FeeSettings,
    *,
    deadline: int | None,
    factory: str | None,
) -> Call:
    """SetFee at the owner's current nonce (``settings``), signed, as a submission."""
    deadline_ = deadline_s(deadline)
    typed = _typed.set_fee_typed_data(
        chain_id, factory_of(settings, factory), owner, fee_bps, settings.nonce, deadline_
    )
    body = fee_body(chain_id, {"feeBps": fee_bps}, settings.nonce, deadline_)
    # The same signed message sent twice gets the transaction of the first back.
    return call("fees.set_fee", body={**body, "signature": sign(typed)}, idempotent=True)


def signed_payout(
    sign: Callable[[dict[str, Any]], str],
    owner: str,
    chain_id: int,
    payout_address: str,
    settings: FeeSettings,
    *,
    deadline: int | None,
    factory: str | None,
) -> Call:
    """SetPayout at the owner's current nonce (``settings``), signed, as a submission."""
    deadline_ = deadline_s(deadline)
    typed = _typed.set_payout_typed_data(
        chain_id, factory_of(settings, factory), owner, payout_address, settings.nonce, deadline_
    )
    body = fee_body(chain_id, {"payoutAddress": payout_address}, settings.nonce, deadline_)
    return call("fees.set_payout", body={**body, "signature": sign(typed)}, idempotent=True)


def signed_refund_delegate(
    sign: Callable[[dict[str, Any]], str],
    owner: str,
    chain_id: int,
    delegate: str,
    settings: FeeSettings,
    *,
    deadline: int | None,
    factory: str | None,
) -> Call:
    """SetRefundDelegate at the owner's current nonce (``settings``), signed, as a submission."""
    deadline_ = deadline_s(deadline)
    typed = _typed.set_refund_delegate_typed_data(
        chain_id, factory_of(settings, factory), owner, delegate, settings.nonce, deadline_
    )
    body = fee_body(chain_id, {"delegate": delegate}, settings.nonce, deadline_)
    return call(
        "fees.set_refund_delegate", body={**body, "signature": sign(typed)}, idempotent=True
    )


class InvoiceToken(Enum):
    """``invoices.refund``'s default asset: the invoice's own token (or native coin)."""

    INVOICE_TOKEN = "the invoice's token"


INVOICE_TOKEN = InvoiceToken.INVOICE_TOKEN


@dataclass(frozen=True)
class RefundOrder:
    """What the owner asks to refund: ``amount_raw`` of ``token_address`` (None: the native
    coin) from the escrow of ``invoice`` to ``to``; ``void``: the whole payment of a
    manual-capture invoice (``invoices.void``, whose body names no token)."""

    invoice: Invoice
    to: str
    amount_raw: int
    token_address: str | None
    void: bool = False


def signed_refund(
    sign: Callable[[dict[str, Any]], str],
    owner: str,
    order: RefundOrder,
    settings: FeeSettings,
    *,
    deadline: int | None,
    factory: str | None,
) -> Call:
    """Refund at the owner's current nonce (``settings``), signed, as a submission."""
    if isinstance(order.amount_raw, bool) or not isinstance(order.amount_raw, int):
        raise TypeError("amount_raw is an int in raw units (wei, or the token's smallest unit)")
    invoice = order.invoice
    if invoice.salt is None:
        raise ValueError("the service did not give the invoice's salt")
    deadline_ = deadline_s(deadline)
    typed = _typed.refund_typed_data(
        invoice.chain_id,
        factory_of(settings, factory),
        owner,
        invoice.salt,
        order.token_address,
        order.to,
        order.amount_raw,
        settings.nonce,
        deadline_,
    )
    fields = {
        "paymentAddress": invoice.payment_address,
        "to": order.to,
        "amountRaw": str(order.amount_raw),
        **({} if order.void else {"tokenAddress": order.token_address}),
    }
    body = fee_body(invoice.chain_id, fields, settings.nonce, deadline_)
    name = "invoices.void" if order.void else "invoices.refund"
    return call(name, body={**body, "signature": sign(typed)}, idempotent=True)


def relay(
    name: str,
    chain_id: int,
    fields: Mapping[str, Any],
    nonce: int,
    deadline: int,
    signature: str,
) -> Call:
    """A message the owner signed elsewhere (a wallet front end), for a public relay route."""
    body = fee_body(chain_id, fields, nonce, deadline)
    return call(name, body={**body, "signature": signature}, idempotent=True)
