// Generated from openapi.json by `make sdk` (clients/sdkgen): do not edit.
// The service's answers (and the request bodies the SDK's calls take), one a schema of
// openapi.json; index.d.ts exports them beside the client's own declarations.
import type { EventEnvelope } from "../index.js";

export interface ApiKey {
  id: string;
  label: string | null;
  createdAt: number;
  revokedAt: number | null;
}

export interface ApiKeyList {
  items: ApiKey[];
}

/**
 * A payer's EIP-3009 `TransferWithAuthorization`, signed in the token's EIP-712 domain
 * (`chainId`, `tokenAddress`): the fields as signed, integers as decimal strings.
 */
export interface AuthorizationBody {
  chainId: number;
  /** 0x address; mixed case must be a valid EIP-55 checksum. */
  tokenAddress: string;
  /** 0x address; mixed case must be a valid EIP-55 checksum. */
  from: string;
  /** 0x address; mixed case must be a valid EIP-55 checksum. */
  to: string;
  /** uint256 */
  value: bigint;
  /** uint256 */
  validAfter: bigint;
  /** uint256 */
  validBefore: bigint;
  nonce: string;
  signature: string;
}

/** An owner's brand as the payment page shows it (every part null until set). */
export interface Brand {
  displayName: string | null;
  accentColor: string | null;
  /** Black or white: the text colour on the accent. */
  textColor: string | null;
  /** The re-encoded PNG, served by the service. */
  logoUrl: string | null;
}

/** A captured invoice; a repeated capture gets the same answer. */
export interface Captured {
  ownerAddress: string;
  chainId: number;
  invoiceId: string;
  paymentAddress: string;
  capture: "manual";
  /** When it was captured (by a capture, or at the end of the capture window). */
  capturedAt: number;
}

/** Body of POST /integration/invoices. */
export interface CreateInvoice {
  chainId: number;
  /** In the token's units, or with `currency` a price in that currency. */
  amount: string;
  /** Same rules: the page's way back to the shop without paying. */
  cancelUrl?: string | null;
  /** manual: paid funds wait for a capture (docs: Invoices). */
  capture?: "automatic" | "manual";
  /**
   * ISO 4217 code (USD, EUR): `amount` is a price in it, locked into the token amount at
   * creation (docs: Pricing).
   */
  currency?: string | null;
  description?: string | null;
  expiresAt?: number | null;
  invoiceId?: string | null;
  metadata?: Record<string, unknown> | null;
  /**
   * http(s) (https outside development), at most 2,048 characters: the payment page offers it
   * after payment and goes there after a short countdown.
   */
  redirectUrl?: string | null;
  tokenAddress?: string | null;
  webhookUrl?: string | null;
}

/** Also the answer to a repeated DELETE of the same invoice. */
export interface DeletedInvoice {
  deleted: true;
  invoiceId: string;
  chainId: number;
}

export interface DeletedWebhookEndpoint {
  deleted: true;
  id: string;
}

/** A delivery queued (redelivery, or a ping): its outcome shows in the event's detail. */
export interface DeliveryAccepted {
  eventId: string;
  deliveryId: string;
  endpointId: string | null;
  status: "pending";
}

/** One line of the escrow export (NDJSON). */
export interface EscrowExportLine {
  paymentAddress: string;
  salt: string;
  tokenAddress: string | null;
  invoiceId: string;
  status: InvoiceStatus;
  chainId: number;
  /**
   * The factory that made the escrow and sweeps it: the chain's current one, or a previous
   * version's for an escrow made before an upgrade.
   */
  factory?: string;
}

export interface EventDelivery {
  id: string;
  endpointId: string | null;
  target: "endpoint" | "webhookUrl";
  url: string;
  /** pending, delivered or failed. */
  status: string;
  nextAttemptAt: number | null;
  createdAt: number;
  deliveredAt: number | null;
  attempts: EventDeliveryAttempt[];
}

export interface EventDeliveryAttempt {
  attempt: number;
  attemptedAt: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

export interface EventDetail {
  event: EventEnvelope;
  /** A page of them, oldest first. */
  deliveries: EventDelivery[];
  /** More, later deliveries: ask again with after=<last id>. */
  hasMore: boolean;
}

export interface EventPage {
  /** Newest first. */
  items: EventEnvelope[];
  /** More, older events: ask again with after=<last id>. */
  hasMore: boolean;
}

/** An owner's settings as the factory holds them. */
export interface FeeSettings {
  feeBps: number;
  payoutAddress: string | null;
  nonce: bigint;
  /**
   * The factory contract SetFee and SetPayout signatures are made for (the EIP-712 domain's
   * verifyingContract).
   */
  factory?: string;
}

/** A relayed SetFee or SetPayout: the transaction that carries it. */
export interface FeeSubmission {
  txHash: string;
  chainId: number;
  ownerAddress: string;
  nonce: bigint;
  status: "submitted";
}

/** The fiat price locked into the invoice at creation (docs: Pricing). */
export interface FiatPrice {
  /** ISO 4217. */
  currency: string;
  /** The price, in the currency. */
  amount: string;
  /** Units of the currency one whole unit of the asset was worth. */
  rate: string;
  /** peg: a token its issuer redeems 1:1 for the currency; chainlink: a feed. */
  source: "peg" | "chainlink";
  /** chainlink: the aggregator. */
  feed?: string | null;
  /** chainlink: its round. */
  roundId?: bigint | null;
  /** chainlink: when that round was updated. */
  roundUpdatedAt?: number | null;
}

/**
 * Whether payers may pay the owner's invoices on the chain without gas; each such payment's gas
 * counts against the owner's share of the relayer's daily budget.
 */
export interface GaslessSettings {
  chainId: number;
  enabled: boolean;
  /** The chain's tokens that can be paid without gas (EIP-3009). */
  tokens: string[];
}

/**
 * The transaction that carries a payer's authorization: `submitted` while pending, then
 * `confirmed` or `failed`; the invoice shows paid once the payment is seen.
 */
export interface GaslessSubmission {
  txHash: string;
  chainId: number;
  payer: string;
  nonce: string;
  status: string;
}

export interface Health {
  status: "ok";
}

/**
 * The Invoice object, plus the escrow's `salt` and, when there are some, its `refunds`,
 * `otherBalances`, fiat price and tolerance.
 */
export interface Invoice {
  id: string;
  ownerAddress: string;
  chainId: number;
  invoiceId: string;
  paymentAddress: string;
  salt?: string;
  amount: string;
  /** null: the chain's native coin. */
  tokenAddress: string | null;
  expiresAt: number;
  status: InvoiceStatus;
  paid: boolean;
  paidAt: number | null;
  withdrawn: boolean;
  withdrawnAt: number | null;
  requiredRaw: bigint;
  balanceRaw: bigint;
  metaBalance: string;
  lastCheckedAt?: number;
  createdAt: number;
  updatedAt: number;
  /** The hosted payment page. */
  url: string;
  /**
   * automatic: swept once paid; manual: the paid funds wait in the escrow for a capture or a
   * void (docs: Invoices, manual capture).
   */
  capture?: "automatic" | "manual";
  /** The way back to the shop without paying (when given). */
  cancelUrl?: string | null;
  /** Present only for manual capture; null until captured. */
  capturedAt?: number | null;
  /** Present only when given. */
  description?: string | null;
  /** Present only for an invoice created with a currency. */
  fiat?: FiatPrice | null;
  /** Present only when given. */
  metadata?: Record<string, unknown> | null;
  /** Present only when any. */
  otherBalances?: OtherBalance[] | null;
  /** The transfers into the escrow (payments of record); present only when any. */
  payments?: Payment[] | null;
  /** Where the payment page sends the payer after payment (when given). */
  redirectUrl?: string | null;
  /** Present only when any. */
  refunds?: Refund[] | null;
  /** Present only on a subscription's charge: its subscription and period. */
  subscription?: InvoiceSubscription | null;
  /** Present only when the owner accepted an underpayment. */
  tolerance?: Tolerance | null;
  /**
   * Present only for manual capture; null unless voided (the payment went back to the payer and
   * the invoice is cancelled).
   */
  voidedAt?: number | null;
  /** The invoice's x402 v2 resource; present only for an invoice in a token with EIP-3009. */
  x402Url?: string | null;
}

/** A page of invoices; everything is read when page * limit >= total. */
export interface InvoicePage {
  items: Invoice[];
  total: number;
  page: number;
  limit: number;
}

/** The status values of an invoice (docs/reference/api.md), stored and shown as is. */
export type InvoiceStatus = "pending" | "paid" | "completed" | "cancelled" | "expired";

export interface InvoiceStatusResult {
  invoice: Invoice;
}

export interface InvoiceSubscription {
  /** The subscription's id. */
  id: string;
  /** The period this invoice charges, from 0. */
  period: number;
}

/** A new API key; `apiKey` is shown this once. */
export interface IssuedApiKey {
  id: string;
  apiKey: string;
  label: string | null;
  createdAt: number;
}

/** A new webhook signing secret; `secret` is shown this once. */
export interface IssuedWebhookSecret {
  id: string;
  secret: string;
  createdAt: number;
}

/** The events mailed to an owner, and where. */
export interface MailSettings {
  /** The address mail goes to; null: none set. */
  email: string | null;
  /** The event types mailed. */
  events: string[];
  /** The language of the mail. */
  language: string;
  /** Whether payers may ask for a receipt. */
  receipts: boolean;
}

/** A wallet that acts on the owner's account in the dashboard, within its role. */
export interface Member {
  address: string;
  /** viewer, operator or admin. */
  role: string;
  createdAt: number;
  updatedAt: number;
}

export interface MemberList {
  items: Member[];
}

/** An asset in the escrow other than the invoice's own, not swept yet. */
export interface OtherBalance {
  /** null: the native coin. */
  tokenAddress: string | null;
  balanceRaw: bigint;
}

/** An owner's settings (defaults when never set). */
export interface OwnerSettings {
  /** Whether paid webhooks carry x-service-api-key (API-key invoices). */
  webhookApiKeyHeader: boolean;
  /**
   * The share of the amount due (basis points) a payment may fall short by and still pay an
   * invoice created from now on.
   */
  underpaymentToleranceBps?: number;
  /**
   * The ISO 4217 currency the dashboard shows values and totals in beside the token amounts
   * (null: none chosen).
   */
  reportingCurrency?: string | null;
  /** How long a paid manual-capture invoice waits for its capture (seconds from paidAt). */
  captureWindowS?: number;
  /** At the end of the capture window: capture (true) or leave for a void. */
  captureAtWindowEnd?: boolean;
}

/** The fiat price an invoice was created with (docs/integration/pricing.md). */
export interface PagePrice {
  /** ISO 4217. */
  currency: string;
  amount: string;
  /** Units of the currency one whole unit of the asset was worth. */
  rate: string;
}

/** A transfer into the invoice's escrow, as the chain shows it (docs: Invoices). */
export interface Payment {
  txHash: string;
  from: string;
  amountRaw: bigint;
  /** null: the native coin. */
  tokenAddress: string | null;
  blockNumber: number;
}

/** One payment (amounts as decimal strings in the token's units; unknown: empty). */
export interface PaymentLine {
  invoiceId: string;
  paymentAddress: string;
  chainId: number;
  /** The token's address, or "native". */
  token: string;
  amount: string;
  /** The time of the payment's block (unix ms). */
  paidAt: number;
  /** The payment's transaction. */
  txHash: string;
  /** The payer's address. */
  from: string;
  fiatCurrency: string;
  fiatAmount: string;
  rate: string;
  /** The service fee taken when the payment was swept. */
  fee: string;
  sweepTxHash: string;
}

export interface PaymentReport {
  items: PaymentLine[];
  /** The next page's cursor; null: the last page. */
  nextCursor: string | null;
}

/**
 * `GET /pay/<paymentAddress>/status`: what the hosted payment page shows (public, no owner
 * data): the fields the page renders, built by `PaymentView.public_status`.
 */
export interface PaymentStatus {
  paymentAddress: string;
  chainId: number;
  network: string;
  tokenAddress: string | null;
  symbol: string;
  decimals: number;
  amount: string;
  requiredRaw: bigint;
  balanceRaw: bigint;
  remainingRaw: bigint;
  remaining: string;
  /** EIP-681 URI. */
  paymentUri: string;
  status: InvoiceStatus;
  expiresAt: number;
  paidAt: number | null;
  description: string | null;
  /** Present only for an invoice created with a currency. */
  fiat?: PagePrice | null;
}

/** 200 when every check passes (a relayer short of funds is `degraded`), else 503. */
export interface Readiness {
  ready: boolean;
  checks: Record<string, string>;
  /** Present only when any. */
  degraded?: Record<string, string> | null;
}

/** The receipt will be mailed to `email` once the invoice is paid. */
export interface ReceiptRequested {
  email: string;
}

/** A relayed refund from the invoice's escrow. */
export interface Refund {
  txHash: string | null;
  to: string;
  /** null: the native coin. */
  tokenAddress: string | null;
  amountRaw: bigint;
  /** submitted, confirmed or failed. */
  status: string;
  createdAt: number;
}

/** A relayed Refund: the transaction that carries it. */
export interface RefundSubmission {
  txHash: string;
  chainId: number;
  ownerAddress: string;
  nonce: bigint;
  status: "submitted";
}

export interface RemovedMember {
  removed: boolean;
  address: string;
}

export interface RevokedApiKey {
  revoked: true;
  id: string;
  revokedAt: number;
}

export interface RevokedWebhookSecret {
  revoked: true;
  id: string;
  revokedAt: number;
}

/** A Refund the service signed as the owner's delegate and relayed. */
export interface ServiceRefundSubmission {
  txHash: string;
  chainId: number;
  ownerAddress: string;
  nonce: bigint;
  status: "submitted";
  /** The payer of record, whom the refund pays. */
  to: string;
  amountRaw: bigint;
}

/** x402 v2 SettleResponse (`transaction` empty when nothing was settled). */
export interface SettleResponse {
  success: boolean;
  payer: string;
  transaction: string;
  network: string;
  /** Present only on failure. */
  errorReason?: string | null;
}

export interface SubscriptionAuthorization {
  /** The address to approve: the contract. */
  spender: string;
  /** For eth_signTypedData_v4. */
  typedData: Record<string, unknown>;
}

export interface SubscriptionCharge {
  period: number;
  paymentAddress: string;
  /** The period's invoice's status. */
  status: string;
  /** submitted, confirmed, reverted (tried again), failed, or null before a try. */
  chargeStatus: string | null;
  txHash: string | null;
}

export interface SubscriptionList {
  items: SubscriptionOut[];
  total: number;
  page: number;
  limit: number;
}

export interface SubscriptionOut {
  id: string;
  subscriptionId: string | null;
  ownerAddress: string;
  chainId: number;
  tokenAddress: string;
  amount: string;
  amountRaw: bigint;
  periodSeconds: number;
  maxPeriods: number;
  status: "awaiting_authorization" | "active" | "past_due" | "cancelled" | "finished";
  url: string;
  payer: string | null;
  /** ms; by the chain's block time. */
  nextChargeAt: number | null;
  description: string | null;
  authorization: SubscriptionAuthorization;
  charges: SubscriptionCharge[];
  createdAt: number;
  /** Omitted when not set. */
  webhookUrl?: string | null;
}

export interface SubscriptionResult {
  subscription: SubscriptionOut;
}

export interface SupportedKind {
  x402Version: number;
  scheme: string;
  network: string;
}

/** x402 v2 SupportedResponse: the exact scheme per chain, and the relayers' addresses. */
export interface SupportedResponse {
  kinds: SupportedKind[];
  extensions: string[];
  signers: Record<string, string[]>;
}

/** The owner's underpayment tolerance when the invoice was created (docs: Pricing). */
export interface Tolerance {
  /** Basis points of requiredRaw. */
  bps: number;
  /** The least balance that pays the invoice. */
  minimumRaw: bigint;
  /** Paid with less than requiredRaw. */
  acceptedUnder: boolean;
  /** requiredRaw less the balance it was paid with. */
  shortfallRaw: bigint;
}

/** x402 v2 VerifyResponse. */
export interface VerifyResponse {
  isValid: boolean;
  payer: string;
  /** Present only when invalid. */
  invalidReason?: string | null;
}

/**
 * One attempt of a paid webhook's delivery (the same attempt as an event's detail shows, with
 * the delivery's id).
 */
export interface WebhookAttempt {
  eventId: string;
  attempt: number;
  attemptedAt: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number | null;
}

export interface WebhookEndpoint {
  id: string;
  url: string;
  /** Event types, or ["*"] for all. */
  events: string[];
  description: string | null;
  enabled: boolean;
  disabledReason: string | null;
  disabledAt: number | null;
  failingSince: number | null;
  createdAt: number;
  updatedAt: number;
}

export interface WebhookEndpointList {
  items: WebhookEndpoint[];
}

/** An invoice's paid-webhook events and every delivery attempt, oldest first. */
export interface WebhookLog {
  paymentAddress: string;
  events: WebhookLogEvent[];
  items: WebhookAttempt[];
}

/** A paid webhook's delivery (`eventId`: the `x-service-event-id` it is sent with). */
export interface WebhookLogEvent {
  eventId: string;
  status: "pending" | "delivered" | "failed";
  attempts: number;
  nextAttemptAt: number | null;
  createdAt: number;
  deliveredAt: number | null;
}

export interface WebhookSecret {
  id: string;
  createdAt: number;
  revokedAt: number | null;
}

export interface WebhookSecretList {
  items: WebhookSecret[];
}
