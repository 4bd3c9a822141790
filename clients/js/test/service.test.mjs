// @invoicing/client against a real `invoicing dev` (anvil, the API, every worker), in both
// authentication modes, with real payments on anvil and real webhook deliveries.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { JsonRpcProvider, Wallet, getAddress, parseEther } from "ethers";

import {
  ApiError,
  Client,
  Forbidden,
  InvalidRequest,
  InvoiceExists,
  NotFound,
  Unauthorized,
  UnsupportedChain,
  UnsupportedToken,
  WebhookVerificationError,
  webhooks,
} from "../src/index.js";
import {
  anvilAccount,
  devService,
  payNative,
  payToken,
  waitFor,
  webhookReceiver,
} from "./support.mjs";

let service;
let ready;
let receiver;

before(async () => {
  service = await devService();
  ready = service.ready;
  receiver = await webhookReceiver();
});

after(async () => {
  await receiver?.close();
  await service?.stop();
});

/** The settings an owner controls (the service may also name its factory). */
function settingsOf({ feeBps, payoutAddress, nonce, factory }) {
  if (factory !== undefined) assert.equal(factory, ready.factory);
  return { feeBps, payoutAddress, nonce };
}

/** A fresh owner wallet with a signature-mode client and, through it, an API-key client. */
async function newOwner(label = "tests") {
  const wallet = Wallet.createRandom();
  const signed = new Client({ baseUrl: ready.base_url, privateKey: wallet.privateKey });
  const issued = await signed.apiKeys.create(label);
  const keyed = new Client({
    baseUrl: ready.base_url, ownerAddress: wallet.address, apiKey: issued.apiKey,
  });
  return { wallet, signed, keyed, issued };
}

describe("API key mode", () => {
  test("a TUSD invoice is created, paid on anvil, reported paid, and its webhook verifies",
    async () => {
      const { wallet, keyed, issued } = await newOwner();
      const invoice = await keyed.invoices.create({
        chainId: ready.chain_id,
        amount: "12.5",
        tokenAddress: ready.tokens.TUSD,
        invoiceId: "order-1",
        webhookUrl: receiver.url("key-paid"),
        description: "Two mugs ✓",
        metadata: { cart: [1, 2] },
      });
      assert.equal(invoice.created, true);
      assert.equal(invoice.requestSignature, null);
      assert.equal(invoice.status, "pending");
      assert.equal(invoice.requiredRaw, 12500000n);
      assert.equal(invoice.ownerAddress, wallet.address);
      assert.equal(invoice.url, `${ready.base_url}/pay/${invoice.paymentAddress}`);

      await payToken(ready, anvilAccount(ready, 5), invoice.paymentAddress, "12.5");
      const paid = await keyed.invoices.status(invoice.paymentAddress);
      assert.equal(paid.status, "paid");
      assert.equal(paid.paid, true);
      assert.equal(paid.balanceRaw, 12500000n);

      const delivery = await receiver.delivery("key-paid");
      const payload = webhooks.verify(delivery.headers, delivery.body, { apiKey: issued.apiKey });
      assert.equal(payload.status, "paid");
      assert.equal(payload.invoiceId, "order-1");
      assert.equal(payload.paymentAddress, invoice.paymentAddress);
      assert.equal(payload.balanceRaw, 12500000n);
      assert.throws(() => webhooks.verify(delivery.headers, delivery.body, { apiKey: "sk_other" }),
        WebhookVerificationError);
      const tampered = Buffer.from(delivery.body.toString().replace("12500000", "99"));
      assert.throws(() => webhooks.verify({}, tampered, { apiKey: issued.apiKey }),
        WebhookVerificationError);
    });

  test("an identical create returns the same invoice; a different one is refused, nothing changes",
    async () => {
      const { keyed } = await newOwner();
      const request = { chainId: ready.chain_id, amount: "3", invoiceId: "same" };
      const first = await keyed.invoices.create(request);
      const again = await keyed.invoices.create(request);
      assert.equal(again.created, false);
      assert.equal(again.paymentAddress, first.paymentAddress);

      const refused = await keyed.invoices.create({ ...request, amount: "4" }).catch((e) => e);
      assert.ok(refused instanceof InvoiceExists);
      assert.equal(refused.code, "invoice_exists");
      assert.equal(refused.status, 409);
      assert.equal((await keyed.invoices.status(first.paymentAddress)).amount, "3");
    });

  test("every error answer throws its own class with code, status and details", async () => {
    const { keyed, signed, wallet } = await newOwner();
    const chain = await keyed.invoices.create({ chainId: 999, amount: "1" }).catch((e) => e);
    assert.ok(chain instanceof UnsupportedChain && chain instanceof InvalidRequest);
    assert.deepEqual([chain.status, chain.code], [400, "unsupported_chain"]);

    const token = await keyed.invoices
      .create({ chainId: ready.chain_id, amount: "1", tokenAddress: wallet.address })
      .catch((e) => e);
    assert.ok(token instanceof UnsupportedToken);

    const amount = await keyed.invoices.create({ chainId: ready.chain_id, amount: "1e3" })
      .catch((e) => e);
    assert.ok(amount instanceof InvalidRequest);
    assert.equal(amount.code, "invalid_request");
    assert.equal(typeof amount.message, "string");

    const unknown = await keyed.invoices.status(Wallet.createRandom().address).catch((e) => e);
    assert.ok(unknown instanceof NotFound);
    assert.deepEqual([unknown.status, unknown.code], [404, "not_found"]);

    const other = await newOwner();
    const foreign = new Client({
      baseUrl: ready.base_url, ownerAddress: other.wallet.address,
      apiKey: (await signed.apiKeys.create()).apiKey,
    });
    const forbidden = await foreign.invoices.page().catch((e) => e);
    assert.ok(forbidden instanceof Forbidden);
    assert.equal(forbidden.status, 403);

    const badKey = new Client({ baseUrl: ready.base_url, ownerAddress: wallet.address,
      apiKey: "sk_not_a_key" });
    const denied = await badKey.invoices.create({ chainId: ready.chain_id, amount: "1" })
      .catch((e) => e);
    assert.ok(denied instanceof Unauthorized);
    assert.equal(denied.code, "unauthorized");
    const { total } = await keyed.invoices.page();
    assert.equal(total, 0);  // none of the refused creates made an invoice
  });

  test("list pages by itself, newest first, and takes the filters", async () => {
    const { keyed } = await newOwner();
    for (const id of ["a", "b", "c", "d", "e"]) {
      await keyed.invoices.create({ chainId: ready.chain_id, amount: "1", invoiceId: id });
    }
    const seen = [];
    for await (const invoice of keyed.invoices.list({ pageSize: 2 })) seen.push(invoice.invoiceId);
    assert.deepEqual(seen, ["e", "d", "c", "b", "a"]);

    await keyed.invoices.delete(ready.chain_id, "c");
    const pending = [];
    for await (const invoice of keyed.invoices.list({ status: "pending", chainId: ready.chain_id,
      paid: false })) {
      pending.push(invoice.invoiceId);
    }
    assert.deepEqual(pending, ["e", "d", "b", "a"]);
    const one = await keyed.invoices.page({ invoiceId: "b", limit: 1 });
    assert.deepEqual([one.total, one.page, one.limit, one.items[0].invoiceId], [1, 1, 1, "b"]);
    await assert.rejects(keyed.invoices.list({ colour: "red" }).next(), TypeError);
  });
});

describe("signature mode", () => {
  test("a native invoice paid on anvil; its webhook carries the creation signature", async () => {
    const { wallet, signed } = await newOwner();
    const invoice = await signed.invoices.create({
      chainId: ready.chain_id,
      amount: "0.25",
      invoiceId: "123",  // all digits: still a string in the signed query of delete
      webhookUrl: receiver.url("signed-paid"),
    });
    assert.equal(invoice.created, true);
    assert.match(invoice.requestSignature, /^0x[0-9a-f]{130}$/);

    await payNative(anvilAccount(ready, 6), invoice.paymentAddress, parseEther("0.25"));
    const paid = await signed.invoices.status(invoice.paymentAddress);
    assert.equal(paid.status, "paid");
    assert.equal(paid.balanceRaw, 250000000000000000n);

    const delivery = await receiver.delivery("signed-paid");
    const payload = webhooks.verify(delivery.headers, delivery.body, {
      ownerAddress: wallet.address, requestSignature: invoice.requestSignature,
    });
    assert.equal(payload.status, "paid");
    assert.equal(payload.invoiceId, "123");
    assert.throws(() => webhooks.verify(delivery.headers, delivery.body, {
      ownerAddress: Wallet.createRandom().address, requestSignature: invoice.requestSignature,
    }), WebhookVerificationError);

    const removed = await signed.invoices.delete(ready.chain_id, "123");
    assert.deepEqual(removed, { deleted: true, invoiceId: "123", chainId: ready.chain_id });
    const after = await signed.invoices.status(invoice.paymentAddress);
    assert.equal(after.status, "paid");  // deleting a paid invoice keeps its status
  });

  test("deleting a pending invoice cancels it", async () => {
    const { signed } = await newOwner();
    const invoice = await signed.invoices.create({ chainId: ready.chain_id, amount: "1" });
    assert.equal(invoice.invoiceId, "1");  // numbered by the service
    await signed.invoices.delete(ready.chain_id, invoice.invoiceId);
    assert.equal((await signed.invoices.status(invoice.paymentAddress)).status, "cancelled");
    const again = await signed.invoices.delete(ready.chain_id, "no-such").catch((e) => e);
    assert.ok(again instanceof NotFound);
  });

  test("API keys: created, listed without secrets, revoked, then refused", async () => {
    const { wallet, signed, issued } = await newOwner("first");
    const second = await signed.apiKeys.create({ label: "second" });
    assert.match(second.apiKey, /^sk_/);
    const listed = await signed.apiKeys.list();
    assert.deepEqual(listed.map((key) => key.label).sort(), ["first", "second"]);
    assert.ok(listed.every((key) => !("apiKey" in key) && key.revokedAt === null));

    const revoked = await signed.apiKeys.revoke(second.id);
    assert.deepEqual([revoked.revoked, revoked.id], [true, second.id]);
    const keyed = new Client({ baseUrl: ready.base_url, ownerAddress: wallet.address,
      apiKey: second.apiKey });
    await assert.rejects(keyed.invoices.page(), Unauthorized);
    const still = new Client({ baseUrl: ready.base_url, ownerAddress: wallet.address,
      apiKey: issued.apiKey });
    assert.equal((await still.invoices.page()).total, 0);

    // API keys are managed in signature mode only.
    await assert.rejects(still.apiKeys.list(), Unauthorized);
  });

  test("a request signed by another wallet is refused", async () => {
    const { wallet } = await newOwner();
    const impostor = new Client({ baseUrl: ready.base_url, ownerAddress: wallet.address,
      signer: Wallet.createRandom() });
    const refused = await impostor.invoices.create({ chainId: ready.chain_id, amount: "1" })
      .catch((e) => e);
    assert.ok(refused instanceof Unauthorized);
    assert.equal(refused.code, "unauthorized");
  });
});

describe("fees", () => {
  test("setFee and setPayout are signed, relayed, and read back from the chain", async () => {
    const { wallet, signed } = await newOwner();
    const before = await signed.fees.get(ready.chain_id);
    assert.deepEqual(settingsOf(before), { feeBps: 0, payoutAddress: null, nonce: 0n });

    // The EIP-712 domain's factory: the one the service names, else the ready line's.
    const options = before.factory ? {} : { factory: ready.factory };
    const submitted = await signed.fees.setFee(ready.chain_id, 250, options);
    assert.equal(submitted.status, "submitted");
    assert.equal(submitted.nonce, 0n);
    assert.equal(getAddress(submitted.ownerAddress), wallet.address);
    assert.match(submitted.txHash, /^0x[0-9a-f]{64}$/);
    await waitFor(async () => (await signed.fees.get(ready.chain_id)).nonce === 1n, 20_000,
      "SetFee mined");

    const payout = Wallet.createRandom().address;
    const second = await signed.fees.setPayout(ready.chain_id, payout, options);
    assert.equal(second.nonce, 1n);
    const settings = await waitFor(async () => {
      const read = await signed.fees.get(ready.chain_id);
      return read.nonce === 2n && read;
    }, 20_000, "SetPayout mined");
    assert.deepEqual(settingsOf(settings), { feeBps: 250, payoutAddress: payout, nonce: 2n });
  });

  test("an API-key client signs with the owner's wallet; a nonce taken meanwhile is re-read once",
    async () => {
      const { wallet, signed } = await newOwner();
      // The first set-meta request goes out only after another message took its nonce.
      let raced = false;
      const client = new Client({
        baseUrl: ready.base_url,
        ownerAddress: wallet.address,
        apiKey: (await signed.apiKeys.create()).apiKey,
        fetch: async (url, init) => {
          if (!raced && String(url).endsWith("/integration/fees/set-meta")) {
            raced = true;
            await signed.fees.setPayout(ready.chain_id, wallet.address, { factory: ready.factory });
          }
          return fetch(url, init);
        },
      });
      const submitted = await client.fees.setFee(ready.chain_id, 100,
        { signer: wallet, factory: ready.factory });
      assert.equal(raced, true);
      assert.equal(submitted.nonce, 1n);  // signed again with the nonce read after the refusal
      const settings = await waitFor(async () => {
        const read = await client.fees.get(ready.chain_id);
        return read.nonce === 2n && read;
      }, 20_000, "both messages mined");
      assert.deepEqual(settingsOf(settings),
        { feeBps: 100, payoutAddress: wallet.address, nonce: 2n });
    });

  test("a fee over 500 bps is refused and nothing is relayed", async () => {
    const { signed } = await newOwner();
    const refused = await signed.fees.setFee(ready.chain_id, 501, { factory: ready.factory })
      .catch((e) => e);
    assert.ok(refused instanceof ApiError);
    assert.deepEqual([refused.status, refused.code], [400, "fee_too_high"]);
    assert.deepEqual(settingsOf(await signed.fees.get(ready.chain_id)),
      { feeBps: 0, payoutAddress: null, nonce: 0n });
  });
});

describe("notifications, settings, escrows and the public routes", () => {
  test("a signing secret and an endpoint get a ping; the event is listed, read and redelivered",
    async () => {
      const { keyed, signed } = await newOwner();
      const secret = await keyed.webhookSecrets.create();
      assert.match(secret.secret, /^whsec_/);
      assert.deepEqual((await keyed.webhookSecrets.list()).map((item) => item.id), [secret.id]);
      const endpoint = await keyed.webhookEndpoints.create({
        url: receiver.url("js-events"), events: ["invoice.paid"], description: "shop",
      });
      assert.deepEqual([endpoint.enabled, endpoint.events, endpoint.description],
        [true, ["invoice.paid"], "shop"]);
      const updated = await keyed.webhookEndpoints.update(endpoint.id, { description: "shop 2" });
      assert.deepEqual([updated.id, updated.description], [endpoint.id, "shop 2"]);
      assert.deepEqual((await keyed.webhookEndpoints.list()).map((item) => item.description),
        ["shop 2"]);

      const ping = await keyed.webhookEndpoints.test(endpoint.id);
      assert.equal(ping.endpointId, endpoint.id);
      const [first] = await receiver.deliveries("js-events", 1);
      const envelope = webhooks.verify(first.headers, first.body, { signingSecret: secret.secret });
      assert.deepEqual([envelope.id, envelope.type], [ping.eventId, "ping"]);

      const listed = [];
      for await (const event of keyed.events.list({ type: "ping", pageSize: 1 })) listed.push(event.id);
      assert.deepEqual(listed, [ping.eventId]);
      const detail = await keyed.events.get(ping.eventId);
      assert.equal(detail.event.id, ping.eventId);
      assert.deepEqual(detail.deliveries.map((item) => item.endpointId), [endpoint.id]);
      const again = await keyed.events.redeliver(ping.eventId, { endpointId: endpoint.id });
      assert.equal(again.eventId, ping.eventId);
      const [, second] = await receiver.deliveries("js-events", 2);
      const firstPage = await signed.events.get(ping.eventId, { limit: 1 });
      assert.deepEqual([firstPage.deliveries.length, firstPage.hasMore], [1, true]);
      const lastPage = await keyed.events.get(ping.eventId, { after: firstPage.deliveries[0].id });
      assert.deepEqual([lastPage.deliveries.map((item) => item.id), lastPage.hasMore],
        [[again.deliveryId], false]);
      assert.equal(webhooks.verify(second.headers, second.body, { signingSecret: secret.secret }).id,
        ping.eventId);

      assert.deepEqual(await keyed.webhookEndpoints.delete(endpoint.id),
        { deleted: true, id: endpoint.id });
      assert.deepEqual(await keyed.webhookEndpoints.list(), []);
      const revoked = await keyed.webhookSecrets.revoke(secret.id);
      assert.deepEqual([revoked.revoked, revoked.id], [true, secret.id]);
      const gone = await keyed.events.get("no-such-event").catch((e) => e);
      assert.ok(gone instanceof NotFound);
    });

  test("settings, the escrow export, an invoice's webhook log and the public routes",
    async () => {
      const { signed } = await newOwner();
      const defaults = { underpaymentToleranceBps: 0, captureWindowS: 604800,
        captureAtWindowEnd: true, reportingCurrency: null };
      assert.deepEqual(await signed.settings.get(), { webhookApiKeyHeader: true, ...defaults });
      assert.deepEqual(await signed.settings.update({ webhookApiKeyHeader: false }),
        { webhookApiKeyHeader: false, ...defaults });
      const invoice = await signed.invoices.create({ chainId: ready.chain_id, amount: "0.01" });
      const lines = await signed.escrows.export(ready.chain_id);
      assert.deepEqual(lines.map((line) => [line.paymentAddress, line.salt]),
        [[invoice.paymentAddress, invoice.salt]]);
      assert.deepEqual(await signed.invoices.webhooks(invoice.paymentAddress),
        { paymentAddress: invoice.paymentAddress, events: [], items: [] });

      assert.deepEqual(await signed.public.health(), { status: "ok" });
      assert.equal((await signed.public.ready()).ready, true);
      const status = await signed.public.paymentStatus(invoice.paymentAddress);
      assert.deepEqual([status.requiredRaw, status.remainingRaw, status.remaining],
        [10n ** 16n, 10n ** 16n, "0.01"]);
      assert.match(await signed.public.paymentPage(invoice.paymentAddress), /<html lang="en"/);
      const arabic = await signed.public.paymentPage(invoice.paymentAddress, { lang: "ar" });
      assert.match(arabic, /<html lang="ar" dir="rtl">/);
    });

  test("a refund is signed, relayed and confirmed; a relayed SetFee needs no credential",
    async () => {
      const { wallet, signed } = await newOwner();
      const invoice = await signed.invoices.create({ chainId: ready.chain_id, amount: "0.25" });
      await payNative(anvilAccount(ready, 7), invoice.paymentAddress, parseEther("0.1"));
      // Partly paid, so still pending: a pending invoice takes no refund until it is cancelled.
      await signed.invoices.delete(ready.chain_id, invoice.invoiceId);
      const refundee = Wallet.createRandom().address;
      const refund = await signed.invoices.refund(invoice.paymentAddress, refundee,
        4n * 10n ** 16n, { factory: ready.factory });
      assert.deepEqual([refund.status, refund.nonce], ["submitted", 0n]);
      const refunded = await waitFor(async () => {
        const read = await signed.invoices.status(invoice.paymentAddress);
        return read.refunds?.[0]?.status === "confirmed" && read;
      }, 30_000, "the refund confirmed");
      assert.deepEqual([refunded.refunds[0].to, refunded.refunds[0].amountRaw],
        [refundee, 4n * 10n ** 16n]);
      const chain = new JsonRpcProvider(ready.rpc_url, undefined, { staticNetwork: true });
      assert.equal(await chain.getBalance(refundee), 4n * 10n ** 16n);
      chain.destroy();

      const deadline = Math.floor(Date.now() / 1000) + 600;
      const signature = await wallet.signTypedData(
        { name: "PaymentFactory", version: "1", chainId: ready.chain_id,
          verifyingContract: ready.factory },
        { SetFee: [{ name: "user", type: "address" }, { name: "feeBps", type: "uint256" },
          { name: "nonce", type: "uint256" }, { name: "deadline", type: "uint256" }] },
        { user: wallet.address, feeBps: 40, nonce: 1n, deadline });
      const relayed = await signed.public.relayFee({
        chainId: ready.chain_id, feeBps: 40, nonce: 1n, deadline, signature,
      });
      assert.deepEqual([relayed.status, relayed.nonce], ["submitted", 1n]);
      await waitFor(async () => (await signed.fees.get(ready.chain_id)).feeBps === 40, 20_000,
        "the relayed SetFee mined");
    });
});
