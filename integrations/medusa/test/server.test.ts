// The provider inside a real Medusa server (@medusajs/medusa, its PostgreSQL migrations, its
// core workflows run by `medusa exec`) against a real `invoicing dev`: a cart paid on anvil
// becomes an order, whose payment a capture (as on fulfilment) captures on the service too;
// a cancelled order's payment is voided back to the payer. PostgreSQL: MEDUSA_TEST_POSTGRES
// (a server URL, default postgresql://postgres@127.0.0.1:5432); the test makes its own
// database and drops it.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

import { JsonRpcProvider } from "ethers";

import { devService, type Ready, shopOwner, tusd, waitFor } from "./support.js";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { Client: PgClient } = require("pg") as { Client: new (url: string) => any };

const APP = path.resolve(__dirname, "../../test/medusa-app");
const MEDUSA = path.resolve(__dirname, "../../node_modules/.bin/medusa");
const POSTGRES = process.env.MEDUSA_TEST_POSTGRES ?? "postgresql://postgres@127.0.0.1:5432";
const PAYER_INDEX = 5;
const run = promisify(execFile);

let service: Awaited<ReturnType<typeof devService>>;
let ready: Ready;
const database = `medusa_provider_${randomBytes(6).toString("hex")}`;

async function admin(sql: string): Promise<void> {
  const client = new PgClient(`${POSTGRES}/postgres`);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

before(async () => {
  service = await devService();
  ready = service.ready;
  await admin(`CREATE DATABASE ${database}`);
});

after(async () => {
  await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await service?.stop();
});

test("a cart paid on anvil is an order, captured on fulfilment; a cancelled one is voided", async () => {
  const shop = await shopOwner(ready);
  const env = {
    ...process.env, DATABASE_URL: `${POSTGRES}/${database}`, INVOICING_DEV_READY: JSON.stringify(ready),
    INVOICING_PROVIDER_OPTIONS: JSON.stringify(shop.options), PAYER_INDEX: String(PAYER_INDEX),
  };
  await run(MEDUSA, ["db:migrate"], { cwd: APP, env, timeout: 300_000, maxBuffer: 64 << 20 });
  const token = tusd(ready, new JsonRpcProvider(ready.rpc_url));
  const payer = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc";  // anvil account 5
  const start = await token.balanceOf(payer);
  const { stdout } = await run(MEDUSA, ["exec", "./flow.js"],
    { cwd: APP, env, timeout: 300_000, maxBuffer: 64 << 20 });
  const line = stdout.split("\n").find((item) => item.startsWith("FLOW_RESULT "));
  assert.ok(line, stdout.slice(-4000));
  const result = JSON.parse(line.slice("FLOW_RESULT ".length));
  assert.equal(result.payer, payer);

  // Captured in Medusa (25 USD, one capture) and on the service.
  assert.equal(result.captured.amount, 25);
  assert.deepEqual(result.captured.captures, [25]);
  assert.ok(result.captured.capturedAt);
  const captured = await shop.client.invoices.status(result.captured.paymentAddress);
  assert.equal(captured.capture, "manual");
  assert.equal(typeof captured.capturedAt, "number");
  assert.equal(captured.fiat?.amount, "25");

  // Cancelled in Medusa; on the service voided: of the two payments of 25 TUSD, the second
  // back to the payer.
  assert.equal(result.cancelled.orderStatus, "canceled");
  assert.ok(result.cancelled.canceledAt);
  assert.equal(result.cancelled.capturedAt, null);
  const voided = await waitFor(async () => {
    const invoice = await shop.client.invoices.status(result.cancelled.paymentAddress);
    return invoice.voidedAt ? invoice : null;
  }, 60_000, "the void");
  assert.equal(voided.status, "cancelled");
  assert.equal(await waitFor(async () => {
    const balance = await token.balanceOf(payer);
    return balance === start - 25_000_000n && balance;
  }, 30_000, "the payer's balance"), start - 25_000_000n);
});
