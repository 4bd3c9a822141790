// A real Medusa server for test/server.test.ts: the application in test/medusa-app/ on a new
// PostgreSQL database (made here, migrated with `medusa db:migrate`, dropped by `stop`), an
// admin user (`medusa user`), then `medusa start` on a free port, and a small JSON client
// for its HTTP API (store routes with a publishable API key, admin routes with a bearer token).
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { randomBytes } from "node:crypto";
import net from "node:net";
import path from "node:path";
import { promisify } from "node:util";

import { waitFor } from "./support.js";

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { Client: PgClient } = require("pg") as { Client: new (url: string) => any };

const APP = path.resolve(__dirname, "../../test/medusa-app");
const MEDUSA = path.resolve(__dirname, "../../node_modules/.bin/medusa");
const POSTGRES = process.env.MEDUSA_TEST_POSTGRES ?? "postgresql://postgres@127.0.0.1:5432";
const ADMIN = { email: "admin@example.com", password: "medusa-test-password" };
const run = promisify(execFile);

async function postgres(sql: string): Promise<void> {
  const client = new PgClient(`${POSTGRES}/postgres`);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as net.AddressInfo;
  server.close();
  return port;
}

export type Call = (method: string, route: string, body?: object) => Promise<any>;

export type MedusaServer = {
  /** The server's base URL ("http://127.0.0.1:port"). */
  url: string;
  /** An admin route, as the admin dashboard calls it (bearer token of the admin user). */
  admin: Call;
  /** A store route, as a storefront calls it (the publishable API key). */
  store: (publishableKey: string) => Call;
  /** The end of the server's own output (its log), for failure messages. */
  log: () => string;
  stop: () => Promise<void>;
};

/** Starts the server with the provider configured with `options` (JSON in the environment). */
export async function startMedusa(providerOptions: object): Promise<MedusaServer> {
  const database = `medusa_provider_${randomBytes(6).toString("hex")}`;
  await postgres(`CREATE DATABASE ${database}`);
  const port = await freePort();
  const env = {
    ...process.env, DATABASE_URL: `${POSTGRES}/${database}`, NODE_ENV: "development",
    INVOICING_PROVIDER_OPTIONS: JSON.stringify(providerOptions),
  };
  let child: ChildProcess | undefined;
  let output = "";
  const stop = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = once(child, "exit");
      process.kill(-child.pid!, "SIGTERM");
      await exited;
    }
    await postgres(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  };
  try {
    const options = { cwd: APP, env, timeout: 300_000, maxBuffer: 64 << 20 };
    await run(MEDUSA, ["db:migrate"], options);
    // The admin user is made while the server boots: two boots at once (measured here, the
    // file took 59 s with them one after the other, 43 s at once).
    const adminUser = run(MEDUSA, ["user", "-e", ADMIN.email, "-p", ADMIN.password], options);
    // Its own process group, so that `stop` ends whatever it starts.
    child = spawn(MEDUSA, ["start", "-p", String(port)],
      { cwd: APP, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const keep = (chunk: Buffer) => { output = (output + chunk.toString("utf8")).slice(-16_000); };
    child.stdout!.on("data", keep);
    child.stderr!.on("data", keep);
    const base = `http://127.0.0.1:${port}`;
    await Promise.all([adminUser, waitFor(async () => {
      if (child!.exitCode !== null) throw new Error(`medusa start exited: ${output}`);
      return fetch(`${base}/health`).then((response) => response.ok, () => false);
    }, 180_000, "medusa start")]);

    const call = (headers: Record<string, string>): Call => async (method, route, body) => {
      const response = await fetch(`${base}${route}`, {
        method, headers: { "content-type": "application/json", ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await response.text();
      if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text}\n${output}`);
      return text ? JSON.parse(text) : null;
    };
    const { token } = await call({})("POST", "/auth/user/emailpass", ADMIN);
    return {
      url: base,
      admin: call({ authorization: `Bearer ${token}` }),
      store: (publishableKey) => call({ "x-publishable-api-key": publishableKey }),
      log: () => output,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
