#!/usr/bin/env node
// Pay an x402 resource with the official npm client (@x402/fetch with @x402/evm's exact
// scheme), signing with a private key through viem, as a program would.
//
//   node tests/js/x402_fetch.mjs <privateKey> <url> <network> <asset> <maxAmount>
//
// The asset is not one of the library's defaults: the payer allows it, with a cap in raw
// units, as a program would.
// Prints {"status", "body", "paymentResponse"} (the PAYMENT-RESPONSE header as sent).
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { registerExactEvmScheme } from "@x402/evm/exact/client";
import { privateKeyToAccount } from "viem/accounts";

const [privateKey, url, network, asset, maxAmount] = process.argv.slice(2);
if (maxAmount === undefined) {
  console.error("usage: x402_fetch.mjs <privateKey> <url> <network> <asset> <maxAmount>");
  process.exit(2);
}
const client = new x402Client().setSpendControls({
  allowedAssets: [{ network, asset, maxAmountPerPayment: maxAmount }],
});
registerExactEvmScheme(client, { signer: privateKeyToAccount(privateKey) });
const payingFetch = wrapFetchWithPayment(fetch, client);
const response = await payingFetch(url, { method: "GET" });
const text = await response.text();
let body = text;
try { body = JSON.parse(text); } catch { /* not JSON */ }
console.log(JSON.stringify({
  status: response.status,
  body,
  paymentResponse: response.headers.get("PAYMENT-RESPONSE"),
}));
