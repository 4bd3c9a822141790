// A real `invoicing dev` (anvil, the API, every worker) for the provider's tests: the one
// named by INVOICING_DEV_READY (its ready line, as the pytest wrapper passes it), else one
// started here from the repository's .venv on free ports and stopped at the end.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

import { Client, ROUTES } from "@invoicing/client";
import { Contract, HDNodeWallet, JsonRpcProvider, NonceManager, Wallet } from "ethers";

import type { InvoicingOptions } from "../src/options.js";

const REPO = path.resolve(__dirname, "../../../..");
// anvil's default accounts come from this mnemonic (m/44'/60'/0'/0/i); public test keys.
const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";

export type Ready = {
  base_url: string; rpc_url: string; chain_id: number; factory: string;
  tokens: Record<string, string>;
};

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  server.close();
  return port;
}

export async function waitFor<T>(check: () => Promise<T> | T, timeoutMs: number,
  what: string): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export async function devService(): Promise<{ ready: Ready; stop: () => Promise<void> }> {
  if (process.env.INVOICING_DEV_READY) {
    return { ready: JSON.parse(process.env.INVOICING_DEV_READY), stop: async () => {} };
  }
  const dir = mkdtempSync(path.join(tmpdir(), "invoicing-medusa-"));
  const readyFile = path.join(dir, "ready.json");
  const child: ChildProcess = spawn(path.join(REPO, ".venv/bin/invoicing"),
    ["dev", "--port", String(await freePort()), "--chain-port", String(await freePort()),
      "--ready-file", readyFile, "--database-url", `sqlite:///${dir}/dev.db`],
    {
      stdio: ["ignore", "ignore", "inherit"],
      env: { ...process.env, INVOICING_MONITOR_INTERVAL_S: "1", INVOICING_WEBHOOK_RETRY_DELAY_S: "1" },
    });
  const line = await waitFor(() => {
    if (child.exitCode !== null) throw new Error(`invoicing dev exited with ${child.exitCode}`);
    const text = existsSync(readyFile) ? readFileSync(readyFile, "utf8") : "";
    return text.endsWith("\n") && text;
  }, 120_000, "invoicing dev");
  const stop = async () => {
    child.kill("SIGTERM");
    if (child.exitCode === null) await once(child, "exit");
  };
  return { ready: JSON.parse(String(line)), stop };
}

/** anvil default account `index` on the dev chain. */
export function anvilAccount(ready: Ready, index: number): NonceManager {
  const wallet = HDNodeWallet.fromPhrase(ANVIL_MNEMONIC, undefined, `m/44'/60'/0'/0/${index}`);
  return new NonceManager(wallet.connect(new JsonRpcProvider(ready.rpc_url, undefined,
    { staticNetwork: true })));
}

export function tusd(ready: Ready, runner: NonceManager | JsonRpcProvider): Contract {
  return new Contract(ready.tokens.TUSD, [
    "function transfer(address to, uint256 amount) returns (bool)",
    "function balanceOf(address owner) view returns (uint256)",
  ], runner);
}

export type Delivery = { path: string; headers: http.IncomingHttpHeaders; body: Buffer };

/** An HTTP server on a free loopback port that records each POST (headers and raw body). */
export async function webhookReceiver() {
  const received: Delivery[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({ path: request.url ?? "", headers: request.headers, body: Buffer.concat(chunks) });
      response.writeHead(204).end();
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/events`,
    /** The first delivery of an event of `type` about `invoiceId`. */
    event: (type: string, invoiceId: string) => waitFor(() => received.find((item) => {
      const body = JSON.parse(item.body.toString("utf8"));
      return body.type === type && body.data?.invoice?.invoiceId === invoiceId;
    }), 60_000, `${type} of ${invoiceId}`),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

const SET_REFUND_DELEGATE = {
  SetRefundDelegate: [
    { name: "user", type: "address" },
    { name: "delegate", type: "address" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
};

/** The owner names `delegate` its refund delegate (docs: Refunds), mined before it returns.
 * The SDK has no method for this route yet: its transport and route table carry it. */
async function setRefundDelegate(ready: Ready, wallet: HDNodeWallet, client: Client, delegate: string) {
  const { nonce, factory } = await client.fees.get(ready.chain_id);
  const deadline = BigInt(Math.floor(Date.now() / 1000) + 600);
  const signature = await wallet.signTypedData(
    { name: "PaymentFactory", version: "1", chainId: BigInt(ready.chain_id), verifyingContract: factory },
    SET_REFUND_DELEGATE, { user: wallet.address, delegate, nonce, deadline });
  const [method, path, action, queryNames] = ROUTES["fees.setRefundDelegate"];
  const transport = (client as unknown as { transport: { call: (r: object) => Promise<any> } }).transport;
  const submitted = await transport.call({ method, path, action, queryNames, body: {
    chainId: ready.chain_id, delegate, nonce: String(nonce), deadline: String(deadline), signature,
  } });
  const receipt = await new JsonRpcProvider(ready.rpc_url).waitForTransaction(submitted.txHash, 1, 60_000);
  if (receipt?.status !== 1) throw new Error(`SetRefundDelegate failed: ${submitted.txHash}`);
}

/** A new shop owner on the service: an API key, a webhook signing secret and a refund
 * delegate, and the provider options that use them. */
export async function shopOwner(ready: Ready): Promise<{ client: Client; options: InvoicingOptions }> {
  const wallet = Wallet.createRandom();
  const signed = new Client({ baseUrl: ready.base_url, privateKey: wallet.privateKey });
  const { apiKey } = await signed.apiKeys.create("medusa");
  const client = new Client({ baseUrl: ready.base_url, ownerAddress: wallet.address, apiKey });
  const { secret } = await client.webhookSecrets.create();
  const delegate = Wallet.createRandom();
  await setRefundDelegate(ready, wallet, signed, delegate.address);
  return {
    client,
    options: {
      baseUrl: ready.base_url, ownerAddress: wallet.address, apiKey, chainId: ready.chain_id,
      tokenAddress: ready.tokens.TUSD, refundDelegateKey: delegate.privateKey,
      webhookSecret: secret, redirectUrl: "http://127.0.0.1:8000/order/confirmed",
    },
  };
}
