// The client's side of the wire without the service: what it sends and signs (checked by a
// local HTTP server that records requests), when it tries again, and webhook verification
// (checked with node:crypto's own HMAC).
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { once } from "node:events";
import http from "node:http";
import { after, before, beforeEach, describe, test } from "node:test";

import { Wallet, verifyMessage } from "ethers";

import {
  ApiError,
  ChainUnavailable,
  Client,
  RateLimited,
  ServiceUnreachable,
  WebhookVerificationError,
  requestMessage,
  webhooks,
} from "../src/index.js";

// anvil account 0: the test vector of docs/integration/authentication.md (a public test key).
const KEY0 = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
const OWNER0 = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";

test("the signed message is the canonical JSON (the test vector of the authentication docs)", async () => {
  const message = requestMessage("invoice.create", OWNER0, 1760000000000,
    { chainId: 31337, amount: "1.5", invoiceId: "order-1" });
  assert.equal(message, 'Service API Request Signature\n{"action":"invoice.create",' +
    '"ownerAddress":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","timestamp":1760000000000,' +
    '"payload":{"chainId":31337,"amount":"1.5","invoiceId":"order-1"}}');
  assert.equal(await new Wallet(KEY0).signMessage(message),
    "0x2f9d1ea8828f958b4665ab2a6801cde01d41ea5334d98b7fb35abfb1c02cbea33beff295b1ca80fdc" +
    "32b611b4471967304793bbb4f1708c105c915300ee24adb1c");
});

/** A local HTTP server answering from a script of { status, body } and recording requests. */
let server;
let requests;
let script;

before(async () => {
  server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      requests.push({ method: request.method, url: request.url, headers: request.headers,
        body: Buffer.concat(chunks).toString() });
      const { status, body, headers = {} } = script.shift() ?? { status: 200, body: {} };
      const text = typeof body === "string" ? body : JSON.stringify(body);
      response.writeHead(status, { "content-type": "application/json", ...headers }).end(text);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
});

after(() => new Promise((resolve) => server.close(resolve)));

beforeEach(() => {
  requests = [];
  script = [];
});

function client(options = {}) {
  return new Client({ baseUrl: `http://127.0.0.1:${server.address().port}/`, privateKey: KEY0,
    backoffS: 0.01, ...options });
}

const unavailable = { status: 503, body: { error: { code: "chain_unavailable", message: "down" } } };
const invoice = { invoiceId: "order-1", paymentAddress: OWNER0, status: "pending" };

describe("what is sent and signed", () => {
  test("POST: the body as sent, ownerAddress first, signed without ownerAddress", async () => {
    script.push({ status: 201, body: invoice });
    const created = await client().invoices.create({ chainId: 31337, amount: "1.5",
      invoiceId: "order-1", tokenAddress: null, description: undefined, metadata: { n: 0.1 } });
    assert.equal(created.created, true);
    const [sent] = requests;
    assert.equal(sent.url, "/integration/invoices");
    assert.equal(sent.body, '{"ownerAddress":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",' +
      '"chainId":31337,"amount":"1.5","invoiceId":"order-1","metadata":{"n":0.1}}');
    const { ownerAddress, ...payload } = JSON.parse(sent.body);
    const timestamp = Number(sent.headers["x-service-timestamp"]);
    assert.ok(Math.abs(timestamp - Date.now()) < 5000);
    const signer = verifyMessage(requestMessage("invoice.create", ownerAddress, timestamp, payload),
      sent.headers["x-service-signature"]);
    assert.equal(signer, OWNER0);
    assert.equal(created.requestSignature, sent.headers["x-service-signature"]);
    assert.equal(sent.headers["x-service-api-key"], undefined);
  });

  test("GET/DELETE: query in order, every value signed as a string", async () => {
    script.push({ status: 200, body: { deleted: true, invoiceId: "123", chainId: 31337 } });
    await client().invoices.delete(31337, "123");
    const [sent] = requests;
    assert.equal(sent.method, "DELETE");
    assert.equal(sent.url, `/integration/invoices?ownerAddress=${OWNER0}&chainId=31337&invoiceId=123`);
    const message = requestMessage("invoice.delete", OWNER0,
      Number(sent.headers["x-service-timestamp"]), { chainId: "31337", invoiceId: "123" });
    assert.equal(verifyMessage(message, sent.headers["x-service-signature"]), OWNER0);
  });

  test("API key mode sends the key and no signature; each timestamp is used once", async () => {
    const keyed = client({ privateKey: undefined, ownerAddress: OWNER0, apiKey: "sk_test" });
    script.push({ status: 200, body: { items: [], total: 0, page: 1, limit: 20 } });
    await keyed.invoices.page({ paid: true, chainId: 31337 });
    assert.equal(requests[0].headers["x-service-api-key"], "sk_test");
    assert.equal(requests[0].headers["x-service-signature"], undefined);
    assert.equal(requests[0].url,
      `/integration/invoices?ownerAddress=${OWNER0}&paid=true&chainId=31337&page=1&limit=20`);
    assert.equal(JSON.stringify(keyed).includes("sk_test"), false);

    const signed = client();
    await Promise.all([signed.fees.get(1), signed.fees.get(1), signed.fees.get(1)]);
    const stamps = requests.slice(1).map((r) => r.headers["x-service-timestamp"]);
    assert.equal(new Set(stamps).size, 3);
  });

  test("a float amount is refused before anything is sent", async () => {
    await assert.rejects(client().invoices.create({ chainId: 1, amount: 1.5 }), TypeError);
    assert.equal(requests.length, 0);
  });

  test("a bigint amount (raw units in this SDK) is refused: amount is in token units",
    async () => {
      const refused = await client().invoices.create({ chainId: 1, amount: 10000000000000000n })
        .catch((e) => e);
      assert.ok(refused instanceof TypeError);
      assert.match(refused.message, /token's units.*bigint means raw units/);
      assert.equal(requests.length, 0);
    });

  test("raw amounts and nonces arrive as bigints, token amounts stay strings", async () => {
    script.push({ status: 200, body: { invoice: { ...invoice, amount: "12.5",
      requiredRaw: "12500000000000000000", balanceRaw: "0", metaBalance: "0",
      refunds: [{ amountRaw: "1", to: OWNER0 }] } } });
    script.push({ status: 200, body: { feeBps: 0, payoutAddress: null, nonce: "7" } });
    const found = await client().invoices.status(OWNER0);
    assert.deepEqual([found.amount, found.requiredRaw, found.balanceRaw, found.metaBalance],
      ["12.5", 12500000000000000000n, 0n, "0"]);
    assert.equal(found.refunds[0].amountRaw, 1n);
    assert.equal((await client().fees.get(1)).nonce, 7n);
  });

  test("an id in the path or in a PATCH's query is signed as the payload's first key",
    async () => {
      script.push({ status: 200, body: {} }, { status: 200, body: {} });
      const signed = client();
      await signed.events.get("ev/1");
      await signed.webhookEndpoints.update("ep-1", { enabled: true });
      const [get, patch] = requests;
      assert.equal(get.url, `/integration/events/ev%2F1?ownerAddress=${OWNER0}`);
      assert.equal(patch.url, "/integration/webhook-endpoints?id=ep-1");
      assert.equal(patch.body, `{"ownerAddress":"${OWNER0}","enabled":true}`);
      const signer = (sent, action, payload) => verifyMessage(
        requestMessage(action, OWNER0, Number(sent.headers["x-service-timestamp"]), payload),
        sent.headers["x-service-signature"]);
      assert.equal(signer(get, "event.get", { id: "ev/1" }), OWNER0);
      assert.equal(signer(patch, "webhook_endpoint.update", { id: "ep-1", enabled: true }), OWNER0);
    });

  test("the public routes go without a credential or ownerAddress", async () => {
    script.push({ status: 503, body: { ready: false, checks: { database: "error: x" } } });
    const answer = await client({ apiKey: "sk_x", privateKey: undefined, ownerAddress: OWNER0 })
      .public.ready();
    assert.deepEqual(answer, { ready: false, checks: { database: "error: x" } });
    const [sent] = requests;
    assert.equal(sent.url, "/readyz");
    assert.equal(sent.headers["x-service-api-key"], undefined);
    assert.equal(sent.headers["x-service-signature"], undefined);
  });
});

describe("retries", () => {
  test("an idempotent call is tried again after 5xx, with a fresh signature", async () => {
    script.push(unavailable, unavailable, { status: 200, body: { invoice } });
    const found = await client().invoices.status(OWNER0);
    assert.deepEqual(found, invoice);
    assert.equal(requests.length, 3);
    assert.equal(new Set(requests.map((r) => r.headers["x-service-timestamp"])).size, 3);
  });

  test("a create without invoiceId is not (a retry could make a second invoice)", async () => {
    script.push(unavailable, { status: 201, body: invoice });
    const error = await client().invoices.create({ chainId: 1, amount: "1" }).catch((e) => e);
    assert.ok(error instanceof ChainUnavailable);
    assert.deepEqual([error.status, error.code, error.message], [503, "chain_unavailable", "down"]);
    assert.equal(requests.length, 1);
  });

  test("a create with invoiceId is, up to maxRetries", async () => {
    script.push(unavailable, unavailable, unavailable);
    const error = await client({ maxRetries: 2 }).invoices
      .create({ chainId: 1, amount: "1", invoiceId: "x" }).catch((e) => e);
    assert.ok(error instanceof ChainUnavailable);
    assert.equal(requests.length, 3);
  });

  test("4xx answers are final; 429 carries retryAfterS", async () => {
    script.push({ status: 429, body: { error: { code: "rate_limited", message: "slow down",
      details: { retryAfterS: 7 } } }, headers: { "retry-after": "7" } });
    const error = await client().invoices.status(OWNER0).catch((e) => e);
    assert.ok(error instanceof RateLimited);
    assert.equal(error.retryAfterS, 7);
    assert.equal(requests.length, 1);
  });

  test("a replayed timestamp is tried once more with a new one, for any call", async () => {
    const replayed = { status: 401, body: { error: { code: "replayed_request", message: "r" } } };
    script.push(replayed, { status: 201, body: { id: "k", apiKey: "sk_x", label: null } });
    const issued = await client().apiKeys.create();
    assert.equal(issued.apiKey, "sk_x");
    assert.equal(requests.length, 2);
    assert.notEqual(requests[0].headers["x-service-timestamp"],
      requests[1].headers["x-service-timestamp"]);
  });

  test("unknown codes and bodies that are not the error shape", async () => {
    script.push({ status: 418, body: { error: { code: "teapot", message: "short and stout" } } },
      { status: 502, body: "<html>bad gateway</html>" });
    const teapot = await client().apiKeys.create().catch((e) => e);
    assert.equal(teapot.constructor, ApiError);
    assert.deepEqual([teapot.status, teapot.code, teapot.message], [418, "teapot", "short and stout"]);
    const gateway = await client({ maxRetries: 0 }).invoices.status(OWNER0).catch((e) => e);
    assert.deepEqual([gateway.status, gateway.code], [502, "http_error"]);
  });

  test("no answer at all: ServiceUnreachable after the retries", async () => {
    const closed = http.createServer().listen(0, "127.0.0.1");
    await once(closed, "listening");
    const { port } = closed.address();
    await new Promise((resolve) => closed.close(resolve));
    let attempts = 0;
    const offline = client({
      baseUrl: `http://127.0.0.1:${port}`, maxRetries: 2,
      fetch: (url, init) => { attempts += 1; return fetch(url, init); },
    });
    const error = await offline.invoices.status(OWNER0).catch((e) => e);
    assert.ok(error instanceof ServiceUnreachable);
    assert.equal(attempts, 3);
  });
});

describe("webhooks.verify", () => {
  const body = '{"ownerAddress":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","status":"paid"}';
  const now = 1_800_000_000;
  const mac = (secret, t, raw = body) =>
    createHmac("sha256", secret).update(`${t}.${raw}`).digest("hex");

  test("a signed delivery verifies with any one of the active secrets", () => {
    const header = `t=${now},v1=${mac("whsec_old", now)},v1=${mac("whsec_new", now)}`;
    for (const signingSecret of ["whsec_old", "whsec_new"]) {
      const payload = webhooks.verify({ "X-Service-Webhook-Signature": header }, body,
        { signingSecret, nowS: now + 10 });
      assert.equal(payload.status, "paid");
    }
    const asHeaders = new Headers({ "x-service-webhook-signature": header });
    assert.equal(webhooks.verify(asHeaders, Buffer.from(body),
      { signingSecrets: ["whsec_other", "whsec_new"], nowS: now }).status, "paid");
  });

  test("a wrong secret, an old timestamp, a changed body or a bad header are refused", () => {
    const header = { "x-service-webhook-signature": `t=${now},v1=${mac("whsec_a", now)}` };
    const cases = [
      [header, body, { signingSecret: "whsec_b", nowS: now }],
      [header, body, { signingSecret: "whsec_a", nowS: now + 301 }],
      [header, body, { signingSecret: "whsec_a", nowS: now - 301 }],
      [header, body.replace("paid", "paib"), { signingSecret: "whsec_a", nowS: now }],
      [{ "x-service-webhook-signature": `v1=${mac("whsec_a", now)}` }, body,
        { signingSecret: "whsec_a", nowS: now }],
      [{}, body, { signingSecret: "whsec_a", nowS: now }],
    ];
    for (const [headers, raw, options] of cases) {
      assert.throws(() => webhooks.verify(headers, raw, options), WebhookVerificationError);
    }
    assert.equal(webhooks.verify(header, body,
      { signingSecret: "whsec_a", nowS: now + 600, toleranceS: 600 }).status, "paid");
  });

  test("every proof given must hold, and the owner must be the delivery's", () => {
    const headers = { "x-service-api-key": "sk_right",
      "x-service-webhook-signature": `t=${now},v1=${mac("whsec_a", now)}` };
    assert.equal(webhooks.verify(headers, body,
      { apiKey: "sk_right", signingSecret: "whsec_a", nowS: now, ownerAddress: OWNER0 }).status, "paid");
    assert.throws(() => webhooks.verify(headers, body,
      { apiKey: "sk_right", signingSecret: "whsec_b", nowS: now }), WebhookVerificationError);
    assert.throws(() => webhooks.verify(headers, body,
      { apiKey: "sk_wrong", signingSecret: "whsec_a", nowS: now }), WebhookVerificationError);
    assert.throws(() => webhooks.verify(headers, body, { apiKey: "sk_right",
      ownerAddress: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" }), WebhookVerificationError);

    const envelope = JSON.stringify({ id: "e1", type: "invoice.expired", createdAt: 1,
      data: { invoice: { ownerAddress: OWNER0.toLowerCase(), status: "expired" } } });
    const signed = { "x-service-webhook-signature": `t=${now},v1=${mac("whsec_a", now, envelope)}` };
    const event = webhooks.verify(signed, envelope,
      { signingSecret: "whsec_a", nowS: now, ownerAddress: OWNER0 });
    assert.deepEqual([event.type, event.data.invoice.status], ["invoice.expired", "expired"]);
  });

  test("a signature-mode delivery: the creation signature and its timestamp", () => {
    const headers = { "x-service-signature": "0xabc", "x-service-timestamp": "1760000000000" };
    const options = { ownerAddress: OWNER0, requestSignature: ["0xold", "0xabc"] };
    assert.equal(webhooks.verify(headers, body, options).status, "paid");
    assert.throws(() => webhooks.verify({ "x-service-signature": "0xabc" }, body, options),
      WebhookVerificationError);
    assert.throws(() => webhooks.verify(headers, body, { ...options, requestSignature: "0xabd" }),
      WebhookVerificationError);
    assert.throws(() => webhooks.verify(headers, body, { requestSignature: "0xabc" }), TypeError);
  });

  test("the body must be raw, and a credential must be named", () => {
    assert.throws(() => webhooks.verify({}, JSON.parse(body), { apiKey: "k" }), TypeError);
    assert.throws(() => webhooks.verify({}, body, {}), TypeError);
    assert.throws(() => webhooks.verify({}, body, { ownerAddress: OWNER0 }), TypeError);
  });
});
