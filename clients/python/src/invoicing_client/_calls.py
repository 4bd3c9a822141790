"""Every operation as a ``Call`` and a reader of its answer: the one description of the API
that ``Client`` and ``AsyncClient`` both send."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from eth_utils.address import to_checksum_address

from invoicing_client._transport import Call, Reply
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

# list(**filters): the keyword, the query parameter it becomes.
LIST_FILTERS = {
    "chain_id": "chainId",
    "status": "status",
    "paid": "paid",
    "token_address": "tokenAddress",
    "invoice_id": "invoiceId",
    "date_from": "dateFrom",
    "date_to": "dateTo",
}
MAX_PAGE_SIZE = 100  # the service caps limit at 100
DEFAULT_DEADLINE_S = 600


def decimal_amount(amount: str | int | Decimal) -> str:
    """An amount as the service takes it: a decimal string, never a float."""
    if isinstance(amount, bool) or not isinstance(amount, str | int | Decimal):
        raise TypeError("amount must be a decimal str, int or Decimal (never a float)")
    if isinstance(amount, Decimal):
        return format(amount, "f")
    return str(amount)


def create_invoice(
    chain_id: int,
    amount: str | int | Decimal,
    token_address: str | None,
    invoice_id: str | None,
    webhook_url: str | None,
    expires_at: int | None,
    description: str | None,
    metadata: Mapping[str, Any] | None,
) -> Call:
    body: dict[str, Any] = {"chainId": chain_id, "amount": decimal_amount(amount)}
    optional = {
        "invoiceId": invoice_id,
        "tokenAddress": token_address,
        "webhookUrl": webhook_url,
        "description": description,
        "expiresAt": expires_at,
        "metadata": dict(metadata) if metadata is not None else None,
    }
    # Omitted, never null: a null is a different signed payload (spec 5.2 rule 6).
    body.update({key: value for key, value in optional.items() if value is not None})
    # Idempotent by invoiceId: an identical retry gets the same invoice back (200). Without
    # one the service numbers the invoice itself, so a retry could create a second one.
    return Call(
        "POST",
        "/integration/invoices",
        "invoice.create",
        body=body,
        idempotent=invoice_id is not None,
    )


def read_created(reply: Reply) -> CreatedInvoice:
    created = reply.status == 201
    return CreatedInvoice.model_validate(
        {
            **reply.data,
            "created": created,
            "requestSignature": reply.signature if created else None,
        }
    )


def invoice_status(payment_address: str) -> Call:
    return Call(
        "GET",
        "/integration/invoices/status",
        "invoice.status",
        query={"paymentAddress": payment_address},
        idempotent=True,
    )


def read_status(reply: Reply) -> Invoice:
    return Invoice.model_validate(reply.data["invoice"])


def list_query(filters: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(filters) - set(LIST_FILTERS)
    if unknown:
        raise TypeError(f"unknown list filters: {', '.join(sorted(unknown))}")
    return {LIST_FILTERS[key]: value for key, value in filters.items() if value is not None}


def list_page(query: Mapping[str, Any], page: int, limit: int) -> Call:
    return Call(
        "GET",
        "/integration/invoices",
        "invoice.list",
        query={**query, "page": page, "limit": limit},
        idempotent=True,
    )


@dataclass(frozen=True)
class InvoicePage:
    items: list[Invoice]
    total: int
    page: int
    limit: int

    @property
    def is_last(self) -> bool:
        """Spec 4.3: everything has been read when page * limit >= total."""
        return not self.items or self.page * self.limit >= self.total


def read_page(reply: Reply) -> InvoicePage:
    data = reply.data
    return InvoicePage(
        [Invoice.model_validate(item) for item in data["items"]],
        data["total"],
        data["page"],
        data["limit"],
    )


def delete_invoice(chain_id: int, invoice_id: str) -> Call:
    return Call(
        "DELETE",
        "/integration/invoices",
        "invoice.delete",
        query={"chainId": chain_id, "invoiceId": invoice_id},
        idempotent=True,
    )


def read_deleted(reply: Reply) -> DeletedInvoice:
    return DeletedInvoice.model_validate(reply.data)


def get_fees(chain_id: int) -> Call:
    return Call("GET", "/integration/fees", "fee.get", query={"chainId": chain_id}, idempotent=True)


def read_fees(reply: Reply) -> FeeSettings:
    return FeeSettings.model_validate(reply.data)


def deadline_s(deadline: int | None) -> int:
    return deadline if deadline is not None else int(time.time()) + DEFAULT_DEADLINE_S


def _domain(chain_id: int, factory: str) -> dict[str, Any]:
    return {
        "name": "PaymentFactory",
        "version": "1",
        "chainId": chain_id,
        "verifyingContract": to_checksum_address(factory),
    }


_DOMAIN_TYPE = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]


def set_fee_typed_data(
    chain_id: int, factory: str, owner: str, fee_bps: int, nonce: int, deadline: int
) -> dict[str, Any]:
    """Spec 4.7: SetFee(address user,uint256 feeBps,uint256 nonce,uint256 deadline)."""
    return {
        "types": {
            "EIP712Domain": _DOMAIN_TYPE,
            "SetFee": [
                {"name": "user", "type": "address"},
                {"name": "feeBps", "type": "uint256"},
                {"name": "nonce", "type": "uint256"},
                {"name": "deadline", "type": "uint256"},
            ],
        },
        "primaryType": "SetFee",
        "domain": _domain(chain_id, factory),
        "message": {
            "user": to_checksum_address(owner),
            "feeBps": fee_bps,
            "nonce": nonce,
            "deadline": deadline,
        },
    }


def set_payout_typed_data(
    chain_id: int, factory: str, owner: str, payout: str, nonce: int, deadline: int
) -> dict[str, Any]:
    """Spec 4.7: SetPayout(address user,address payout,uint256 nonce,uint256 deadline)."""
    return {
        "types": {
            "EIP712Domain": _DOMAIN_TYPE,
            "SetPayout": [
                {"name": "user", "type": "address"},
                {"name": "payout", "type": "address"},
                {"name": "nonce", "type": "uint256"},
                {"name": "deadline", "type": "uint256"},
            ],
        },
        "primaryType": "SetPayout",
        "domain": _domain(chain_id, factory),
        "message": {
            "user": to_checksum_address(owner),
            "payout": to_checksum_address(payout),
            "nonce": nonce,
            "deadline": deadline,
        },
    }


def submit_fee(chain_id: int, fee_bps: int, nonce: int, deadline: int, signature: str) -> Call:
    body = {
        "chainId": chain_id,
        "feeBps": fee_bps,
        "nonce": str(nonce),
        "deadline": str(deadline),
        "signature": signature,
    }
    # The same signed message sent twice gets the transaction of the first back.
    return Call("POST", "/integration/fees/set-meta", "fee.set-meta", body=body, idempotent=True)


def submit_payout(
    chain_id: int, payout_address: str, nonce: int, deadline: int, signature: str
) -> Call:
    body = {
        "chainId": chain_id,
        "payoutAddress": payout_address,
        "nonce": str(nonce),
        "deadline": str(deadline),
        "signature": signature,
    }
    return Call(
        "POST",
        "/integration/fees/set-payout-meta",
        "fee.set-payout-meta",
        body=body,
        idempotent=True,
    )


def _factory(settings: FeeSettings, factory: str | None) -> str:
    found = factory or settings.factory
    if found is None:
        raise ValueError("the service did not name its factory: give factory=")
    return found


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
    typed = set_fee_typed_data(
        chain_id, _factory(settings, factory), owner, fee_bps, settings.nonce, deadline_
    )
    return submit_fee(chain_id, fee_bps, settings.nonce, deadline_, sign(typed))


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
    typed = set_payout_typed_data(
        chain_id, _factory(settings, factory), owner, payout_address, settings.nonce, deadline_
    )
    return submit_payout(chain_id, payout_address, settings.nonce, deadline_, sign(typed))


def read_submission(reply: Reply) -> FeeSubmission:
    return FeeSubmission.model_validate(reply.data)


def create_api_key(label: str | None) -> Call:
    body = {} if label is None else {"label": label}
    return Call("POST", "/integration/api-keys", "apikey.create", body=body)


def read_issued_key(reply: Reply) -> IssuedApiKey:
    return IssuedApiKey.model_validate(reply.data)


def list_api_keys() -> Call:
    return Call("GET", "/integration/api-keys", "apikey.list", idempotent=True)


def read_api_keys(reply: Reply) -> list[ApiKey]:
    return [ApiKey.model_validate(item) for item in reply.data["items"]]


def revoke_api_key(key_id: str) -> Call:
    return Call(
        "DELETE", "/integration/api-keys", "apikey.revoke", query={"id": key_id}, idempotent=True
    )


def read_revoked_key(reply: Reply) -> RevokedApiKey:
    return RevokedApiKey.model_validate(reply.data)
