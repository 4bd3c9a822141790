"""Exceptions: one class per error code the service answers with.

The tree mirrors the service's own (every class carries ``code``, ``status``, ``details``)::

    InvoicingError
    ├── ServiceUnreachable         no answer (connection refused, timeout), after retries
    └── ApiError                   any error answer; ``code`` as the service sent it
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
        │   ├── RefundDelegateNotNamed 409 refund_delegate_not_named
        │   ├── NoPayerOfRecord       409 no_payer_of_record
        │   ├── InvoiceNotPayable     409 invoice_not_payable
        │   ├── TooManyWebhookSecrets 409 too_many_webhook_secrets
        │   ├── TooManyWebhookEndpoints 409 too_many_webhook_endpoints
        │   └── PriceUnavailable      409 price_unavailable
        ├── PayloadTooLarge           413 payload_too_large
        ├── UnsupportedMediaType      415 unsupported_media_type
        ├── RateLimited               429 rate_limited (``retry_after_s``)
        ├── InternalError             500 internal_error
        ├── ChainUnavailable          503 chain_unavailable
        └── DatabaseUnavailable       503 database_unavailable

An answer whose code this version does not know raises ``ApiError`` itself, with that code.
"""

from __future__ import annotations

from typing import Any


class InvoicingError(Exception):
    """Base of every error this client raises."""


class ServiceUnreachable(InvoicingError):
    """The service gave no answer (connection refused or reset, timeout), retries included."""


class ApiError(InvoicingError):
    """The service answered with an error body ``{"error": {"code", "message", "details"}}``."""

    code = "error"
    status = 0

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details: dict[str, Any] = details or {}

    def __str__(self) -> str:
        return f"{self.status} {self.code}: {self.message}"


class InvalidRequest(ApiError):
    code, status = "invalid_request", 400


class UnsupportedChain(InvalidRequest):
    code = "unsupported_chain"


class UnsupportedToken(InvalidRequest):
    code = "unsupported_token"


class UnknownCurrency(InvalidRequest):
    code = "unknown_currency"


class UnpricedCurrency(InvalidRequest):
    code = "unpriced_currency"


class FeeTooHigh(InvalidRequest):
    code = "fee_too_high"


class DeadlineExpired(InvalidRequest):
    code = "deadline_expired"


class InvalidOwnerSignature(InvalidRequest):
    code = "invalid_owner_signature"


class InsufficientBalance(InvalidRequest):
    code = "insufficient_balance"


class GaslessUnavailable(InvalidRequest):
    code = "gasless_unavailable"


class InvalidAuthorization(InvalidRequest):
    code = "invalid_authorization"


class Unauthorized(ApiError):
    code, status = "unauthorized", 401


class TimestampOutOfWindow(Unauthorized):
    code = "timestamp_out_of_window"


class ReplayedRequest(Unauthorized):
    code = "replayed_request"


class Forbidden(ApiError):
    code, status = "forbidden", 403


class NotFound(ApiError):
    code, status = "not_found", 404


class MethodNotAllowed(ApiError):
    code, status = "method_not_allowed", 405


class Conflict(ApiError):
    code, status = "conflict", 409


class InvoiceExists(Conflict):
    code = "invoice_exists"


class NonceMismatch(Conflict):
    code = "nonce_mismatch"


class AuthorizationUsed(Conflict):
    code = "authorization_used"


class RefundDelegateNotNamed(Conflict):
    code = "refund_delegate_not_named"


class NoPayerOfRecord(Conflict):
    code = "no_payer_of_record"


class InvoiceNotPayable(Conflict):
    code = "invoice_not_payable"


class SweepInProgress(Conflict):
    code = "sweep_in_progress"


class InvoicePending(Conflict):
    code = "invoice_pending"


class InvoiceNotPaid(Conflict):
    """A capture or void of an invoice that is not paid (``details["status"]``)."""

    code = "invoice_not_paid"


class InvoiceCaptured(Conflict):
    """A capture of an automatic-capture invoice, or a void of a captured one."""

    code = "invoice_captured"


class InvoiceVoided(Conflict):
    """A capture or void of an invoice that is voided or being voided."""

    code = "invoice_voided"


class TooManyWebhookSecrets(Conflict):
    code = "too_many_webhook_secrets"


class TooManyWebhookEndpoints(Conflict):
    code = "too_many_webhook_endpoints"


class PriceUnavailable(Conflict):
    code = "price_unavailable"


class PayloadTooLarge(ApiError):
    code, status = "payload_too_large", 413


class UnsupportedMediaType(ApiError):
    code, status = "unsupported_media_type", 415


class RateLimited(ApiError):
    code, status = "rate_limited", 429

    @property
    def retry_after_s(self) -> int | None:
        """Seconds to wait before trying again, as the service said."""
        value = self.details.get("retryAfterS")
        return value if isinstance(value, int) else None


class InternalError(ApiError):
    code, status = "internal_error", 500


class ChainUnavailable(ApiError):
    code, status = "chain_unavailable", 503


class DatabaseUnavailable(ApiError):
    code, status = "database_unavailable", 503


def _leaf_classes() -> dict[str, type[ApiError]]:
    found: dict[str, type[ApiError]] = {}
    pending: list[type[ApiError]] = [ApiError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


ERRORS_BY_CODE: dict[str, type[ApiError]] = _leaf_classes()


def error_from_response(status: int, body: Any) -> ApiError:
    """The exception for an error answer; any body shape is tolerated (a proxy's HTML, say)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return ApiError(f"HTTP {status} without an error body", code="http_error", status=status)
    code = error["code"]
    message = str(error.get("message", code))
    details = error.get("details") if isinstance(error.get("details"), dict) else None
    cls = ERRORS_BY_CODE.get(code, ApiError)
    return cls(message, code=code, status=status, details=details)
