#!/usr/bin/env node
// Sign the factory's SetFee and SetPayout EIP-712 messages with ethers.js, for the interop test.
//
//   node tests/js/sign_meta.mjs <privateKey> <chainId> <factory> <feeBps> <feeNonce>
//                               <payout> <payoutNonce> <deadline>
//
// Prints {"signer", "setFee": {"digest", "signature"}, "setPayout": {"digest", "signature"}}.
import { Wallet, TypedDataEncoder } from "ethers";

const [privateKey, chainId, factory, feeBps, feeNonce, payout, payoutNonce, deadline] =
  process.argv.slice(2);
if (deadline === undefined) {
  console.error("usage: sign_meta.mjs <privateKey> <chainId> <factory> <feeBps> <feeNonce> <payout> <payoutNonce> <deadline>");
  process.exit(2);
}

const wallet = new Wallet(privateKey);
const domain = { name: "PaymentFactory", version: "1", chainId: BigInt(chainId), verifyingContract: factory };
const setFeeTypes = {
  SetFee: [
    { name: "user", type: "address" },
    { name: "feeBps", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
};
const setPayoutTypes = {
  SetPayout: [
    { name: "user", type: "address" },
    { name: "payout", type: "address" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
};
const setFee = { user: wallet.address, feeBps: BigInt(feeBps), nonce: BigInt(feeNonce), deadline: BigInt(deadline) };
const setPayout = { user: wallet.address, payout, nonce: BigInt(payoutNonce), deadline: BigInt(deadline) };

console.log(JSON.stringify({
  signer: wallet.address,
  setFee: {
    digest: TypedDataEncoder.hash(domain, setFeeTypes, setFee),
    signature: await wallet.signTypedData(domain, setFeeTypes, setFee),
  },
  setPayout: {
    digest: TypedDataEncoder.hash(domain, setPayoutTypes, setPayout),
    signature: await wallet.signTypedData(domain, setPayoutTypes, setPayout),
  },
}));
