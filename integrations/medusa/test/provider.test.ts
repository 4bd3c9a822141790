// The provider against a real `invoicing dev`: sessions become manual-capture invoices paid
// in TUSD on anvil, then authorized, captured, refunded and voided through the service, and
// the service's own signed event deliveries are verified and mapped.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import type { Client } from "@invoicing/client";
import { PaymentActions } from "@medusajs/framework/utils";
import { JsonRpcProvider } from "ethers";

import { InvoicingPaymentProvider, type SessionData } from "../src/service.js";
import {
  anvilAccount, devService, type Ready, shopOwner, tusd, waitFor, webhookReceiver,
} from "./support.js";

let service: Awaited<ReturnType<typeof devService>>;
let ready: Ready;
let receiver: Awaited<ReturnType<typeof webhookReceiver>>;
let provider: InvoicingPaymentProvider;
let owner: Client;
let secret: string;

before(async () => {
  service = await devService();
  ready = service.ready;
  receiver = await webhookReceiver();
  const shop = await shopOwner(ready);
  owner = shop.client;
  secret = shop.options.webhookSecret as string;
  await owner.webhookEndpoints.create({
    url: receiver.url, events: ["invoice.paid", "invoice.captured", "invoice.refunded", "invoice.voided"],
  });
  provider = new InvoicingPaymentProvider({}, shop.options);
});

after(async () => {
  await receiver?.close();
  await service?.stop();
});

/** A session of `amount` USD, paid in full in TUSD by anvil account `payerIndex`. */
async function paidSession(sessionId: string, amount: number, payerIndex: number) {
  const started = await provider.initiatePayment({
    amount, currency_code: "usd", data: { session_id: sessionId },
  });
  const data = started.data as SessionData;
  const payer = anvilAccount(ready, payerIndex);
  const invoice = await owner.invoices.status(data.paymentAddress);
  await (await tusd(ready, payer).transfer(data.paymentAddress, invoice.requiredRaw)).wait();
  // Authorized once the service saw the payment and recorded its payer.
  await waitFor(async () => {
    for await (const event of owner.events.list({ type: "invoice.payment_recorded" })) {
      if ((event.data as { invoice?: { paymentAddress?: string } }).invoice?.paymentAddress
        === data.paymentAddress) return true;
    }
    return false;
  }, 60_000, "the payment of record");
  return { data, payer: await payer.getAddress(), requiredRaw: invoice.requiredRaw };
}

function webhookPayload(delivery: { headers: Record<string, unknown>; body: Buffer }) {
  return { data: JSON.parse(delivery.body.toString("utf8")), rawData: delivery.body, headers: delivery.headers };
}

describe("a session is a manual-capture invoice", () => {
  test("initiate creates it at the cart's fiat price with the storefront's redirect", async () => {
    const started = await provider.initiatePayment({
      amount: "12.5", currency_code: "usd", data: { session_id: "payses_initiate" },
    });
    const data = started.data as SessionData;
    assert.equal(started.id, data.paymentAddress);
    assert.equal(started.status, "pending");
    const invoice = await owner.invoices.status(data.paymentAddress);
    assert.equal(invoice.invoiceId, "payses_initiate");
    assert.equal(invoice.capture, "manual");
    assert.equal(invoice.status, "pending");
    assert.equal(invoice.fiat?.currency, "USD");
    assert.equal(invoice.fiat?.amount, "12.5");
    assert.equal(invoice.requiredRaw, 12_500_000n);  // TUSD: 6 decimals, pegged to USD
    assert.equal(invoice.redirectUrl, "http://127.0.0.1:8000/order/confirmed");
    assert.equal((await provider.authorizePayment({ data })).status, "pending");
    // A retried initiate of the same session gets the same invoice.
    const again = await provider.initiatePayment({
      amount: "12.5", currency_code: "usd", data: { session_id: "payses_initiate" },
    });
    assert.equal((again.data as SessionData).paymentAddress, data.paymentAddress);
  });

  test("paid on anvil it is authorized; a capture captures it; signed events map", async () => {
    const { data } = await paidSession("payses_capture", 25, 1);
    assert.deepEqual(await provider.authorizePayment({ data }),
      { status: "authorized", data: { ...data, status: "paid" } });
    const paid = await receiver.event("invoice.paid", "payses_capture");
    assert.deepEqual(await provider.getWebhookActionAndData(webhookPayload(paid)),
      { action: PaymentActions.AUTHORIZED, data: { session_id: "payses_capture", amount: "25" } });

    const captured = await provider.capturePayment({ data });
    assert.equal(typeof (captured.data as { capturedAt: unknown }).capturedAt, "number");
    assert.equal((await provider.getPaymentStatus({ data })).status, "captured");
    const event = await receiver.event("invoice.captured", "payses_capture");
    assert.deepEqual(await provider.getWebhookActionAndData(webhookPayload(event)),
      { action: PaymentActions.SUCCESSFUL, data: { session_id: "payses_capture", amount: "25" } });
    // A capture again is safe: the same capture.
    assert.deepEqual(await provider.capturePayment({ data }), captured);
  });

  test("a delivery that is not the service's is refused", async () => {
    const paid = await receiver.event("invoice.paid", "payses_capture");
    const forged = Buffer.from(paid.body.toString("utf8").replace("payses_capture", "payses_other"));
    await assert.rejects(provider.getWebhookActionAndData(webhookPayload({ ...paid, body: forged })),
      { name: "WebhookVerificationError" });
    const unsigned = { ...paid.headers, "x-service-webhook-signature": undefined };
    await assert.rejects(provider.getWebhookActionAndData(webhookPayload({ headers: unsigned, body: paid.body })),
      { name: "WebhookVerificationError" });
  });

  test("a refund pays the payer back from the escrow; a cancel voids the rest", async () => {
    const { data, payer, requiredRaw } = await paidSession("payses_refund", 20, 2);
    const token = tusd(ready, new JsonRpcProvider(ready.rpc_url));
    const before = await token.balanceOf(payer);

    await provider.refundPayment({ data, amount: 5 });
    const refunded = await receiver.event("invoice.refunded", "payses_refund");
    assert.equal(await token.balanceOf(payer), before + 5_000_000n);
    assert.deepEqual(await provider.getWebhookActionAndData(webhookPayload(refunded)),
      { action: PaymentActions.NOT_SUPPORTED, data: { session_id: "payses_refund", amount: "20" } });

    await provider.cancelPayment({ data });
    await receiver.event("invoice.voided", "payses_refund");
    assert.equal(await token.balanceOf(payer), before + requiredRaw);
    assert.equal((await provider.getPaymentStatus({ data })).status, "canceled");
  });
});

// Medusa cancels a payment it authorized moments ago (an order cancelled at once, a cart
// whose completion failed after the authorization): the payer gets it back all the same.
describe("a cancel pays the payer back, however soon after the payment", () => {
  const balances = { balanceOf: (address: string) =>
    tusd(ready, new JsonRpcProvider(ready.rpc_url)).balanceOf(address) as Promise<bigint> };

  test("cancelled as the payment is mined, before the service records who paid: voided once it does", async () => {
    // The race is the service's monitor against this test: on a machine where the monitor
    // recorded the payer first, the same steps run again, up to three times in all.
    const wallet = anvilAccount(ready, 3);
    const payer = await wallet.getAddress();
    const raced: boolean[] = [];
    for (let attempt = 1; attempt <= 3 && !raced.includes(true); attempt++) {
      const session = `payses_race_${attempt}`;
      const started = await provider.initiatePayment({
        amount: 10, currency_code: "usd", data: { session_id: session },
      });
      const data = started.data as SessionData;
      const start = await balances.balanceOf(payer);
      const { requiredRaw } = await owner.invoices.status(data.paymentAddress);
      await (await tusd(ready, wallet).transfer(data.paymentAddress, requiredRaw)).wait();
      // Authorized at once (the status lookup re-reads the escrow), its payer not recorded yet.
      assert.equal((await provider.authorizePayment({ data })).status, "authorized");
      const seen = await owner.invoices.status(data.paymentAddress);
      raced.push((seen.payments ?? null) === null);

      const cancelled = await provider.cancelPayment({ data });
      assert.equal((cancelled.data as { status: string }).status, "cancelled");
      assert.equal(typeof (cancelled.data as { void: { txHash: string } }).void.txHash, "string");
      await receiver.event("invoice.voided", session);
      assert.equal(await balances.balanceOf(payer), start);
      assert.equal((await provider.getPaymentStatus({ data })).status, "canceled");
      // A cancel again (Medusa retrying) changes nothing.
      assert.deepEqual((await provider.cancelPayment({ data })).data, { ...data, status: "cancelled" });
    }
    assert.ok(raced.includes(true), `the payer was recorded before each cancel: no race tested (${raced})`);
  });

  test("a transfer that lands after the cancel call goes back with the payment", async () => {
    const started = await provider.initiatePayment({
      amount: 10, currency_code: "usd", data: { session_id: "payses_late" },
    });
    const data = started.data as SessionData;
    const wallet = anvilAccount(ready, 6);
    const payer = await wallet.getAddress();
    const start = await balances.balanceOf(payer);
    const { requiredRaw } = await owner.invoices.status(data.paymentAddress);
    await (await tusd(ready, wallet).transfer(data.paymentAddress, requiredRaw)).wait();
    assert.equal((await provider.authorizePayment({ data })).status, "authorized");

    // The cancel is called; the payer's second transfer (1 TUSD more) is mined after the
    // call, while it waits for the payer of record.
    const cancelling = provider.cancelPayment({ data });
    await (await tusd(ready, wallet).transfer(data.paymentAddress, 1_000_000n)).wait();
    const cancelled = await cancelling;
    assert.equal(typeof (cancelled.data as { void: { txHash: string } }).void.txHash, "string");
    await receiver.event("invoice.voided", "payses_late");
    assert.equal(await balances.balanceOf(payer), start);
  });

  test("cancelled partly paid: the invoice is cancelled and the part paid goes back", async () => {
    const started = await provider.initiatePayment({
      amount: 10, currency_code: "usd", data: { session_id: "payses_part" },
    });
    const data = started.data as SessionData;
    const wallet = anvilAccount(ready, 4);
    const payer = await wallet.getAddress();
    const start = await balances.balanceOf(payer);
    await (await tusd(ready, wallet).transfer(data.paymentAddress, 4_000_000n)).wait();
    assert.equal((await provider.authorizePayment({ data })).status, "requires_more");

    const cancelled = await provider.cancelPayment({ data });
    assert.equal((cancelled.data as { status: string }).status, "cancelled");
    assert.equal(typeof (cancelled.data as { refund: { txHash: string } }).refund.txHash, "string");
    await receiver.event("invoice.refunded", "payses_part");
    assert.equal(await balances.balanceOf(payer), start);
    const invoice = await owner.invoices.status(data.paymentAddress);
    assert.equal(invoice.status, "cancelled");
    assert.equal((await provider.getPaymentStatus({ data })).status, "canceled");
    // A cancel again refunds nothing more.
    assert.deepEqual((await provider.cancelPayment({ data })).data, { ...data, status: "cancelled" });
  });
});

// Medusa drops a session whose invoice the payer may have paid already: the customer chose
// another provider, the cart was abandoned, or its total changed (a new price is a new
// invoice). What the payer paid goes back to them, and nobody is asked to pay twice.
describe("a session dropped or re-priced after its payment pays the payer back", () => {
  const balanceOf = (address: string) =>
    tusd(ready, new JsonRpcProvider(ready.rpc_url)).balanceOf(address) as Promise<bigint>;

  /** A 10 USD session paid in full by anvil account `payerIndex`, the transfer just mined
   * (the service may not have recorded who paid yet), and the payer's balance before it. */
  async function paidAtOnce(sessionId: string, payerIndex: number) {
    const started = await provider.initiatePayment({
      amount: 10, currency_code: "usd", data: { session_id: sessionId },
    });
    const data = started.data as SessionData;
    const wallet = anvilAccount(ready, payerIndex);
    const payer = await wallet.getAddress();
    const start = await balanceOf(payer);
    const { requiredRaw } = await owner.invoices.status(data.paymentAddress);
    await (await tusd(ready, wallet).transfer(data.paymentAddress, requiredRaw)).wait();
    assert.equal((await provider.authorizePayment({ data })).status, "authorized");
    return { data, payer, start };
  }

  /** The status of each invoice the owner has for the session (deleted ones left out). */
  async function invoicesOf(sessionId: string): Promise<string[]> {
    const statuses: string[] = [];
    for await (const invoice of owner.invoices.list()) {
      if (invoice.metadata?.medusa_session_id === sessionId) statuses.push(invoice.status);
    }
    return statuses;
  }

  test("deleted after the payment: voided, the payer has the whole amount back", async () => {
    const { data, payer, start } = await paidAtOnce("payses_deleted_paid", 7);

    const deleted = await provider.deletePayment({ data });
    assert.equal(typeof (deleted.data as { void: { txHash: string } }).void.txHash, "string");
    await receiver.event("invoice.voided", "payses_deleted_paid");
    assert.equal(await balanceOf(payer), start);
    assert.equal((await provider.getPaymentStatus({ data })).status, "canceled");
    // A delete again (Medusa retrying) pays nothing twice.
    assert.deepEqual((await provider.deletePayment({ data })).data, { ...data, status: "cancelled" });
  });

  test("re-priced after the payment: voided, the session canceled, no second invoice to pay", async () => {
    const { data, payer, start } = await paidAtOnce("payses_repriced_paid", 8);

    const updated = await provider.updatePayment({ data, amount: 12, currency_code: "usd" });
    assert.equal(updated.status, "canceled");
    const kept = updated.data as SessionData & { void: { txHash: string } };
    assert.equal(kept.paymentAddress, data.paymentAddress);
    assert.equal(typeof kept.void.txHash, "string");
    await receiver.event("invoice.voided", "payses_repriced_paid");
    assert.equal(await balanceOf(payer), start);
    assert.deepEqual(await invoicesOf("payses_repriced_paid"), ["cancelled"]);
  });

  test("re-priced partly paid: the part goes back, the session canceled", async () => {
    const data = (await provider.initiatePayment({
      amount: 10, currency_code: "usd", data: { session_id: "payses_repriced_part" },
    })).data as SessionData;
    const wallet = anvilAccount(ready, 7);
    const payer = await wallet.getAddress();
    const start = await balanceOf(payer);
    await (await tusd(ready, wallet).transfer(data.paymentAddress, 4_000_000n)).wait();
    assert.equal((await provider.authorizePayment({ data })).status, "requires_more");

    const updated = await provider.updatePayment({ data, amount: 12, currency_code: "usd" });
    assert.equal(updated.status, "canceled");
    assert.equal(typeof (updated.data as { refund: { txHash: string } }).refund.txHash, "string");
    await receiver.event("invoice.refunded", "payses_repriced_part");
    assert.equal(await balanceOf(payer), start);
    assert.deepEqual(await invoicesOf("payses_repriced_part"), []);
  });

  test("unpaid: a delete cancels the invoice; a new total is a new invoice, the old cancelled", async () => {
    const dropped = (await provider.initiatePayment({
      amount: 10, currency_code: "usd", data: { session_id: "payses_deleted_unpaid" },
    })).data as SessionData;
    assert.deepEqual((await provider.deletePayment({ data: dropped })).data,
      { ...dropped, status: "cancelled" });
    const cancelled = await owner.invoices.status(dropped.paymentAddress);
    assert.equal(cancelled.status, "cancelled");
    assert.equal(cancelled.voidedAt ?? null, null);

    const data = (await provider.initiatePayment({
      amount: 10, currency_code: "usd", data: { session_id: "payses_repriced_unpaid" },
    })).data as SessionData;
    const updated = await provider.updatePayment({ data, amount: 12, currency_code: "usd" });
    assert.equal(updated.status, "pending");
    const repriced = updated.data as SessionData;
    assert.notEqual(repriced.paymentAddress, data.paymentAddress);
    assert.equal(repriced.amount, "12");
    assert.equal((await owner.invoices.status(repriced.paymentAddress)).fiat?.amount, "12");
    assert.equal((await owner.invoices.status(data.paymentAddress)).status, "cancelled");
    assert.deepEqual(await invoicesOf("payses_repriced_unpaid"), ["pending"]);
  });
});
