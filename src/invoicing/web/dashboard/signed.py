"""Money actions signed in the owner's wallet: a refund (EIP-712 ``Refund``), the fee
(``SetFee``), the payout address (``SetPayout``) and the refund delegate
(``SetRefundDelegate``: the service's own delegate, or none).

Each has two steps. *Prepare* answers the exact typed data to sign (``actions.signing``: the
factory's domain, the owner's current factory nonce, a deadline an hour ahead of the services'
clock); uint256 values travel as
decimal strings, which wallets accept and JavaScript numbers could not hold. *Submit*
hands the signature to the same pipeline as ``refund-meta`` and ``set-meta``
(``refunds.service.submit_refund``, ``fees.service.submit_meta``): the same checks, errors,
relayer rules and events. The session only says who asks; the signature decides.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from invoicing.actions import signing
from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.errors import InvalidRequest, RefundDelegateNotNamed
from invoicing.fees.delegate import DelegateRequest, submit_refund_delegate
from invoicing.fees.service import MetaRequest, submit_meta
from invoicing.invoices.amounts import to_raw
from invoicing.invoices.history import invoice_history
from invoicing.refunds.delegated import service_delegate
from invoicing.refunds.service import RefundRequest, submit_refund
from invoicing.web.api.inputs import decimal_digits, json_body
from invoicing.web.context import services_of
from invoicing.web.dashboard.common import json_answer
from invoicing.web.dashboard.session import Owner, SignedIn

router = APIRouter(prefix="/dashboard", include_in_schema=False)

UINTS = ("amount", "nonce", "deadline", "feeBps")


def _strings(typed: dict[str, Any]) -> dict[str, Any]:
    message = {k: str(v) if k in UINTS else v for k, v in typed["message"].items()}
    return {**typed, "message": message}


def read_text(data: dict[str, Any], name: str, limit: int = 100) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise InvalidRequest(f"{name}: required", {"field": name})
    return value.strip()


def read_address(data: dict[str, Any], name: str) -> str:
    try:
        address = normalize_address(read_text(data, name))
    except ValueError as exc:
        raise InvalidRequest(f"{name}: {exc}", {"field": name}) from None
    if address == ZERO_ADDRESS:
        raise InvalidRequest(f"{name}: must not be the zero address", {"field": name})
    return address


def read_uint(data: dict[str, Any], name: str) -> int:
    try:
        return decimal_digits(read_text(data, name, 78))
    except ValueError:
        raise InvalidRequest(f"{name}: a decimal string of digits", {"field": name}) from None


def _chain_id(data: dict[str, Any]) -> int:
    value = read_text(data, "chainId", 19)
    if not (value.isascii() and value.isdigit()):
        raise InvalidRequest("chainId: a chain id", {"field": "chainId"})
    return int(value)


async def read_json(request: Request) -> dict[str, Any]:
    if not request.headers.get("content-type", "").startswith("application/json"):
        raise InvalidRequest("send application/json")
    return await json_body(request, services_of(request).settings.max_body_bytes)


@router.post("/invoices/{invoice_pk}/refund/prepare")
async def prepare_refund(request: Request, invoice_pk: str, owner: SignedIn) -> JSONResponse:
    services = services_of(request)
    invoice = (await invoice_history(services.db, owner.key, invoice_pk)).invoice
    data = await read_json(request)
    to = read_address(data, "to")
    try:
        amount_raw = to_raw(read_text(data, "amount"), invoice.decimals)
    except ValueError as exc:
        raise InvalidRequest(f"amount: {exc}", {"field": "amount"}) from None
    prepared = await signing.prepare_refund(services, owner.address, invoice, to, amount_raw)
    return _prepared(owner.address, prepared)


def _prepared(owner: str, prepared: signing.Prepared) -> JSONResponse:
    return json_answer(
        {
            "owner": owner,
            "chainId": prepared.chain_id,
            "typedData": _strings(prepared.typed),
            "submit": prepared.submit,
        }
    )


@router.post("/invoices/{invoice_pk}/refund")
async def refund(request: Request, invoice_pk: str, owner: SignedIn) -> JSONResponse:
    """Relay the signed Refund as ``refund-meta`` does."""
    services = services_of(request)
    invoice = (await invoice_history(services.db, owner.key, invoice_pk)).invoice
    data = await read_json(request)
    accepted = await submit_refund(
        services,
        RefundRequest(
            owner_address=owner.address,
            chain_id=invoice.chain_id,
            payment_address=invoice.payment_address,
            to_address=read_address(data, "to"),
            amount_raw=read_uint(data, "amountRaw"),
            token_address=invoice.token_address,
            token_given=False,
            nonce=read_uint(data, "nonce"),
            deadline=read_uint(data, "deadline"),
            signature=read_text(data, "signature", 4098),
        ),
    )
    return json_answer(
        {"message": f"Refund sent: transaction {accepted.tx_hash}", "txHash": accepted.tx_hash},
        status_code=202,
    )


@router.post("/settings/fee/prepare")
async def prepare_fee(request: Request, owner: SignedIn) -> JSONResponse:
    data = await read_json(request)
    services = services_of(request)
    prepared = await signing.prepare_set_fee(
        services, owner.address, _chain_id(data), read_uint(data, "feeBps")
    )
    return _prepared(owner.address, prepared)


@router.post("/settings/payout/prepare")
async def prepare_payout(request: Request, owner: SignedIn) -> JSONResponse:
    data = await read_json(request)
    payout = read_address(data, "payoutAddress")
    services = services_of(request)
    prepared = await signing.prepare_set_payout(services, owner.address, _chain_id(data), payout)
    return _prepared(owner.address, prepared)


@router.post("/settings/fee")
async def set_fee(request: Request, owner: SignedIn) -> JSONResponse:
    meta, data = await _signed_meta(request, owner)
    return await _relay(request, replace(meta, fee_bps=read_uint(data, "feeBps")))


@router.post("/settings/payout")
async def set_payout(request: Request, owner: SignedIn) -> JSONResponse:
    meta, data = await _signed_meta(request, owner)
    return await _relay(request, replace(meta, payout_address=read_address(data, "payoutAddress")))


def _delegate_choice(request: Request, data: dict[str, Any]) -> str:
    """``name``: the service's delegate address; ``revoke``: the zero address."""
    choice = read_text(data, "choice", 10)
    if choice == "revoke":
        return ZERO_ADDRESS
    account = service_delegate(services_of(request).settings)
    if choice != "name":
        raise InvalidRequest("choice: name or revoke", {"field": "choice"})
    if account is None:
        raise RefundDelegateNotNamed("this service holds no refund delegate key")
    return normalize_address(account.address)


@router.post("/settings/refund-delegate/prepare")
async def prepare_refund_delegate(request: Request, owner: SignedIn) -> JSONResponse:
    data = await read_json(request)
    delegate = _delegate_choice(request, data)
    prepared = await signing.prepare_set_refund_delegate(
        services_of(request), owner.address, _chain_id(data), delegate
    )
    return _prepared(owner.address, prepared)


@router.post("/settings/refund-delegate")
async def set_refund_delegate(request: Request, owner: SignedIn) -> JSONResponse:
    """Relay the signed SetRefundDelegate as ``/integration/refund-delegate`` does."""
    meta, data = await _signed_meta(request, owner)
    delegate = read_text(data, "delegate", 42)
    try:
        delegate = normalize_address(delegate)
    except ValueError as exc:
        raise InvalidRequest(f"delegate: {exc}", {"field": "delegate"}) from None
    accepted = await submit_refund_delegate(
        services_of(request),
        DelegateRequest(
            owner_address=owner.address,
            chain_id=meta.chain_id,
            delegate=delegate,
            nonce=meta.nonce,
            deadline=meta.deadline,
            signature=meta.signature,
        ),
    )
    return json_answer(
        {"message": f"Sent: transaction {accepted.tx_hash}", "txHash": accepted.tx_hash},
        status_code=202,
    )


async def _signed_meta(request: Request, owner: Owner) -> tuple[MetaRequest, dict[str, Any]]:
    """What SetFee and SetPayout submit alike (checked in this order), and the body for the
    field that differs."""
    data = await read_json(request)
    meta = MetaRequest(
        owner_address=owner.address,
        chain_id=_chain_id(data),
        nonce=read_uint(data, "nonce"),
        deadline=read_uint(data, "deadline"),
        signature=read_text(data, "signature", 4098),
    )
    return meta, data


async def _relay(request: Request, meta: MetaRequest) -> JSONResponse:
    accepted = await submit_meta(services_of(request), meta)
    return json_answer(
        {"message": f"Sent: transaction {accepted.tx_hash}", "txHash": accepted.tx_hash},
        status_code=202,
    )
