// A cancel pays the payer back, whatever moment of the payment it comes at. Medusa cancels
// a payment it authorized moments ago (an order cancelled at once, or a cart whose
// completion failed after the authorization): the service saw the escrow paid, but records
// who paid (the payment of record a void is addressed to) only seconds later, and a
// refund signed meanwhile by another caller of the same owner takes the factory nonce. Each
// attempt reads the invoice again and does what its state asks; what the service answers
// "not yet" to is tried again, backing off, until it is accepted or the time is up. A session
// Medusa deletes, and the old invoice of one it re-prices, are paid back here too: the
// payer's transfer may have landed before Medusa dropped the session.
import {
  ChainUnavailable, DatabaseUnavailable, InternalError, InvoiceNotPaid, InvoiceVoided,
  NoPayerOfRecord, NonceMismatch, RateLimited, ServiceUnreachable, SweepInProgress,
} from "@invoicing/client";
import type { Invoice } from "@invoicing/client";
import { MedusaError } from "@medusajs/framework/utils";
import { setTimeout as sleep } from "node:timers/promises";

import { type Invoicing, payerOfRecord } from "./invoicing.js";

/** The payer is not recorded yet: the service records it seconds after the payment. */
export class PayerNotRecorded extends Error {
  constructor(paymentAddress: string) {
    super(`no payment of record yet for ${paymentAddress}: the service records it seconds `
      + "after the payment");
    this.name = "PayerNotRecorded";
  }
}

// "Not yet" answers: tried again. Anything else (a captured invoice, a wrong delegate key,
// an escrow swept already) is for a person, and thrown at once.
const RETRIED = [
  PayerNotRecorded, NoPayerOfRecord, NonceMismatch, SweepInProgress, InvoiceNotPaid,
  ChainUnavailable, DatabaseUnavailable, InternalError, RateLimited, ServiceUnreachable,
];
const FIRST_DELAY_MS = 250;
const MAX_DELAY_MS = 4_000;

export type Cancellable = { chainId: number; invoiceId: string; paymentAddress: string };

export type PayBackOptions = {
  timeoutMs: number;
  /** Whether an unpaid invoice is read again after its cancel (default true): one the
   * service marked paid as the cancel came stays paid, and is voided. A re-price, which
   * must stay quick, skips it for an invoice that had received nothing: one status read and
   * the cancel. */
  rereadsAfterCancel?: boolean;
};

/** What the payer got back: the void's or refund's transaction, or nothing to pay back. */
export type PaidBack = { status: "cancelled"; void?: unknown; refund?: unknown };

/** Cancel the invoice and pay its payer back, trying again for up to `timeoutMs`. */
export async function payBack(invoicing: Invoicing, invoice: Cancellable,
  { timeoutMs, rereadsAfterCancel = true }: PayBackOptions): Promise<PaidBack> {
  const deadline = Date.now() + timeoutMs;
  for (let delayMs = FIRST_DELAY_MS; ; delayMs = Math.min(delayMs * 2, MAX_DELAY_MS)) {
    try {
      return await attempt(invoicing, invoice, rereadsAfterCancel);
    } catch (error) {
      // A void of it is in flight (an earlier attempt's, whose answer was lost).
      if (error instanceof InvoiceVoided) return { status: "cancelled" };
      if (!RETRIED.some((kind) => error instanceof kind) || Date.now() + delayMs > deadline) {
        throw error;
      }
      await sleep(delayMs);
    }
  }
}

async function attempt(invoicing: Invoicing, cancellable: Cancellable,
  rereadsAfterCancel: boolean): Promise<PaidBack> {
  let invoice = await invoicing.status(cancellable.paymentAddress);
  if (invoice.status === "pending" || invoice.status === "expired") {
    // Unpaid: cancelled, so that its page takes no payment any more. One the service marked
    // paid before the cancel took keeps the invoice paid (a paid invoice is not cancelled):
    // read it again, unless the caller cannot wait for that and nothing had arrived.
    await invoicing.client.invoices.delete(cancellable.chainId, cancellable.invoiceId);
    if (!rereadsAfterCancel && invoice.balanceRaw === 0n) return { status: "cancelled" };
    invoice = await invoicing.status(cancellable.paymentAddress);
  }
  if (invoice.voidedAt) return { status: "cancelled" };
  if (invoice.status === "cancelled") return refundHeld(invoicing, invoice);
  if (invoice.capture !== "manual" || invoice.capturedAt || invoice.status === "completed") {
    throw new MedusaError(MedusaError.Types.NOT_ALLOWED,
      `the payment of ${invoice.paymentAddress} is captured: refund it instead of cancelling`);
  }
  // Paid, awaiting its capture: voided, its whole escrow back to the payer.
  const voided = await invoicing.void(invoice, payer(invoice), invoice.balanceRaw);
  return { status: "cancelled", void: jsonSafe(voided) };
}

/** A cancelled invoice whose escrow holds funds (a part paid before the cancel, or a
 * payment the service read as the cancel took): what it holds, less what was refunded,
 * back to the payer. */
async function refundHeld(invoicing: Invoicing, invoice: Invoice): Promise<PaidBack> {
  const refunded = (invoice.refunds ?? []).filter((refund) => refund.status !== "failed")
    .reduce((sum, refund) => sum + BigInt(refund.amountRaw), 0n);
  const held = BigInt(invoice.balanceRaw) - refunded;
  if (held <= 0n) return { status: "cancelled" };
  const refund = await invoicing.refund(invoice.paymentAddress, payer(invoice), held);
  return { status: "cancelled", refund: jsonSafe(refund) };
}

export function payer(invoice: Invoice): string {
  const from = payerOfRecord(invoice);
  if (!from) throw new PayerNotRecorded(invoice.paymentAddress);
  return from;
}

/** Medusa stores session data as JSON: bigints as decimal strings. */
export function jsonSafe(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_, item) =>
    typeof item === "bigint" ? String(item) : item));
}
