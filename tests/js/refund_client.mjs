#!/usr/bin/env node
// An owner's back end refunding a payer: signs the factory's EIP-712 Refund with ethers.js
// and sends it to POST /integration/invoices/refund-meta with fetch, in either auth mode.
//
//   node tests/js/refund_client.mjs <baseUrl> <privateKey> <factory> <salt> <mode> <body>
//
// <mode>: "signature" (EIP-191 request signature) or "apikey:<key>".
// <body>: the JSON body without "signature"; "tokenAddress" left out means the invoice's
// token, which the Refund then names by the extra field "invoiceToken" (removed before
// sending; null = native).
// Prints {"status", "body"}.
import { Wallet, ZeroAddress } from "ethers";

const [baseUrl, privateKey, factory, salt, mode, bodyJson] = process.argv.slice(2);
if (bodyJson === undefined) {
  console.error("usage: refund_client.mjs <baseUrl> <privateKey> <factory> <salt> <mode> <body>");
  process.exit(2);
}
const wallet = new Wallet(privateKey);
const { invoiceToken, ...body } = JSON.parse(bodyJson);
const token = "tokenAddress" in body ? body.tokenAddress : invoiceToken;

const domain = { name: "PaymentFactory", version: "1", chainId: BigInt(body.chainId), verifyingContract: factory };
const types = {
  Refund: [
    { name: "user", type: "address" },
    { name: "salt", type: "bytes32" },
    { name: "token", type: "address" },
    { name: "to", type: "address" },
    { name: "amount", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
};
body.signature = await wallet.signTypedData(domain, types, {
  user: wallet.address,
  salt,
  token: token ?? ZeroAddress,
  to: body.to,
  amount: BigInt(body.amountRaw),
  nonce: BigInt(body.nonce),
  deadline: BigInt(body.deadline),
});

const headers = { "content-type": "application/json" };
if (mode.startsWith("apikey:")) {
  headers["x-service-api-key"] = mode.slice("apikey:".length);
} else {
  const { ownerAddress, ...payload } = body;
  const timestamp = Date.now();
  const canonical = JSON.stringify({ action: "invoice.refund", ownerAddress, timestamp, payload });
  headers["x-service-signature"] = await wallet.signMessage(`Service API Request Signature\n${canonical}`);
  headers["x-service-timestamp"] = String(timestamp);
}
const response = await fetch(`${baseUrl}/integration/invoices/refund-meta`, {
  method: "POST",
  headers,
  body: JSON.stringify(body),
});
console.log(JSON.stringify({ status: response.status, body: await response.json() }));
