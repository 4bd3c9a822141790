"""An x402 v2 facilitator for owners' own x402 servers (specs/x402-specification-v2.md,
"Facilitator Interface"): ``/verify``, ``/settle`` and ``/supported``, for the ``exact``
scheme with EIP-3009 tokens. It is not an open relay:

- every call carries the owner's API key (``x-service-api-key``), which names the owner;
- ``payTo`` must be the owner's own address or one of its invoices' escrows;
- only tokens on the chain's allow-list with EIP-3009, under their own EIP-712 domain;
- each settlement is carried by the payment seam (``payments.seam``): the owner's opt-in,
  one success per authorization, the newcomers' share for an owner with no paid invoice,
  then ``settlement.signed_relay`` (signature, EIP-1271 under the gas cap,
  ``authorizationState``, the payer's balance, a simulation with the send's fee fields).

Verification is the seam's dry run: the same steps, with nothing sent. A payment settled
once answers ``success: false`` (``invalid_transaction_state``) when presented again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from invoicing.chain.eip3009 import Authorization
from invoicing.errors import (
    DeadlineExpired,
    InvalidAuthorization,
    InvalidOwnerSignature,
    ServiceError,
    UnsupportedChain,
)
from invoicing.payments.eip3009.service import EscrowAuthorization
from invoicing.payments.method import PaymentMethod
from invoicing.payments.seam import dry_run, relay_payment
from invoicing.payments.x402.protocol import (
    SCHEME,
    X402_VERSION,
    Payment,
    Requirements,
    X402Invalid,
    check_accepted,
    parse_payment,
    parse_requirements,
    reason_of,
)
from invoicing.payments.x402.resource import receipt_status, settle_response
from invoicing.services import Services
from invoicing.settlement.relayer import relayer_for
from invoicing.settlement.signed_relay import SignedRequest
from invoicing.tables.invoices import Invoice


@dataclass(frozen=True)
class Checked:
    """A payment that passed the checks that need no chain, with its relay purpose."""

    payment: Payment
    requirements: Requirements
    purpose: EscrowAuthorization


async def verify(services: Services, owner_address: str, body: Any) -> dict[str, Any]:
    """``POST /verify``: ``{isValid, invalidReason?, payer}``; nothing is sent."""
    payer = _payer_of(body)
    try:
        checked = await _checked(services, owner_address, body)
        chain = services.chains.get(checked.requirements.chain_id)
        await dry_run(services, chain, checked.purpose)
    except ServiceError as exc:
        if exc.status >= 500 or exc.status == 429:
            raise
        return {"isValid": False, "invalidReason": reason_of(_named(exc)), "payer": payer}
    return {"isValid": True, "payer": payer}


async def settle(services: Services, owner_address: str, body: Any) -> dict[str, Any]:
    """``POST /settle``: relay the authorization and wait for its receipt; a
    ``SettleResponse``."""
    payer = _payer_of(body)
    try:
        checked = await _checked(services, owner_address, body)
        chain = services.chains.get(checked.requirements.chain_id)
        relayed = await relay_payment(services, chain, checked.purpose)
    except ServiceError as exc:
        if exc.status >= 500 or exc.status == 429:
            raise
        network = _network_of(body)
        return {"success": False, "errorReason": reason_of(_named(exc)), "payer": payer,
                "transaction": "", "network": network}  # fmt: skip
    requirements = checked.requirements
    accepted = relayed.accepted
    if not relayed.first:  # its one success belongs to the presentation that carried it
        return settle_response(
            False, requirements, payer, accepted.tx_hash, "invalid_transaction_state"
        )
    if await receipt_status(chain, accepted.tx_hash, services.settings.x402_settle_wait_s):
        return settle_response(True, requirements, payer, accepted.tx_hash)
    return settle_response(
        False, requirements, payer, accepted.tx_hash, "invalid_transaction_state"
    )


def supported(services: Services) -> dict[str, Any]:
    """``GET /supported``: the exact scheme on every chain with an EIP-3009 token and a
    relayer, and the relayers' addresses."""
    kinds, signers = [], []
    for chain in services.chains.all():
        if not any(token.eip3009 for token in chain.config.tokens):
            continue
        try:
            relayer = relayer_for(services, chain.config.chain_id)
        except ServiceError:
            continue
        network = f"eip155:{chain.config.chain_id}"
        kinds.append({"x402Version": X402_VERSION, "scheme": SCHEME, "network": network})
        signers.append(relayer.address)
    return {"kinds": kinds, "extensions": [], "signers": {"eip155:*": sorted(set(signers))}}


def _payer_of(body: Any) -> str:
    try:
        payer = body["paymentPayload"]["payload"]["authorization"]["from"]
    except (KeyError, TypeError):
        return ""
    return payer if isinstance(payer, str) and len(payer) <= 42 else ""


def _network_of(body: Any) -> str:
    try:
        network = body["paymentRequirements"]["network"]
    except (KeyError, TypeError):
        return ""
    return network if isinstance(network, str) and len(network) <= 40 else ""


def _named(exc: ServiceError) -> ServiceError:
    """The relay pipeline's owner-worded refusals, as the payer's."""
    if isinstance(exc, InvalidOwnerSignature):
        return InvalidAuthorization("signature", {"field": "signature"})
    if isinstance(exc, DeadlineExpired):
        return InvalidAuthorization("validBefore", {"field": "validBefore"})
    return exc


async def _checked(services: Services, owner_address: str, body: Any) -> Checked:
    """The request's payment for this owner: parsed, what the client accepted is what the
    server required, the token allow-listed with EIP-3009 under its own domain, ``payTo``
    the owner's, the authorization paying exactly that inside its window."""
    if not isinstance(body, dict) or body.get("x402Version") != X402_VERSION:
        raise X402Invalid("invalid_x402_version", "x402Version must be 2")
    payload, required = body.get("paymentPayload"), body.get("paymentRequirements")
    if not isinstance(payload, dict) or not isinstance(required, dict):
        raise X402Invalid("invalid_payload", "paymentPayload and paymentRequirements needed")
    requirements = parse_requirements(required)
    payment = parse_payment(payload)
    check_accepted(payment, requirements)
    try:
        chain = services.chains.get(requirements.chain_id)
    except UnsupportedChain:
        raise X402Invalid("invalid_network", "this facilitator does not serve it") from None
    token = chain.config.token(requirements.asset)
    domain = None if token is None else token.eip3009
    if (
        token is None
        or domain is None
        or (domain.name, domain.version)
        != (
            requirements.name,
            requirements.version,
        )
    ):
        raise X402Invalid(
            "invalid_payment_requirements", "asset is not an allow-listed EIP-3009 token"
        )
    await _check_pay_to(services, owner_address, requirements)
    auth = payment.authorization
    _check_terms(services, requirements, auth)
    nonce = int.from_bytes(auth.nonce, "big")
    signed = SignedRequest(
        requirements.chain_id, auth.from_address, nonce, auth.valid_before, payment.signature
    )
    purpose = EscrowAuthorization(signed, owner_address, token, auth, method="x402")
    return Checked(payment, requirements, purpose)


async def _check_pay_to(services: Services, owner_address: str, requirements: Requirements) -> None:
    if requirements.pay_to.lower() == owner_address.lower():
        return
    async with services.db.sessions() as session:
        escrow = await session.scalar(
            select(Invoice.id).where(
                Invoice.payment_address == requirements.pay_to,
                Invoice.owner_key == owner_address.lower(),
                Invoice.chain_id == requirements.chain_id,
            )
        )
    if escrow is None:
        raise X402Invalid(
            "invalid_exact_evm_payload_recipient_mismatch",
            "payTo must be the owner's address or one of its escrows",
        )


def _check_terms(services: Services, requirements: Requirements, auth: Authorization) -> None:
    if auth.to_address != requirements.pay_to:
        raise InvalidAuthorization("to is not payTo", {"field": "to"})
    if auth.value != requirements.amount:
        raise InvalidAuthorization("value is not the amount", {"field": "value"})
    now_s = services.clock.now_ms() // 1000
    settings = services.settings
    if auth.valid_after >= now_s:
        raise InvalidAuthorization("not valid yet", {"field": "validAfter"})
    if not (
        now_s + settings.gasless_min_validity_left_s
        <= auth.valid_before
        <= now_s + settings.gasless_max_validity_s
    ):
        raise InvalidAuthorization("validBefore out of range", {"field": "validBefore"})


# Its transfers are relayed as the gasless purpose, whose final handler (``EIP3009``) settles
# the seam's row of every transfer of that purpose.
X402 = PaymentMethod("x402")
