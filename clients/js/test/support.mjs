// What the tests against a real service share: the `invoicing dev` service, anvil payers,
// and a webhook receiver.
//
// INVOICING_DEV_READY (the ready line of a running `invoicing dev`) names the service to use
// (the pytest test that runs these files sets it); without it the tests start one themselves
// from the repository's .venv, on free ports, and stop it at the end.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Contract, HDNodeWallet, JsonRpcProvider, NonceManager, parseUnits } from "ethers";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
// anvil's default accounts come from this mnemonic (m/44'/60'/0'/0/i); public test keys.
const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";

async function freePort() {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  return port;
}

async function waitFor(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The ready line of a running `invoicing dev`, and a function that stops it if we started it. */
export async function devService() {
  if (process.env.INVOICING_DEV_READY) {
    return { ready: JSON.parse(process.env.INVOICING_DEV_READY), stop: async () => {} };
  }
  const dir = mkdtempSync(path.join(tmpdir(), "invoicing-js-"));
  const readyFile = path.join(dir, "ready.json");
  const child = spawn(
    path.join(REPO, ".venv/bin/invoicing"),
    ["dev", "--port", String(await freePort()), "--chain-port", String(await freePort()),
      "--ready-file", readyFile, "--database-url", `sqlite:///${dir}/dev.db`],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  const line = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`invoicing dev exited with ${child.exitCode}`);
    return existsSync(readyFile) && readFileSync(readyFile, "utf8").endsWith("\n")
      && readFileSync(readyFile, "utf8");
  }, 120_000, "invoicing dev");
  const stop = async () => {
    child.kill("SIGTERM");
    if (child.exitCode === null) await once(child, "exit");
  };
  return { ready: JSON.parse(line), stop };
}

/** anvil default account `index` as an ethers signer on the dev chain. */
export function anvilAccount(ready, index) {
  const wallet = HDNodeWallet.fromPhrase(ANVIL_MNEMONIC, undefined, `m/44'/60'/0'/0/${index}`);
  return new NonceManager(wallet.connect(new JsonRpcProvider(ready.rpc_url, undefined, {
    staticNetwork: true,
  })));
}

/** Pay `amount` TUSD (6 decimals) to `to` from `payer`, and wait for the receipt. */
export async function payToken(ready, payer, to, amount) {
  const token = new Contract(ready.tokens.TUSD,
    ["function transfer(address to, uint256 amount) returns (bool)"], payer);
  const tx = await token.transfer(to, parseUnits(amount, 6));
  return tx.wait();
}

/** Pay `value` (wei, a bigint) of native coin to `to` and wait for the receipt. */
export async function payNative(payer, to, value) {
  const tx = await payer.sendTransaction({ to, value });
  return tx.wait();
}

/** An HTTP server on a free loopback port that records each POST (headers and raw body). */
export async function webhookReceiver() {
  const received = [];
  const server = http.createServer((request, response) => {
    const chunks = [];
    request.on("data", (chunk) => chunks.push(chunk));
    request.on("end", () => {
      received.push({ path: request.url, headers: request.headers, body: Buffer.concat(chunks) });
      response.writeHead(204).end();
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: (name) => `http://127.0.0.1:${server.address().port}/${name}`,
    /** The first delivery to /name, waiting up to 30 s for it. */
    delivery: (name) => waitFor(() => received.find((item) => item.path === `/${name}`),
      30_000, `a webhook at /${name}`),
    /** The first `count` deliveries to /name, waiting up to 30 s for them. */
    deliveries: (name, count) => waitFor(() => {
      const found = received.filter((item) => item.path === `/${name}`);
      return found.length >= count && found.slice(0, count);
    }, 30_000, `${count} webhooks at /${name}`),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

export { waitFor };
