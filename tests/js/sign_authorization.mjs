#!/usr/bin/env node
// Sign a token's EIP-3009 TransferWithAuthorization and EIP-2612 Permit with ethers.js, as a
// wallet or dApp would, for the contract and interop tests.
//
//   node tests/js/sign_authorization.mjs <privateKey> <chainId> <token> <name> <version>
//        <to> <value> <validAfter> <validBefore> <nonce> <spender> <permitNonce> <deadline>
//
// Prints {"signer", "transfer": {"digest", "signature"}, "permit": {"digest", "signature"}}.
import { Wallet, TypedDataEncoder } from "ethers";

const args = process.argv.slice(2);
if (args.length !== 13) {
  console.error("usage: sign_authorization.mjs <privateKey> <chainId> <token> <name> <version> <to> <value> <validAfter> <validBefore> <nonce> <spender> <permitNonce> <deadline>");
  process.exit(2);
}
const [privateKey, chainId, token, name, version, to, value, validAfter, validBefore, nonce,
  spender, permitNonce, deadline] = args;

const wallet = new Wallet(privateKey);
const domain = { name, version, chainId: BigInt(chainId), verifyingContract: token };
// EIP-3009's TransferWithAuthorization, field for field.
const transferTypes = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
};
// EIP-2612's Permit.
const permitTypes = {
  Permit: [
    { name: "owner", type: "address" },
    { name: "spender", type: "address" },
    { name: "value", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
};
const transfer = {
  from: wallet.address, to, value: BigInt(value), validAfter: BigInt(validAfter),
  validBefore: BigInt(validBefore), nonce,
};
const permit = {
  owner: wallet.address, spender, value: BigInt(value), nonce: BigInt(permitNonce),
  deadline: BigInt(deadline),
};

console.log(JSON.stringify({
  signer: wallet.address,
  transfer: {
    digest: TypedDataEncoder.hash(domain, transferTypes, transfer),
    signature: await wallet.signTypedData(domain, transferTypes, transfer),
  },
  permit: {
    digest: TypedDataEncoder.hash(domain, permitTypes, permit),
    signature: await wallet.signTypedData(domain, permitTypes, permit),
  },
}));
