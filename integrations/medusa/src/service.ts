// The Medusa v2 payment provider: one manual-capture invoice of the invoicing service per
// payment session. Paid is authorized (the funds wait in the invoice's escrow), a capture on
// fulfilment releases them to the owner, a cancel voids the payment back to the payer (trying
// again until the service has recorded who paid: src/payback.ts), and a refund is relayed
// from the escrow, signed by the owner's refund delegate. A session deleted or re-priced goes
// through the same payback as a cancel: a payment that landed first goes back to the payer.
import { Client, NotFound, webhooks } from "@invoicing/client";
import type { Invoice } from "@invoicing/client";
import { AbstractPaymentProvider, PaymentActions, PaymentSessionStatus } from "@medusajs/framework/utils";
import type {
  AuthorizePaymentInput, AuthorizePaymentOutput, CancelPaymentInput, CancelPaymentOutput,
  CapturePaymentInput, CapturePaymentOutput, DeletePaymentInput, DeletePaymentOutput,
  GetPaymentStatusInput, GetPaymentStatusOutput, InitiatePaymentInput, InitiatePaymentOutput,
  ProviderWebhookPayload, RefundPaymentInput, RefundPaymentOutput, RetrievePaymentInput,
  RetrievePaymentOutput, UpdatePaymentInput, UpdatePaymentOutput, WebhookActionResult,
} from "@medusajs/framework/types";
import { Wallet } from "ethers";
import { randomUUID } from "node:crypto";

import { decimalString, rawShare } from "./amounts.js";
import { Invoicing } from "./invoicing.js";
import { type InvoicingOptions, validateOptions } from "./options.js";
import { jsonSafe, type PaidBack, payBack, type PayBackOptions, payer } from "./payback.js";

// How long a cancel (and a delete or re-price of a paid session) keeps trying to pay the
// payer back, unless the options say otherwise.
const DEFAULT_CANCEL_TIMEOUT_S = 120;

/** What a session keeps of its invoice (Medusa stores it as the session's data). */
export type SessionData = {
  session_id: string;
  invoiceId: string;
  chainId: number;
  paymentAddress: string;
  url: string;
  amount: string;
  currency: string;
};

/** The session status of an invoice as the service shows it. */
export function sessionStatus(invoice: Invoice): PaymentSessionStatus {
  if (invoice.voidedAt) return PaymentSessionStatus.CANCELED;
  if (invoice.capturedAt || invoice.status === "completed") return PaymentSessionStatus.CAPTURED;
  if (invoice.status === "paid") {
    return invoice.capture === "manual" ? PaymentSessionStatus.AUTHORIZED
      : PaymentSessionStatus.CAPTURED;
  }
  if (invoice.status === "cancelled" || invoice.status === "expired") {
    return PaymentSessionStatus.CANCELED;
  }
  return invoice.balanceRaw > 0n ? PaymentSessionStatus.REQUIRES_MORE
    : PaymentSessionStatus.PENDING;
}

// What each event the service signs means to Medusa (docs: Webhooks and events). A refund
// Medusa did not start has no webhook action in Medusa: it is acknowledged, not recorded.
const WEBHOOK_ACTIONS: Record<string, PaymentActions> = {
  "invoice.paid": PaymentActions.AUTHORIZED,
  "invoice.captured": PaymentActions.SUCCESSFUL,
  "invoice.voided": PaymentActions.CANCELED,
  "invoice.refunded": PaymentActions.NOT_SUPPORTED,
};

export class InvoicingPaymentProvider extends AbstractPaymentProvider<InvoicingOptions> {
  static identifier = "invoicing";

  protected readonly options: InvoicingOptions;
  protected readonly invoicing: Invoicing;

  static validateOptions(options: Record<string, unknown>): void {
    validateOptions(options);
  }

  constructor(cradle: Record<string, unknown>, options: InvoicingOptions) {
    super(cradle, options);
    this.options = options;
    const client = new Client({
      baseUrl: options.baseUrl, ownerAddress: options.ownerAddress, apiKey: options.apiKey,
    });
    this.invoicing = new Invoicing(client, new Wallet(options.refundDelegateKey));
  }

  async initiatePayment(input: InitiatePaymentInput): Promise<InitiatePaymentOutput> {
    const sessionId = String(input.data?.session_id ?? input.context?.idempotency_key ?? randomUUID());
    const data = await this.#createInvoice(sessionId, sessionId, input);
    return { id: data.paymentAddress, data, status: PaymentSessionStatus.PENDING };
  }

  async updatePayment(input: UpdatePaymentInput): Promise<UpdatePaymentOutput> {
    const current = input.data as SessionData;
    const amount = decimalString(input.amount);
    const currency = input.currency_code.toUpperCase();
    if (current.amount === amount && current.currency === currency) return { data: current };
    // An invoice's price is locked at creation: a new total is a new invoice, once the old one
    // is cancelled. An old one the payer paid (all or part) is paid back instead, and the
    // session is not re-priced but canceled: a new invoice would ask the payer to pay again
    // for a payment they think is made. Medusa stores the status; a new session is checkout
    // again. An untouched invoice costs one status read and the cancel, as a re-price must
    // stay quick.
    const paidBack = await this.#dropInvoice(current, { rereadsAfterCancel: false });
    if (paidBack.void || paidBack.refund) {
      return { data: { ...current, ...paidBack }, status: PaymentSessionStatus.CANCELED };
    }
    const data = await this.#createInvoice(current.session_id,
      `${current.session_id}.${randomUUID()}`, input);
    return { data, status: PaymentSessionStatus.PENDING };
  }

  async authorizePayment(input: AuthorizePaymentInput): Promise<AuthorizePaymentOutput> {
    return this.getPaymentStatus(input);
  }

  async getPaymentStatus(input: GetPaymentStatusInput): Promise<GetPaymentStatusOutput> {
    const data = input.data as SessionData;
    const invoice = await this.invoicing.status(data.paymentAddress);
    return { status: sessionStatus(invoice), data: { ...data, status: invoice.status } };
  }

  async retrievePayment(input: RetrievePaymentInput): Promise<RetrievePaymentOutput> {
    const data = input.data as SessionData;
    const invoice = await this.invoicing.status(data.paymentAddress);
    return { data: { ...data, status: invoice.status, capturedAt: invoice.capturedAt ?? null } };
  }

  async capturePayment(input: CapturePaymentInput): Promise<CapturePaymentOutput> {
    const data = input.data as SessionData;
    const captured = await this.invoicing.capture(data.chainId, data.paymentAddress);
    return { data: { ...data, capturedAt: captured.capturedAt } };
  }

  /**
   * The payer gets the payment back: an unpaid invoice is cancelled (and whatever its escrow
   * received by then is refunded); a paid, uncaptured one is voided back to its payer of
   * record, once the service has recorded it (seconds after the payment).
   */
  async cancelPayment(input: CancelPaymentInput): Promise<CancelPaymentOutput> {
    const data = input.data as SessionData;
    return { data: { ...data, ...await this.#payBack(data) } };
  }

  /** A refund of `amount` (in the session's currency) to the payer, from the escrow. */
  async refundPayment(input: RefundPaymentInput): Promise<RefundPaymentOutput> {
    const data = input.data as SessionData;
    const invoice = await this.invoicing.status(data.paymentAddress);
    const amountRaw = rawShare(invoice.requiredRaw, decimalString(input.amount), data.amount);
    const refund = await this.invoicing.refund(data.paymentAddress, payer(invoice), amountRaw);
    const refunds = [...((data as { refunds?: unknown[] }).refunds ?? []), jsonSafe(refund)];
    return { data: { ...data, refunds } };
  }

  /**
   * The session is dropped (the customer chose another provider, or the cart's total changed):
   * its invoice is cancelled, and a payment that landed first goes back to the payer, as on a
   * cancel. A throw keeps the session in Medusa.
   */
  async deletePayment(input: DeletePaymentInput): Promise<DeletePaymentOutput> {
    const data = input.data as SessionData;
    return { data: { ...data, ...await this.#dropInvoice(data) } };
  }

  /** Verify the signed delivery, then say what it means for the session it names. */
  async getWebhookActionAndData(
    payload: ProviderWebhookPayload["payload"],
  ): Promise<WebhookActionResult> {
    const body = webhooks.verify(
      payload.headers as Record<string, string>, payload.rawData as string | Uint8Array, {
        signingSecret: this.options.webhookSecret,
        ownerAddress: this.options.ownerAddress,
        toleranceS: this.options.webhookToleranceS,
      } as Parameters<typeof webhooks.verify>[2],
    ) as Record<string, any>;
    // An event envelope {id, type, data: {invoice}}, or the paid webhook (the invoice itself).
    const type: string = body.type ?? "invoice.paid";
    const invoice = body.type ? body.data?.invoice : body;
    const action = WEBHOOK_ACTIONS[type] ?? PaymentActions.NOT_SUPPORTED;
    if (!invoice?.invoiceId) return { action: PaymentActions.NOT_SUPPORTED };
    return {
      action,
      data: {
        session_id: String(invoice.metadata?.medusa_session_id ?? invoice.invoiceId),
        amount: invoice.fiat?.amount ?? invoice.amount,
      },
    };
  }

  async #createInvoice(sessionId: string, invoiceId: string,
    input: InitiatePaymentInput): Promise<SessionData> {
    const amount = decimalString(input.amount);
    const currency = input.currency_code.toUpperCase();
    const invoice = await this.invoicing.create({
      chainId: this.options.chainId, amount, currency, invoiceId,
      tokenAddress: this.options.tokenAddress,
      redirectUrl: (input.data?.redirect_url as string | undefined) ?? this.options.redirectUrl,
      cancelUrl: this.options.cancelUrl,
      metadata: { medusa_session_id: sessionId },
    });
    return {
      session_id: sessionId, invoiceId: invoice.invoiceId, chainId: invoice.chainId,
      paymentAddress: invoice.paymentAddress, url: invoice.url, amount, currency,
    };
  }

  /** The invoice cancelled and its payer paid back, trying again for up to cancelTimeoutS
   * (src/payback.ts). An unpaid one: a status read, the cancel, a read again. */
  async #payBack(data: SessionData,
    options: Omit<PayBackOptions, "timeoutMs"> = {}): Promise<PaidBack> {
    const timeoutMs = (this.options.cancelTimeoutS ?? DEFAULT_CANCEL_TIMEOUT_S) * 1000;
    return payBack(this.invoicing, data, { ...options, timeoutMs });
  }

  /** The payback of a session Medusa drops; an invoice the service does not know has nothing
   * to cancel or pay back. */
  async #dropInvoice(data: SessionData,
    options: Omit<PayBackOptions, "timeoutMs"> = {}): Promise<PaidBack> {
    try {
      return await this.#payBack(data, options);
    } catch (error) {
      if (error instanceof NotFound) return { status: "cancelled" };
      throw error;
    }
  }
}
