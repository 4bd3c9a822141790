// Recover your funds without the invoicing service, with nothing but the escrow export.
//
//   npm install ethers@6
//   RPC_URL=https://… FACTORY=0x… OWNER=0x… SENDER_KEY=0x… node recover.mjs escrows.ndjson [--dry-run]
//
// Every line of the export is checked with the factory's predictEscrow(owner, salt); a line
// that does not match is refused and nothing is sent. Balances are read with balancesOf
// (native coin and every token the file names), then each asset's escrows that hold funds
// are swept with the permissionless withdraw(owner, token, salts), 100 escrows a transaction.
// The factory pays the owner (and the owner's payout address its fee share, if one is set);
// SENDER_KEY only pays the gas.
import { readFileSync } from "node:fs";
import { ethers } from "ethers";

const ABI = [
  "function predictEscrow(address owner, bytes32 salt) view returns (address)",
  "function balancesOf(address token, address[] accounts) view returns (uint256[])",
  "function withdraw(address owner, address token, bytes32[] salts)",
];
const NATIVE = ethers.ZeroAddress;
const BATCH = 100;
const { RPC_URL, FACTORY, OWNER, SENDER_KEY } = process.env;
const [file, flag] = process.argv.slice(2);
const dryRun = flag === "--dry-run";
if (!RPC_URL || !FACTORY || !OWNER || !file || (!SENDER_KEY && !dryRun)) {
  console.error("usage: RPC_URL=… FACTORY=0x… OWNER=0x… SENDER_KEY=0x… node recover.mjs FILE [--dry-run]");
  process.exit(2);
}

const provider = new ethers.JsonRpcProvider(RPC_URL);
const factory = new ethers.Contract(FACTORY, ABI, provider);
const owner = ethers.getAddress(OWNER);
const chainId = (await provider.getNetwork()).chainId;
// A line names the factory that made its escrow (after a factory upgrade, the previous one for
// older escrows): only this factory's lines are swept here; run again with FACTORY=<that one>.
const lines = readFileSync(file, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const mine = (e) => !e.factory || ethers.getAddress(e.factory) === ethers.getAddress(FACTORY);
const escrows = lines.filter(mine);
const elsewhere = lines.length - escrows.length;
if (elsewhere) console.error(`${elsewhere} escrow(s) were made by another factory: run again with its FACTORY`);

for (const [i, e] of escrows.entries()) {
  if (BigInt(e.chainId) !== chainId) throw new Error(`line ${i + 1}: chain ${e.chainId}, the node is ${chainId}`);
  const predicted = await factory.predictEscrow(owner, e.salt);
  if (predicted !== ethers.getAddress(e.paymentAddress)) {
    throw new Error(`line ${i + 1}: ${e.paymentAddress} is not the escrow of ${owner} and its salt; nothing sent`);
  }
}

const chunks = (list, size) => Array.from({ length: Math.ceil(list.length / size) }, (_, i) => list.slice(i * size, (i + 1) * size));
const tokens = [NATIVE, ...new Set(escrows.map((e) => e.tokenAddress).filter(Boolean).map(ethers.getAddress))];
const signer = SENDER_KEY ? new ethers.NonceManager(new ethers.Wallet(SENDER_KEY, provider)) : null;
const withdraw = signer ? factory.connect(signer) : factory;
let gasUsed = 0n;
for (const token of tokens) {
  const held = [];
  // balancesOf answers fewer values than asked when its gas runs low: read on from there.
  for (let start = 0; start < escrows.length; ) {
    const part = escrows.slice(start, start + 200);
    const balances = await factory.balancesOf(token, part.map((e) => e.paymentAddress));
    if (balances.length === 0) throw new Error(`balancesOf(${token}) read nothing`);
    balances.forEach((b, i) => {
      if (b === ethers.MaxUint256) console.log(`${part[i].paymentAddress}: ${token} balance unreadable`);
      else if (b > 0n) held.push([part[i], b]);
    });
    start += balances.length;
  }
  for (const batch of chunks(held, BATCH)) {
    const salts = batch.map(([e]) => e.salt);
    const amount = batch.reduce((sum, [, b]) => sum + b, 0n);
    const label = token === NATIVE ? "native" : `token ${token}`;
    if (dryRun) {
      console.log(`would sweep ${label} from ${batch.length} escrow(s): ${amount} raw`);
      continue;
    }
    const tx = await withdraw.withdraw(owner, token, salts);
    const receipt = await tx.wait();
    gasUsed += receipt.gasUsed;
    console.log(`swept ${label} from ${batch.length} escrow(s): ${amount} raw; tx ${tx.hash}`);
  }
}
console.log(dryRun ? "dry run: nothing sent" : `done; gas used ${gasUsed}`);
