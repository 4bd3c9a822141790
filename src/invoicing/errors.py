"""The one exception tree of the service.

Every error a caller can see carries a stable snake_case ``code`` and an HTTP ``status``;
the API layer maps them to ``{"error": {"code", "message", "details"}}`` in one handler::

    ServiceError
    ├── InvalidRequest            400 invalid_request
    │   ├── UnsupportedChain      400 unsupported_chain
    │   ├── UnsupportedToken      400 unsupported_token
    │   ├── FeeTooHigh            400 fee_too_high
    │   ├── DeadlineExpired       400 deadline_expired
    │   ├── InvalidOwnerSignature 400 invalid_owner_signature
    │   └── InsufficientBalance   400 insufficient_balance
    ├── Unauthorized              401 unauthorized
    │   ├── TimestampOutOfWindow  401 timestamp_out_of_window
    │   └── ReplayedRequest       401 replayed_request
    ├── Forbidden                 403 forbidden
    ├── NotFound                  404 not_found
    ├── Conflict                  409
    │   ├── InvoiceExists         409 invoice_exists
    │   ├── NonceMismatch         409 nonce_mismatch
    │   ├── SweepInProgress       409 sweep_in_progress
    │   └── TooManyWebhookSecrets 409 too_many_webhook_secrets
    ├── PayloadTooLarge           413 payload_too_large
    ├── RateLimited               429 rate_limited
    └── ChainUnavailable          503 chain_unavailable

Library errors are translated at the boundary (``raise ChainUnavailable(...) from exc``).
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """Base of every error the service reports to a caller."""

    status = 500
    code = "internal_error"

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


class UnsupportedChain(InvalidRequest):
    code = "unsupported_chain"


class UnsupportedToken(InvalidRequest):
    code = "unsupported_token"


class FeeTooHigh(InvalidRequest):
    code = "fee_too_high"


class DeadlineExpired(InvalidRequest):
    code = "deadline_expired"


class InvalidOwnerSignature(InvalidRequest):
    code = "invalid_owner_signature"


class InsufficientBalance(InvalidRequest):
    """A refund asks for more than the escrow holds of that asset."""

    code = "insufficient_balance"


class Unauthorized(ServiceError):
    status = 401
    code = "unauthorized"


class TimestampOutOfWindow(Unauthorized):
    code = "timestamp_out_of_window"


class ReplayedRequest(Unauthorized):
    code = "replayed_request"


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    status = 409
    code = "conflict"


class InvoiceExists(Conflict):
    code = "invoice_exists"


class NonceMismatch(Conflict):
    code = "nonce_mismatch"


class SweepInProgress(Conflict):
    """A refund of an escrow whose sweep is pending (they never race)."""

    code = "sweep_in_progress"


class TooManyWebhookSecrets(Conflict):
    """An owner already holds the most active webhook signing secrets allowed."""

    code = "too_many_webhook_secrets"


class PayloadTooLarge(ServiceError):
    status = 413
    code = "payload_too_large"


class RateLimited(ServiceError):
    status = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message, {"retryAfterS": retry_after_s})
        self.retry_after_s = retry_after_s


class ChainUnavailable(ServiceError):
    """The chain's RPC could not be reached where a live answer is required (retryable)."""

    status = 503
    code = "chain_unavailable"
