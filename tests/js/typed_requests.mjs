#!/usr/bin/env node
// A JavaScript integrator that keeps its values typed (numbers as numbers, booleans as
// booleans, strings as strings, an invoiceId "42" as a string) and signs them as it holds
// them with ethers.js; the URL carries them as URLSearchParams writes them.
//
//   node tests/js/typed_requests.mjs <baseUrl> <privateKey> <chainId> <tokenAddress>
//
// Calls every GET and DELETE route of signature mode, and a POST whose metadata holds
// numbers JSON.stringify writes differently from Python (1e-7, 1e+21, 10000000000000000).
// Prints one JSON object: each call's name → {status, body, payload}.
import { Wallet } from "ethers";

const [baseUrl, privateKey, chainIdText, token] = process.argv.slice(2);
const chainId = Number(chainIdText);
const wallet = new Wallet(privateKey);
const owner = wallet.address;
let lastTimestamp = 0;

async function signedHeaders(action, payload) {
  const timestamp = Math.max(Date.now(), lastTimestamp + 1);
  lastTimestamp = timestamp;
  const canonical = JSON.stringify({ action, ownerAddress: owner, timestamp, payload });
  const signature = await wallet.signMessage(`Service API Request Signature\n${canonical}`);
  return { "x-service-signature": signature, "x-service-timestamp": String(timestamp) };
}

async function call(method, path, action, payload) {
  const headers = await signedHeaders(action, payload);
  let url = `${baseUrl}${path}`;
  const init = { method, headers };
  if (method === "POST") {
    init.body = JSON.stringify({ ownerAddress: owner, ...payload });
    headers["content-type"] = "application/json";
  } else {
    url += `?${new URLSearchParams({ ownerAddress: owner, ...payload })}`;
  }
  const response = await fetch(url, init);
  const text = await response.text();
  let body = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, body, payload };
}

const results = {};
results.create = await call("POST", "/integration/invoices", "invoice.create", {
  chainId,
  amount: "2",
  invoiceId: "42",
  tokenAddress: token,
  metadata: { tiny: 1e-7, huge: 1e21, round: 1e16, tenth: 0.1, whole: 3.0, neg: -2.5e-9 },
});
const paymentAddress = results.create.body.paymentAddress;
results.issued = await call("POST", "/integration/api-keys", "apikey.create", { label: "js" });
results.status = await call("GET", "/integration/invoices/status", "invoice.status", {
  paymentAddress,
});
results.list = await call("GET", "/integration/invoices", "invoice.list", {
  chainId,
  status: "pending",
  paid: false,
  tokenAddress: token,
  invoiceId: "42",
  page: 1,
  limit: 5,
  dateFrom: 0,
  dateTo: Date.now() + 60_000,
});
results.webhooks = await call("GET", "/integration/invoices/webhooks", "invoice.webhooks", {
  paymentAddress,
});
results.fees = await call("GET", "/integration/fees", "fee.get", { chainId });
results.export = await call("GET", "/integration/escrows/export", "escrow.export", { chainId });
results.keys = await call("GET", "/integration/api-keys", "apikey.list", {});
results.revoke = await call("DELETE", "/integration/api-keys", "apikey.revoke", {
  id: results.issued.body.id,
});
results.delete = await call("DELETE", "/integration/invoices", "invoice.delete", {
  chainId,
  invoiceId: "42",
});
results.deleteAgain = await call("DELETE", "/integration/invoices", "invoice.delete", {
  chainId,
  invoiceId: "42",
});
console.log(JSON.stringify({ owner, results }));
