// @invoicing/client against a real `invoicing dev` (anvil, the API, every worker), in both
// authentication modes, with real payments on anvil and real webhook deliveries.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Wallet, getAddress, parseEther } from "ethers";

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
      assert.equal(invoice.requiredRaw, "12500000");
      assert.equal(invoice.ownerAddress, wallet.address);
      assert.equal(invoice.url, `${ready.base_url}/pay/${invoice.paymentAddress}`);

      await payToken(ready, anvilAccount(ready, 5), invoice.paymentAddress, "12.5");
      const paid = await keyed.invoices.status(invoice.paymentAddress);
      assert.equal(paid.status, "paid");
      assert.equal(paid.paid, true);
      assert.equal(paid.balanceRaw, "12500000");

      const delivery = await receiver.delivery("key-paid");
      const payload = webhooks.verify(delivery.headers, delivery.body, { apiKey: issued.apiKey });
      assert.equal(payload.status, "paid");
      assert.equal(payload.invoiceId, "order-1");
      assert.equal(payload.paymentAddress, invoice.paymentAddress);
      assert.equal(payload.balanceRaw, "12500000");
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
    assert.equal(paid.balanceRaw, "250000000000000000");

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
    assert.deepEqual(settingsOf(before), { feeBps: 0, payoutAddress: null, nonce: "0" });

    // The EIP-712 domain's factory: the one the service names, else the ready line's.
    const options = before.factory ? {} : { factory: ready.factory };
    const submitted = await signed.fees.setFee(ready.chain_id, 250, options);
    assert.equal(submitted.status, "submitted");
    assert.equal(submitted.nonce, "0");
    assert.equal(getAddress(submitted.ownerAddress), wallet.address);
    assert.match(submitted.txHash, /^0x[0-9a-f]{64}$/);
    await waitFor(async () => (await signed.fees.get(ready.chain_id)).nonce === "1", 20_000,
      "SetFee mined");

    const payout = Wallet.createRandom().address;
    const second = await signed.fees.setPayout(ready.chain_id, payout, options);
    assert.equal(second.nonce, "1");
    const settings = await waitFor(async () => {
      const read = await signed.fees.get(ready.chain_id);
      return read.nonce === "2" && read;
    }, 20_000, "SetPayout mined");
    assert.deepEqual(settingsOf(settings), { feeBps: 250, payoutAddress: payout, nonce: "2" });
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
      assert.equal(submitted.nonce, "1");  // signed again with the nonce read after the refusal
      const settings = await waitFor(async () => {
        const read = await client.fees.get(ready.chain_id);
        return read.nonce === "2" && read;
      }, 20_000, "both messages mined");
      assert.deepEqual(settingsOf(settings),
        { feeBps: 100, payoutAddress: wallet.address, nonce: "2" });
    });

  test("a fee over 500 bps is refused and nothing is relayed", async () => {
    const { signed } = await newOwner();
    const refused = await signed.fees.setFee(ready.chain_id, 501, { factory: ready.factory })
      .catch((e) => e);
    assert.ok(refused instanceof ApiError);
    assert.deepEqual([refused.status, refused.code], [400, "fee_too_high"]);
    assert.deepEqual(settingsOf(await signed.fees.get(ready.chain_id)),
      { feeBps: 0, payoutAddress: null, nonce: "0" });
  });
});
