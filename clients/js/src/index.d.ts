// Type declarations of @invoicing/client (the library is plain ESM JavaScript).
import type { Signer } from "ethers";

export type InvoiceStatus = "pending" | "paid" | "completed" | "cancelled" | "expired";

/** Spec 2.1, plus the owner-only fields of the service. Amounts are decimal strings. */
export interface Invoice {
  id: string;
  ownerAddress: string;
  chainId: number;
  invoiceId: string;
  paymentAddress: string;
  amount: string;
  tokenAddress: string | null;
  description?: string;
  metadata?: Record<string, unknown>;
  expiresAt: number;
  status: InvoiceStatus;
  paid: boolean;
  paidAt: number | null;
  withdrawn: boolean;
  withdrawnAt: number | null;
  requiredRaw: string;
  balanceRaw: string;
  metaBalance: string;
  lastCheckedAt: number | null;
  createdAt: number;
  updatedAt: number;
  url: string;
  salt?: string;
  refunds?: Array<Record<string, unknown>>;
  otherBalances?: Array<{ tokenAddress: string | null; balanceRaw: string }>;
  [field: string]: unknown;
}

export interface CreatedInvoice extends Invoice {
  /** False when the service already held this invoice (an identical earlier create). */
  created: boolean;
  /** Signature mode: the x-service-signature of the creating request (the paid webhook
   * carries it back); null in API-key mode and when an earlier call created it. */
  requestSignature: string | null;
}

export interface CreateInvoice {
  chainId: number;
  /** A decimal string ("12.5") or a bigint; never a float. */
  amount: string | bigint;
  tokenAddress?: string | null;
  invoiceId?: string | null;
  webhookUrl?: string | null;
  expiresAt?: number | null;
  description?: string | null;
  metadata?: Record<string, unknown> | null;
}

export interface ListFilters {
  chainId?: number;
  status?: InvoiceStatus;
  paid?: boolean;
  tokenAddress?: string;
  invoiceId?: string;
  dateFrom?: number;
  dateTo?: number;
}

export interface InvoicePage {
  items: Invoice[];
  total: number;
  page: number;
  limit: number;
}

export interface DeletedInvoice {
  deleted: true;
  invoiceId: string;
  chainId: number;
}

export interface FeeSettings {
  feeBps: number;
  payoutAddress: string | null;
  /** The next nonce to sign, a decimal string. */
  nonce: string;
  factory?: string;
}

export interface FeeSubmission {
  txHash: string;
  chainId: number;
  ownerAddress: string;
  nonce: string;
  status: "submitted";
}

export interface FeeOptions {
  /** The owner wallet (default: the client's own signer). */
  signer?: Signer;
  /** Unix seconds (default: now + 600). */
  deadline?: number;
  /** The chain's PaymentFactory (default: the one the service names). */
  factory?: string;
}

export interface ApiKey {
  id: string;
  label: string | null;
  createdAt: number;
  revokedAt: number | null;
}

export interface IssuedApiKey {
  id: string;
  /** Shown this once. */
  apiKey: string;
  label: string | null;
  createdAt: number;
}

export interface RevokedApiKey {
  revoked: true;
  id: string;
  revokedAt: number;
}

export interface ClientOptions {
  baseUrl: string;
  /** Required, except with privateKey (then it is the key's address). */
  ownerAddress?: string;
  apiKey?: string;
  /** Signature mode: the owner wallet signs every request (EIP-191). */
  signer?: Signer;
  privateKey?: string;
  /** Retries of idempotent calls after a lost connection or a 5xx (default 3). */
  maxRetries?: number;
  /** First backoff in seconds, doubled at each retry, at most 8 (default 0.5). */
  backoffS?: number;
  /** Timeout of each attempt in seconds (default 30). */
  timeoutS?: number;
  fetch?: typeof globalThis.fetch;
}

export class Client {
  constructor(options: ClientOptions);
  readonly ownerAddress: string;
  readonly invoices: {
    create(request: CreateInvoice): Promise<CreatedInvoice>;
    status(paymentAddress: string): Promise<Invoice>;
    page(options?: ListFilters & { page?: number; limit?: number }): Promise<InvoicePage>;
    list(options?: ListFilters & { pageSize?: number }): AsyncGenerator<Invoice, void, void>;
    delete(chainId: number, invoiceId: string): Promise<DeletedInvoice>;
  };
  readonly fees: {
    get(chainId: number): Promise<FeeSettings>;
    setFee(chainId: number, feeBps: number, options?: FeeOptions): Promise<FeeSubmission>;
    setPayout(chainId: number, payoutAddress: string, options?: FeeOptions): Promise<FeeSubmission>;
  };
  readonly apiKeys: {
    create(label?: string | { label?: string }): Promise<IssuedApiKey>;
    list(): Promise<ApiKey[]>;
    revoke(id: string): Promise<RevokedApiKey>;
  };
}

export class InvoicingError extends Error {}
export class ServiceUnreachable extends InvoicingError {}
export class ApiError extends InvoicingError {
  constructor(message: string, init?: { code?: string; status?: number; details?: Record<string, unknown> });
  static readonly code: string;
  static readonly status: number;
  readonly code: string;
  readonly status: number;
  readonly details: Record<string, unknown>;
}
export class InvalidRequest extends ApiError {}
export class UnsupportedChain extends InvalidRequest {}
export class UnsupportedToken extends InvalidRequest {}
export class FeeTooHigh extends InvalidRequest {}
export class DeadlineExpired extends InvalidRequest {}
export class InvalidOwnerSignature extends InvalidRequest {}
export class InsufficientBalance extends InvalidRequest {}
export class Unauthorized extends ApiError {}
export class TimestampOutOfWindow extends Unauthorized {}
export class ReplayedRequest extends Unauthorized {}
export class Forbidden extends ApiError {}
export class NotFound extends ApiError {}
export class MethodNotAllowed extends ApiError {}
export class Conflict extends ApiError {}
export class InvoiceExists extends Conflict {}
export class NonceMismatch extends Conflict {}
export class SweepInProgress extends Conflict {}
export class TooManyWebhookSecrets extends Conflict {}
export class TooManyWebhookEndpoints extends Conflict {}
export class PayloadTooLarge extends ApiError {}
export class UnsupportedMediaType extends ApiError {}
export class RateLimited extends ApiError {
  readonly retryAfterS: number | null;
}
export class InternalError extends ApiError {}
export class ChainUnavailable extends ApiError {}
export class DatabaseUnavailable extends ApiError {}
export function errorFromResponse(status: number, body: unknown): ApiError;

export const MESSAGE_PREFIX: "Service API Request Signature";
export const API_KEY_HEADER: "x-service-api-key";
export const SIGNATURE_HEADER: "x-service-signature";
export const TIMESTAMP_HEADER: "x-service-timestamp";
export function canonicalJson(action: string, ownerAddress: string, timestamp: number, payload: unknown): string;
export function requestMessage(action: string, ownerAddress: string, timestamp: number, payload: unknown): string;

export class WebhookVerificationError extends InvoicingError {}

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;
/** The proofs to check; every one given must hold (at least one of the first three). */
export interface VerifyOptions {
  /** A "whsec_…" signing secret, or several while rotating. */
  signingSecret?: string | string[];
  signingSecrets?: string[];
  /** The owner's API key (invoices created in API-key mode). */
  apiKey?: string;
  /** The signature invoices.create returned (signature mode); needs ownerAddress. */
  requestSignature?: string | string[];
  /** Must be the delivery's owner. */
  ownerAddress?: string;
  /** Seconds a signed delivery's timestamp may be away from now (default 300). */
  toleranceS?: number;
  nowS?: number;
}

/** A delivery to a registered endpoint. */
export interface EventEnvelope {
  id: string;
  type: string;
  createdAt: number;
  data: { invoice?: Invoice; [key: string]: unknown };
}

/** The spec's paid webhook (2.2); signed events carry their own envelope. */
export interface PaidWebhook {
  ownerAddress: string;
  chainId: number;
  invoiceId: string;
  paymentAddress: string;
  amount: string;
  tokenAddress: string | null;
  status: "paid";
  paid: boolean;
  paidAt: number;
  requiredRaw: string;
  balanceRaw: string;
  balance: number;
  updatedAt: number;
  [field: string]: unknown;
}

export namespace webhooks {
  export const WEBHOOK_SIGNATURE_HEADER: "x-service-webhook-signature";
  export const EVENT_ID_HEADER: "x-service-event-id";
  export const DEFAULT_TOLERANCE_S: 300;
  /** Check a delivery (raw body as received) and return its parsed JSON body. */
  export function verify<T = PaidWebhook | EventEnvelope>(headers: WebhookHeaders, body: string | Uint8Array | ArrayBuffer,
    options: VerifyOptions): T;
  export { WebhookVerificationError };
}
