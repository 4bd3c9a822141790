// Type declarations of @invoicing/client (the library is plain ESM JavaScript). The service's
// answers are declared in generated/models.d.ts, generated from its openapi.json (`make sdk`);
// this file declares, by hand, the client, its options, its errors and webhook verification.
import type { Signer } from "ethers";
import type {
  ApiKey,
  AuthorizationBody,
  Brand,
  Captured,
  CreateInvoice,
  DeletedInvoice,
  DeletedWebhookEndpoint,
  DeliveryAccepted,
  EscrowExportLine,
  EventDetail,
  EventPage,
  FeeSettings,
  FeeSubmission,
  GaslessSettings,
  GaslessSubmission,
  Health,
  Invoice,
  InvoicePage,
  InvoiceStatus,
  IssuedApiKey,
  IssuedWebhookSecret,
  MailSettings,
  Member,
  OwnerSettings,
  PaymentReport,
  PaymentStatus,
  Readiness,
  ReceiptRequested,
  RefundSubmission,
  ServiceRefundSubmission,
  RemovedMember,
  RevokedApiKey,
  RevokedWebhookSecret,
  SettleResponse,
  SubscriptionOut,
  SupportedResponse,
  VerifyResponse,
  WebhookEndpoint,
  WebhookLog,
  WebhookSecret,
} from "./generated/models.js";

export * from "./generated/models.js";

/** An invoice as invoices.create returns it. Amounts in token units are decimal strings; raw
 * amounts and nonces are bigints (docs/integration/sdks.md, "Numbers"). */
export interface CreatedInvoice extends Invoice {
  /** False when the service already held this invoice (an identical earlier create). */
  created: boolean;
  /** Signature mode: the x-service-signature of the creating request (the paid webhook
   * carries it back); null in API-key mode and when an earlier call created it. */
  requestSignature: string | null;
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

export interface FeeOptions {
  /** The owner wallet (default: the client's own signer). */
  signer?: Signer;
  /** Unix seconds (default: now + 600). */
  deadline?: number;
  /** The chain's PaymentFactory (default: the one the service names). */
  factory?: string;
}

export interface RefundOptions extends FeeOptions {
  /** The asset refunded (default: the invoice's own; null: the native coin). */
  tokenAddress?: string | null;
}

/** An events filter: events with at least one delivery in this state. */
export type DeliveryStatus = "pending" | "failing" | "delivered" | "failed";

/** A message the owner signed elsewhere, relayed by a public route (no credential). */
export interface SignedMessage {
  chainId: number;
  nonce: bigint;
  /** Unix seconds. */
  deadline: number | bigint;
  signature: string;
}

/** Every route: [method, path, x-signature-action (null: public), query parameter names],
 * by SDK method name. */
export const ROUTES: Readonly<Record<string, readonly [string, string, string | null, readonly string[]]>>;

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

export interface PaymentsQuery {
  /** Paid at or after (unix ms). */
  dateFrom: number;
  /** Paid before (unix ms). */
  dateTo: number;
  /** Only invoices priced in this currency (ISO 4217). */
  currency?: string;
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
    /** Refund `amountRaw` (raw units) from the invoice's escrow to `to`, signed and relayed. */
    refund(paymentAddress: string, to: string, amountRaw: bigint, options?: RefundOptions): Promise<RefundSubmission>;
    /** Capture a paid manual-capture invoice (a repeated capture gets the same answer). */
    capture(chainId: number, paymentAddress: string): Promise<Captured>;
    /** Refund the whole payment of a manual-capture invoice to `to`, signed and relayed. */
    void(paymentAddress: string, to: string, options?: FeeOptions): Promise<RefundSubmission>;
    /** Refund the payer of record, signed by the service as the owner's refund delegate
     * (exactly one of amount, in the invoice's price, and amountRaw). Not idempotent. */
    serviceRefund(chainId: number, paymentAddress: string,
      amount: { amount?: string; amountRaw?: bigint }): Promise<ServiceRefundSubmission>;
    webhooks(paymentAddress: string): Promise<WebhookLog>;
  };
  readonly fees: {
    /** With paymentAddress (one of the owner's escrows): the settings and nonce of the factory
     * that made it, which its Refund is signed for. */
    get(chainId: number, paymentAddress?: string): Promise<FeeSettings>;
    setFee(chainId: number, feeBps: number, options?: FeeOptions): Promise<FeeSubmission>;
    setPayout(chainId: number, payoutAddress: string, options?: FeeOptions): Promise<FeeSubmission>;
    /** The address whose Refund signatures count as the owner's (the zero address revokes). */
    setRefundDelegate(chainId: number, delegate: string, options?: FeeOptions): Promise<FeeSubmission>;
  };
  readonly apiKeys: {
    create(label?: string | { label?: string }): Promise<IssuedApiKey>;
    list(): Promise<ApiKey[]>;
    revoke(id: string): Promise<RevokedApiKey>;
  };
  readonly webhookSecrets: {
    create(): Promise<IssuedWebhookSecret>;
    list(): Promise<WebhookSecret[]>;
    revoke(id: string): Promise<RevokedWebhookSecret>;
  };
  readonly webhookEndpoints: {
    create(endpoint: { url: string; events: string[]; description?: string }): Promise<WebhookEndpoint>;
    list(): Promise<WebhookEndpoint[]>;
    update(id: string, changes: { url?: string; events?: string[]; enabled?: boolean; description?: string }): Promise<WebhookEndpoint>;
    delete(id: string): Promise<DeletedWebhookEndpoint>;
    test(id: string): Promise<DeliveryAccepted>;
  };
  readonly events: {
    page(options?: { type?: string; deliveryStatus?: DeliveryStatus; after?: string; limit?: number }): Promise<EventPage>;
    list(options?: { type?: string; deliveryStatus?: DeliveryStatus; pageSize?: number }): AsyncGenerator<EventEnvelope, void, void>;
    /** A page of the event's deliveries, oldest first; `after`: the last delivery id before. */
    get(id: string, page?: { after?: string; limit?: number }): Promise<EventDetail>;
    /** To one endpoint, or (no endpointId) to the invoice's webhookUrl. */
    redeliver(id: string, target?: { endpointId?: string }): Promise<DeliveryAccepted>;
  };
  readonly escrows: {
    export(chainId: number): Promise<EscrowExportLine[]>;
  };
  readonly settings: {
    get(): Promise<OwnerSettings>;
    update(settings: Partial<OwnerSettings>): Promise<OwnerSettings>;
    brand(): Promise<Brand>;
    updateBrand(brand: {
      displayName?: string | null;
      accentColor?: string | null;
      logo?: Uint8Array | null;
    }): Promise<Brand>;
    notifications(): Promise<MailSettings>;
    /** `events`: invoice event types ("invoice.paid", …); [] mails nothing. */
    updateNotifications(settings: {
      email: string;
      events: string[];
      language?: string;
      receipts?: boolean;
    }): Promise<MailSettings>;
  };
  /** The owner's team: managed with the owner's request signature only (a signer). */
  readonly members: {
    list(): Promise<Member[]>;
    add(address: string, role: "viewer" | "operator" | "admin"): Promise<Member>;
    remove(address: string): Promise<RemovedMember>;
  };
  readonly reports: {
    /** The payments paid in [dateFrom, dateTo) (unix ms): the CSV text, or a JSON page. */
    payments(query: PaymentsQuery & { format?: "csv" }): Promise<string>;
    payments(query: PaymentsQuery & { format: "json"; limit?: number; cursor?: string }): Promise<PaymentReport>;
  };
  readonly subscriptions: {
    create(request: {
      chainId: number;
      tokenAddress: string;
      /** Per period, in the token's units. */
      amount: string;
      periodSeconds: number;
      maxPeriods?: number;
      subscriptionId?: string;
      description?: string;
      redirectUrl?: string;
      cancelUrl?: string;
    }): Promise<SubscriptionOut>;
    status(id: string): Promise<SubscriptionOut>;
    list(options?: { pageSize?: number }): AsyncGenerator<SubscriptionOut, void, void>;
    cancel(id: string): Promise<SubscriptionOut>;
  };
  readonly gasless: {
    get(chainId: number): Promise<GaslessSettings>;
    set(chainId: number, enabled: boolean): Promise<GaslessSettings>;
  };
  /** The x402 v2 facilitator for the owner's own x402 server (API key only). */
  readonly facilitator: {
    verify(request: Record<string, unknown>): Promise<VerifyResponse>;
    settle(request: Record<string, unknown>): Promise<SettleResponse>;
    supported(): Promise<SupportedResponse>;
  };
  readonly public: {
    health(): Promise<Health>;
    ready(): Promise<Readiness>;
    paymentPage(paymentAddress: string, options?: { lang?: string }): Promise<string>;
    paymentStatus(paymentAddress: string): Promise<PaymentStatus>;
    payWithoutGas(paymentAddress: string, authorization: AuthorizationBody): Promise<GaslessSubmission>;
    /** A receipt of the pending invoice mailed to `email` once paid (when the owner sends them). */
    askReceipt(paymentAddress: string, email: string, options?: { lang?: string }): Promise<ReceiptRequested>;
    x402Requirements(paymentAddress: string): Promise<Record<string, unknown>>;
    /** The payer's signature of the subscription's authorization.typedData. */
    authorizeSubscription(id: string, authorization: { signature: string; payer?: string; permit?: { value: string; deadline: number; signature: string; owner?: string; spender?: string } }): Promise<SubscriptionOut>;
    /** The payer's (or owner's) signed EIP-712 Cancel of the subscription, relayed on chain. */
    cancelSubscription(id: string, cancellation: { signature: string }): Promise<SubscriptionOut>;
    relayFee(message: SignedMessage & { feeBps: number }): Promise<FeeSubmission>;
    relayPayout(message: SignedMessage & { payoutAddress: string }): Promise<FeeSubmission>;
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
export class UnknownCurrency extends InvalidRequest {}
export class UnpricedCurrency extends InvalidRequest {}
export class FeeTooHigh extends InvalidRequest {}
export class DeadlineExpired extends InvalidRequest {}
export class InvalidOwnerSignature extends InvalidRequest {}
export class InsufficientBalance extends InvalidRequest {}
export class GaslessUnavailable extends InvalidRequest {}
export class InvalidAuthorization extends InvalidRequest {}
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
export class InvoicePending extends Conflict {}
export class InvoiceNotPaid extends Conflict {}
export class InvoiceCaptured extends Conflict {}
export class InvoiceVoided extends Conflict {}
export class AuthorizationUsed extends Conflict {}
export class RefundDelegateNotNamed extends Conflict {}
export class NoPayerOfRecord extends Conflict {}
export class InvoiceNotPayable extends Conflict {}
export class TooManyWebhookSecrets extends Conflict {}
export class TooManyWebhookEndpoints extends Conflict {}
export class PriceUnavailable extends Conflict {}
export class PayloadTooLarge extends ApiError {}
export class UnsupportedMediaType extends ApiError {}
export class RateLimited extends ApiError {
  readonly retryAfterS: number | null;
}
export class InternalError extends ApiError {}
export class ChainUnavailable extends ApiError {}
export class DatabaseUnavailable extends ApiError {}
export function errorFromResponse(status: number, body: unknown): ApiError;
/** The class of each error code the service answers with. */
export const ERRORS_BY_CODE: ReadonlyMap<string, typeof ApiError>;

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

/** The paid webhook's body; signed events carry their own envelope. */
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
  requiredRaw: bigint;
  balanceRaw: bigint;
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
