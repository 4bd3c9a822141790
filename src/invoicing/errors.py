"""The one exception tree of the service.

Every error a caller can see carries a stable snake_case ``code`` and an HTTP ``status``;
the API layer maps them to ``{"error": {"code", "message", "details"}}`` in one handler::

    ServiceError                  500 internal_error
    ├── InvalidRequest            400 invalid_request
    │   ├── UnsupportedChain      400 unsupported_chain
    │   ├── UnsupportedToken      400 unsupported_token
    │   ├── UnknownCurrency       400 unknown_currency
    │   ├── UnpricedCurrency      400 unpriced_currency
    │   ├── FeeTooHigh            400 fee_too_high
    │   ├── DeadlineExpired       400 deadline_expired
    │   ├── InvalidOwnerSignature 400 invalid_owner_signature
    │   ├── InsufficientBalance   400 insufficient_balance
    │   ├── GaslessUnavailable    400 gasless_unavailable
    │   └── InvalidAuthorization  400 invalid_authorization
    ├── Unauthorized              401 unauthorized
    │   ├── TimestampOutOfWindow  401 timestamp_out_of_window
    │   └── ReplayedRequest       401 replayed_request
    ├── Forbidden                 403 forbidden
    ├── NotFound                  404 not_found
    ├── MethodNotAllowed          405 method_not_allowed
    ├── Conflict                  409 conflict
    │   ├── InvoiceExists         409 invoice_exists
    │   ├── NonceMismatch         409 nonce_mismatch
    │   ├── SweepInProgress       409 sweep_in_progress
    │   ├── InvoicePending        409 invoice_pending
    │   ├── InvoiceNotPaid        409 invoice_not_paid
    │   ├── InvoiceCaptured       409 invoice_captured
    │   ├── InvoiceVoided         409 invoice_voided
    │   ├── AuthorizationUsed     409 authorization_used
    │   ├── InvoiceNotPayable     409 invoice_not_payable
    │   ├── TooManyWebhookSecrets 409 too_many_webhook_secrets
    │   ├── TooManyWebhookEndpoints 409 too_many_webhook_endpoints
    │   └── PriceUnavailable      409 price_unavailable
    ├── PayloadTooLarge           413 payload_too_large
    ├── UnsupportedMediaType      415 unsupported_media_type
    ├── RateLimited               429 rate_limited
    ├── ChainUnavailable          503 chain_unavailable
    └── DatabaseUnavailable       503 database_unavailable

Library errors are translated at the boundary (``raise ChainUnavailable(...) from exc``); a
lost database connection, which can surface in any request, is translated by the API's one
handler (``db.is_connection_loss``).

This tree is the one list of error codes: every class carries its ``code``, ``status`` and a
one-line ``meaning``, and ``error_catalog()`` lists them. The table of
``docs/integration/errors.md`` and both SDKs' error classes are checked against it by
``tests/unit/test_error_catalog.py``.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class ServiceError(Exception):
    """Base of every error the service reports to a caller."""

    status = 500
    code = "internal_error"
    meaning = "an unexpected failure; quote the answer's `x-request-id` when reporting it"

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


class InvalidRequest(ServiceError):
    status = 400
    code = "invalid_request"
    meaning = "a malformed body or query, bad address, amount, page or limit (`details.problems`)"


class UnsupportedChain(InvalidRequest):
    code = "unsupported_chain"
    meaning = "`chainId` is not a chain this service is configured for"


class UnsupportedToken(InvalidRequest):
    code = "unsupported_token"
    meaning = "`tokenAddress` is not on that chain's allow-list"


class UnknownCurrency(InvalidRequest):
    code = "unknown_currency"
    meaning = "`currency` is not an ISO 4217 code"


class UnpricedCurrency(InvalidRequest):
    code = "unpriced_currency"
    meaning = "no token pegged to `currency` and no price feed for the asset in it on that chain"


class FeeTooHigh(InvalidRequest):
    code = "fee_too_high"
    meaning = "a fee message asks for more than the maximum fee (`details.max`)"


class DeadlineExpired(InvalidRequest):
    code = "deadline_expired"
    meaning = "a signed fee, payout or refund message's deadline has passed"


class InvalidOwnerSignature(InvalidRequest):
    code = "invalid_owner_signature"
    meaning = "a fee, payout or refund message's EIP-712 signature is not the owner's"


class InsufficientBalance(InvalidRequest):
    """A refund asks for more than the escrow holds of that asset, or a payer's transfer
    authorization for more than the payer holds."""

    code = "insufficient_balance"
    meaning = (
        "a refund asks for more than the escrow holds of that asset, or a transfer "
        "authorization for more than its payer holds"
    )


class GaslessUnavailable(InvalidRequest):
    """The invoice's token has no EIP-3009, or its owner has not turned gasless payments on
    for the chain."""

    code = "gasless_unavailable"
    meaning = "this invoice cannot be paid without gas (its token, or its owner's choice)"


class InvalidAuthorization(InvalidRequest):
    """A payer's EIP-3009 transfer authorization that this invoice cannot take."""

    code = "invalid_authorization"
    meaning = (
        "a transfer authorization is not for this invoice (to, value, validity window), not "
        "signed by its payer, or fails its simulation (`details.field`)"
    )


class Unauthorized(ServiceError):
    status = 401
    code = "unauthorized"
    meaning = "a missing or invalid API key or request signature"


class TimestampOutOfWindow(Unauthorized):
    code = "timestamp_out_of_window"
    meaning = "the signature's timestamp is over 5 minutes from server time (`details.serverTime`)"


class ReplayedRequest(Unauthorized):
    code = "replayed_request"
    meaning = "this owner already used this request timestamp"


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"
    meaning = (
        "the credential is valid but not for this `ownerAddress`, or the owner is not admitted"
    )


class NotFound(ServiceError):
    status = 404
    code = "not_found"
    meaning = "no such invoice, key, secret, endpoint or event for this owner"


class MethodNotAllowed(ServiceError):
    """Answered by the HTTP layer (a route called with a method it does not have)."""

    status = 405
    code = "method_not_allowed"
    meaning = "the route exists but not with this HTTP method"


class Conflict(ServiceError):
    status = 409
    code = "conflict"
    meaning = "the request conflicts with the current state"


class InvoiceExists(Conflict):
    code = "invoice_exists"
    meaning = "an invoice with this `invoiceId` exists with different fields"


class NonceMismatch(Conflict):
    code = "nonce_mismatch"
    meaning = "a signed message's nonce is not the owner's current one (`details.expected`)"


class SweepInProgress(Conflict):
    """A refund of an escrow whose sweep is pending (they never race)."""

    code = "sweep_in_progress"
    meaning = "a refund while a sweep of that escrow is pending"


class InvoicePending(Conflict):
    """A refund of an invoice whose payment is not decided yet: it would lower the reading
    that decides whether the payer's payment counts."""

    code = "invoice_pending"
    meaning = "a refund of an invoice that is still pending; refund once it is paid or expired"


class InvoiceNotPaid(Conflict):
    """A capture or void of an invoice that holds no payment to capture: pending, expired,
    or cancelled before it was paid."""

    code = "invoice_not_paid"
    meaning = "a capture or void of an invoice that is not paid (`details.status`)"


class InvoiceCaptured(Conflict):
    """A capture of an invoice whose funds go to the owner when paid (automatic capture), or
    a void of one already captured."""

    code = "invoice_captured"
    meaning = "a capture of an automatic-capture invoice, or a void of a captured one"


class InvoiceVoided(Conflict):
    """A capture or void of an invoice that is voided, or whose void is in flight."""

    code = "invoice_voided"
    meaning = "a capture or void of an invoice that is voided or being voided"


class RefundDelegateNotNamed(Conflict):
    """A refund the service would sign as the owner's refund delegate, while the service holds
    no delegate key or the owner has not named its delegate on the escrow's factory."""

    code = "refund_delegate_not_named"
    meaning = (
        "the owner has not named this service's refund delegate (`details.delegate`) on that "
        "chain, or the service holds no delegate key"
    )


class NoPayerOfRecord(Conflict):
    """A refund to the payer of record of an invoice whose payment is not recorded yet."""

    code = "no_payer_of_record"
    meaning = "the invoice's payment is not recorded yet (who paid is unknown): retry shortly"


class AuthorizationUsed(Conflict):
    """The authorization's nonce is used or canceled on the token: submitted by someone else
    first, or canceled by its payer."""

    code = "authorization_used"
    meaning = "a transfer authorization whose nonce the token has already used or canceled"


class InvoiceNotPayable(Conflict):
    """The invoice takes no payment now: settled, cancelled, expired, or a payment through
    this service is pending for it."""

    code = "invoice_not_payable"
    meaning = "the invoice takes no payment now (paid, cancelled, expired, or one is pending)"


class TooManyWebhookSecrets(Conflict):
    """An owner already holds the most active webhook signing secrets allowed."""

    code = "too_many_webhook_secrets"
    meaning = "the owner already holds the most active webhook signing secrets allowed"


class TooManyWebhookEndpoints(Conflict):
    """An owner already holds the most webhook endpoints allowed."""

    code = "too_many_webhook_endpoints"
    meaning = "the owner already holds the most webhook endpoints allowed"


class PriceUnavailable(Conflict):
    code = "price_unavailable"
    meaning = (
        "the price feed's latest answer is stale, not positive or from an incomplete round "
        "(`details.reason`); nothing was created, retry later"
    )


class PayloadTooLarge(ServiceError):
    status = 413
    code = "payload_too_large"
    meaning = "the request body is over the size limit (64 KiB)"


class UnsupportedMediaType(ServiceError):
    """Answered by the HTTP layer (a body that is not ``application/json``)."""

    status = 415
    code = "unsupported_media_type"
    meaning = "a request body that is not `application/json`"


class RateLimited(ServiceError):
    status = 429
    code = "rate_limited"
    meaning = "a rate limit was hit; wait `details.retryAfterS` seconds (the `Retry-After` header)"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message, {"retryAfterS": retry_after_s})
        self.retry_after_s = retry_after_s


class ChainUnavailable(ServiceError):
    """The chain's RPC could not be reached where a live answer is required (retryable)."""

    status = 503
    code = "chain_unavailable"
    meaning = "the chain's RPC is unreachable where a live answer is needed"


class DatabaseUnavailable(ServiceError):
    """The database could not be reached (down, restarting, or the connection dropped); the
    request changed nothing and can be retried."""

    status = 503
    code = "database_unavailable"
    meaning = "the database is unreachable (down, restarting, connection lost); nothing was changed"


class ErrorCode(NamedTuple):
    code: str
    status: int
    meaning: str


def error_catalog() -> list[ErrorCode]:
    """Every code the service answers with, in the order of the tree above (subclasses kept
    elsewhere, such as ``RelayerUnavailable``, reuse one of these codes)."""
    found: list[ErrorCode] = []
    pending: list[type[ServiceError]] = [ServiceError]
    while pending:
        cls = pending.pop(0)
        found.append(ErrorCode(cls.code, cls.status, cls.meaning))
        pending[:0] = [sub for sub in cls.__subclasses__() if sub.__module__ == __name__]
    return found
