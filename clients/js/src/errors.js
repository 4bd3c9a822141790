// Errors: one class per error code the service answers with, each carrying code, status and
// details. The tree mirrors the service's own (and the Python SDK's):
//
//   InvoicingError
//   ├── ServiceUnreachable          no answer (connection refused, reset, timeout), after retries
//   └── ApiError                    any error answer; `code` as the service sent it
//       ├── InvalidRequest             400 invalid_request
//       │   ├── UnsupportedChain       400 unsupported_chain
//       │   ├── UnsupportedToken       400 unsupported_token
//       │   ├── UnknownCurrency        400 unknown_currency
//       │   ├── UnpricedCurrency       400 unpriced_currency
//       │   ├── FeeTooHigh             400 fee_too_high
//       │   ├── DeadlineExpired        400 deadline_expired
//       │   ├── InvalidOwnerSignature  400 invalid_owner_signature
//       │   ├── InsufficientBalance    400 insufficient_balance
//       │   ├── GaslessUnavailable     400 gasless_unavailable
//       │   └── InvalidAuthorization   400 invalid_authorization
//       ├── Unauthorized               401 unauthorized
//       │   ├── TimestampOutOfWindow   401 timestamp_out_of_window
//       │   └── ReplayedRequest        401 replayed_request
//       ├── Forbidden                  403 forbidden
//       ├── NotFound                   404 not_found
//       ├── MethodNotAllowed           405 method_not_allowed
//       ├── Conflict                   409 conflict
//       │   ├── InvoiceExists          409 invoice_exists
//       │   ├── NonceMismatch          409 nonce_mismatch
//       │   ├── SweepInProgress        409 sweep_in_progress
//       │   ├── InvoicePending         409 invoice_pending
//       │   ├── InvoiceNotPaid         409 invoice_not_paid
//       │   ├── InvoiceCaptured        409 invoice_captured
//       │   ├── InvoiceVoided          409 invoice_voided
//       │   ├── AuthorizationUsed      409 authorization_used
//       │   ├── RefundDelegateNotNamed 409 refund_delegate_not_named
//       │   ├── NoPayerOfRecord        409 no_payer_of_record
//       │   ├── InvoiceNotPayable      409 invoice_not_payable
//       │   ├── TooManyWebhookSecrets  409 too_many_webhook_secrets
//       │   ├── TooManyWebhookEndpoints 409 too_many_webhook_endpoints
//       │   └── PriceUnavailable       409 price_unavailable
//       ├── PayloadTooLarge            413 payload_too_large
//       ├── UnsupportedMediaType       415 unsupported_media_type
//       ├── RateLimited                429 rate_limited (retryAfterS)
//       ├── InternalError              500 internal_error
//       ├── ChainUnavailable           503 chain_unavailable
//       └── DatabaseUnavailable        503 database_unavailable
//
// An answer whose code this version does not know throws ApiError itself, with that code.

export class InvoicingError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The service gave no answer (connection refused or reset, timeout), retries included. */
export class ServiceUnreachable extends InvoicingError {}

/** The service answered with `{"error": {"code", "message", "details"}}`. */
export class ApiError extends InvoicingError {
  static code = "error";
  static status = 0;

  constructor(message, { code, status, details } = {}) {
    super(message);
    this.message = message;
    this.code = code ?? new.target.code;
    this.status = status ?? new.target.status;
    this.details = details ?? {};
  }

  toString() {
    return `${this.name}: ${this.status} ${this.code}: ${this.message}`;
  }
}

function errorClass(parent, code, status = parent.status) {
  // Named classes so stack traces and `instanceof` read as the code says.
  const name = code
    .split("_")
    .map((part) => part[0].toUpperCase() + part.slice(1))
    .join("");
  const cls = { [name]: class extends parent {} }[name];
  cls.code = code;
  cls.status = status;
  return cls;
}

export const InvalidRequest = errorClass(ApiError, "invalid_request", 400);
export const UnsupportedChain = errorClass(InvalidRequest, "unsupported_chain");
export const UnsupportedToken = errorClass(InvalidRequest, "unsupported_token");
export const UnknownCurrency = errorClass(InvalidRequest, "unknown_currency");
export const UnpricedCurrency = errorClass(InvalidRequest, "unpriced_currency");
export const FeeTooHigh = errorClass(InvalidRequest, "fee_too_high");
export const DeadlineExpired = errorClass(InvalidRequest, "deadline_expired");
export const InvalidOwnerSignature = errorClass(InvalidRequest, "invalid_owner_signature");
export const InsufficientBalance = errorClass(InvalidRequest, "insufficient_balance");
export const GaslessUnavailable = errorClass(InvalidRequest, "gasless_unavailable");
export const InvalidAuthorization = errorClass(InvalidRequest, "invalid_authorization");
export const Unauthorized = errorClass(ApiError, "unauthorized", 401);
export const TimestampOutOfWindow = errorClass(Unauthorized, "timestamp_out_of_window");
export const ReplayedRequest = errorClass(Unauthorized, "replayed_request");
export const Forbidden = errorClass(ApiError, "forbidden", 403);
export const NotFound = errorClass(ApiError, "not_found", 404);
export const MethodNotAllowed = errorClass(ApiError, "method_not_allowed", 405);
export const Conflict = errorClass(ApiError, "conflict", 409);
export const InvoiceExists = errorClass(Conflict, "invoice_exists");
export const NonceMismatch = errorClass(Conflict, "nonce_mismatch");
export const SweepInProgress = errorClass(Conflict, "sweep_in_progress");
export const InvoicePending = errorClass(Conflict, "invoice_pending");
export const InvoiceNotPaid = errorClass(Conflict, "invoice_not_paid");
export const InvoiceCaptured = errorClass(Conflict, "invoice_captured");
export const InvoiceVoided = errorClass(Conflict, "invoice_voided");
export const AuthorizationUsed = errorClass(Conflict, "authorization_used");
export const RefundDelegateNotNamed = errorClass(Conflict, "refund_delegate_not_named");
export const NoPayerOfRecord = errorClass(Conflict, "no_payer_of_record");
export const InvoiceNotPayable = errorClass(Conflict, "invoice_not_payable");
export const TooManyWebhookSecrets = errorClass(Conflict, "too_many_webhook_secrets");
export const TooManyWebhookEndpoints = errorClass(Conflict, "too_many_webhook_endpoints");
export const PriceUnavailable = errorClass(Conflict, "price_unavailable");
export const PayloadTooLarge = errorClass(ApiError, "payload_too_large", 413);
export const UnsupportedMediaType = errorClass(ApiError, "unsupported_media_type", 415);
export const InternalError = errorClass(ApiError, "internal_error", 500);
export const ChainUnavailable = errorClass(ApiError, "chain_unavailable", 503);
export const DatabaseUnavailable = errorClass(ApiError, "database_unavailable", 503);

export class RateLimited extends ApiError {
  static code = "rate_limited";
  static status = 429;

  /** Seconds to wait before trying again, as the service said (or null). */
  get retryAfterS() {
    const value = this.details.retryAfterS;
    return Number.isInteger(value) ? value : null;
  }
}

export const ERRORS_BY_CODE = new Map(
  [
    InvalidRequest, UnsupportedChain, UnsupportedToken, UnknownCurrency, UnpricedCurrency,
    FeeTooHigh, DeadlineExpired,
    InvalidOwnerSignature, InsufficientBalance, Unauthorized, TimestampOutOfWindow,
    ReplayedRequest, Forbidden, NotFound, MethodNotAllowed, Conflict, InvoiceExists,
    NonceMismatch, SweepInProgress, InvoicePending, TooManyWebhookSecrets, TooManyWebhookEndpoints,
    PriceUnavailable,
    PayloadTooLarge, UnsupportedMediaType, RateLimited, InternalError, ChainUnavailable,
    DatabaseUnavailable, GaslessUnavailable, InvalidAuthorization, AuthorizationUsed,
    InvoiceNotPayable, InvoiceNotPaid, InvoiceCaptured, InvoiceVoided, RefundDelegateNotNamed,
    NoPayerOfRecord,
  ].map((cls) => [cls.code, cls]),
);

/** The error of an error answer; any body shape is tolerated (a proxy's HTML page, say). */
export function errorFromResponse(status, body) {
  const error = body !== null && typeof body === "object" ? body.error : undefined;
  if (error === null || typeof error !== "object" || typeof error.code !== "string") {
    return new ApiError(`HTTP ${status} without an error body`, { code: "http_error", status });
  }
  const details = error.details !== null && typeof error.details === "object" ? error.details : {};
  const message = typeof error.message === "string" ? error.message : error.code;
  const Cls = ERRORS_BY_CODE.get(error.code) ?? ApiError;
  return new Cls(message, { code: error.code, status, details });
}
