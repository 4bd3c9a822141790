#!/usr/bin/env node
// Compile contracts/**/*.sol with the pinned solc (npm) and write the artifacts the Python
// package ships: src/invoicing/chain/artifacts/<Name>.json = {abi, bytecode, contractName,
// deployedBytecode, immutableReferences?}. immutableReferences (only for contracts that have
// immutables) lists the {start, length} byte ranges of deployedBytecode the constructor fills
// in, so the service can compare a deployed contract's code with the artifact (startup check).
// Output is deterministic (sorted keys, fixed formatting).
//
//   node scripts/compile.mjs          write the artifacts
//   node scripts/compile.mjs --check  exit 1 and name the files that differ from a fresh compile
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const solc = require("solc");

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const CONTRACTS_DIR = path.join(ROOT, "contracts");
const ARTIFACTS_DIR = path.join(ROOT, "src", "invoicing", "chain", "artifacts");
const NODE_MODULES = path.join(ROOT, "node_modules");
// Warnings about deliberate design choices (docs/architecture.md#sweeps): the sweep token lives in
// transient storage and is cleared before withdraw returns; the escrow self-destructs in its
// creating transaction (EIP-6780), which still deletes the account.
const ACKNOWLEDGED_WARNINGS = [
  "Transient storage as defined by EIP-1153",
  '"selfdestruct" has been deprecated',
];

function solidityFiles(dir) {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...solidityFiles(full));
    else if (entry.name.endsWith(".sol")) found.push(full);
  }
  return found.sort();
}

function findImport(importPath) {
  const candidates = importPath.startsWith("@")
    ? [path.join(NODE_MODULES, importPath)]
    : [path.join(ROOT, importPath)];
  for (const candidate of candidates) {
    if (fs.existsSync(candidate)) return { contents: fs.readFileSync(candidate, "utf8") };
  }
  return { error: `not found: ${importPath}` };
}

function compile() {
  const sources = {};
  for (const file of solidityFiles(CONTRACTS_DIR)) {
    const unit = path.relative(ROOT, file).split(path.sep).join("/");
    sources[unit] = { content: fs.readFileSync(file, "utf8") };
  }
  const input = {
    language: "Solidity",
    sources,
    settings: {
      evmVersion: "cancun",
      optimizer: { enabled: true, runs: 10000 },
      // No CBOR metadata trailer: keeps bytecode independent of comments and paths, and the
      // escrow init code (hashed into every escrow address) minimal.
      metadata: { appendCBOR: false },
      outputSelection: {
        "*": {
          "*": [
            "abi",
            "evm.bytecode.object",
            "evm.deployedBytecode.object",
            "evm.deployedBytecode.immutableReferences",
          ],
        },
      },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImport }));
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  for (const diagnostic of output.errors ?? []) {
    const known = ACKNOWLEDGED_WARNINGS.some((text) => diagnostic.message.includes(text));
    if (diagnostic.severity === "error" || !known) console.error(diagnostic.formattedMessage);
  }
  if (errors.length) process.exit(2);

  const artifacts = new Map();
  for (const unit of Object.keys(sources)) {
    for (const [name, contract] of Object.entries(output.contracts[unit] ?? {})) {
      const bytecode = contract.evm.bytecode.object;
      if (!bytecode) continue; // interfaces and abstract contracts
      if (artifacts.has(name)) throw new Error(`duplicate contract name ${name}`);
      const artifact = {
        abi: contract.abi,
        bytecode: "0x" + bytecode,
        contractName: name,
        deployedBytecode: "0x" + contract.evm.deployedBytecode.object,
      };
      const ranges = Object.values(contract.evm.deployedBytecode.immutableReferences ?? {})
        .flat()
        .sort((a, b) => a.start - b.start);
      if (ranges.length) artifact.immutableReferences = ranges;
      artifacts.set(name, artifact);
    }
  }
  return artifacts;
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value).sort().map((key) => [key, sortKeys(value[key])]),
    );
  }
  return value;
}

function render(artifact) {
  return JSON.stringify(sortKeys(artifact), null, 2) + "\n";
}

function main() {
  const check = process.argv.includes("--check");
  const wanted = new Map();
  for (const [name, artifact] of compile()) wanted.set(`${name}.json`, render(artifact));
  const present = fs.existsSync(ARTIFACTS_DIR)
    ? fs.readdirSync(ARTIFACTS_DIR).filter((f) => f.endsWith(".json"))
    : [];

  if (check) {
    const stale = [];
    for (const [file, text] of wanted) {
      const target = path.join(ARTIFACTS_DIR, file);
      if (!fs.existsSync(target) || fs.readFileSync(target, "utf8") !== text) stale.push(file);
    }
    for (const file of present) if (!wanted.has(file)) stale.push(`${file} (no longer produced)`);
    if (stale.length) {
      console.error(`stale artifacts in ${path.relative(ROOT, ARTIFACTS_DIR)}:`);
      for (const file of stale.sort()) console.error(`  ${file}`);
      console.error("run: node scripts/compile.mjs");
      process.exit(1);
    }
    console.log(`artifacts up to date (${wanted.size} contracts)`);
    return;
  }

  fs.mkdirSync(ARTIFACTS_DIR, { recursive: true });
  for (const file of present) {
    if (!wanted.has(file)) fs.rmSync(path.join(ARTIFACTS_DIR, file));
  }
  for (const [file, text] of wanted) fs.writeFileSync(path.join(ARTIFACTS_DIR, file), text);
  console.log(`wrote ${wanted.size} artifacts to ${path.relative(ROOT, ARTIFACTS_DIR)}`);
}

main();
