#!/usr/bin/env node
// Sign the factory's Refund EIP-712 message with ethers.js, for the interop test.
//
//   node tests/js/sign_refund.mjs <privateKey> <chainId> <factory> <salt> <token> <to>
//                                 <amount> <nonce> <deadline>
//
// Prints {"signer", "digest", "signature"}.
import { Wallet, TypedDataEncoder } from "ethers";

const [privateKey, chainId, factory, salt, token, to, amount, nonce, deadline] =
  process.argv.slice(2);
if (deadline === undefined) {
  console.error("usage: sign_refund.mjs <privateKey> <chainId> <factory> <salt> <token> <to> <amount> <nonce> <deadline>");
  process.exit(2);
}

const wallet = new Wallet(privateKey);
const domain = { name: "PaymentFactory", version: "1", chainId: BigInt(chainId), verifyingContract: factory };
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
const refund = {
  user: wallet.address,
  salt,
  token,
  to,
  amount: BigInt(amount),
  nonce: BigInt(nonce),
  deadline: BigInt(deadline),
};

console.log(JSON.stringify({
  signer: wallet.address,
  digest: TypedDataEncoder.hash(domain, types, refund),
  signature: await wallet.signTypedData(domain, types, refund),
}));
