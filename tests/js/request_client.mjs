#!/usr/bin/env node
// A JavaScript integrator: signs requests with ethers.js (EIP-191 personal_sign over the
// canonical message of docs/integration/authentication.md) and calls the API with fetch.
//
//   node tests/js/request_client.mjs <baseUrl> <privateKey> <chainId>
//
// Creates an invoice (POST), looks it up (GET) and deletes it (DELETE); prints one JSON
// object with each response's status and body.
import { Wallet } from "ethers";

const [baseUrl, privateKey, chainId] = process.argv.slice(2);
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

async function call(method, path, action, params) {
  const { ownerAddress, ...payload } = params;
  const headers = await signedHeaders(action, payload);
  let url = `${baseUrl}${path}`;
  const init = { method, headers };
  if (method === "POST") {
    init.body = JSON.stringify(params);
    headers["content-type"] = "application/json";
  } else {
    url += `?${new URLSearchParams(params)}`;
  }
  const response = await fetch(url, init);
  return { status: response.status, body: await response.json() };
}

const created = await call("POST", "/integration/invoices", "invoice.create", {
  ownerAddress: owner,
  chainId: Number(chainId),
  amount: "12.5",
  invoiceId: "js-1",
  description: "Paid from ethers.js ✓",
  metadata: { order: { id: 7, items: ["a", "b"] } },
});
const status = await call("GET", "/integration/invoices/status", "invoice.status", {
  ownerAddress: owner,
  paymentAddress: created.body.paymentAddress,
});
const removed = await call("DELETE", "/integration/invoices", "invoice.delete", {
  ownerAddress: owner,
  chainId: String(chainId),
  invoiceId: "js-1",
});
console.log(JSON.stringify({ owner, created, status, removed }));
