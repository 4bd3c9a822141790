// Building a request, reading its answer, and when to try again.
import {
  ApiError,
  ReplayedRequest,
  ServiceUnreachable,
  errorFromResponse,
} from "./errors.js";
import { RAW_FIELDS } from "./generated/routes.js";
import { API_KEY_HEADER, RequestSigner, SIGNATURE_HEADER } from "./signing.js";

// Answers worth another try of an idempotent call: the service or a proxy in front of it
// failed before answering, or the chain's RPC was unreachable for a live read.
const RETRYABLE_STATUSES = new Set([500, 502, 503, 504]);
// Node's fetch names the cause; these mean nothing reached the service.
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);
const MAX_BACKOFF_S = 8;
// Actions the service takes only with the owner's request signature: API keys and the team
// (an admin member may issue API keys, and could otherwise reach the team through one).
const SIGNATURE_ONLY = ["apikey.", "member."];

/** A query value as sent (and signed): booleans as true/false, integers in decimal. */
export function queryValue(value) {
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "string") return value;
  if (typeof value === "bigint" || Number.isSafeInteger(value)) return String(value);
  throw new TypeError(`query values must be strings, integers or booleans, not ${value}`);
}

const DIGITS = /^[0-9]{1,78}$/;

/** JSON of the service, its raw amounts and nonces (RAW_FIELDS, generated from openapi.json)
 * read as bigints, as ints in the Python SDK (docs/integration/sdks.md); amounts in token
 * units stay strings. */
export function parseJson(text) {
  return JSON.parse(text, (key, value) =>
    RAW_FIELDS.has(key) && typeof value === "string" && DIGITS.test(value) ? BigInt(value) : value);
}

/** A raw amount or a nonce as sent: a decimal string of a bigint or a safe integer. */
export function rawString(value, name) {
  if (typeof value === "bigint" && value >= 0n) return String(value);
  if (Number.isSafeInteger(value) && value >= 0) return String(value);
  if (typeof value === "string" && DIGITS.test(value)) return value;
  throw new TypeError(`${name} is a raw amount: a bigint (or a decimal string of digits)`);
}

/** The entries whose value is given (undefined and null mean "not sent", never null). */
export function given(fields) {
  return Object.fromEntries(
    Object.entries(fields).filter(([, value]) => value !== undefined && value !== null),
  );
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Transport {
  #apiKey;

  constructor({ baseUrl, ownerAddress, apiKey, signer, maxRetries = 3, backoffS = 0.5,
    timeoutS = 30, fetch: fetchImpl }) {
    if (!baseUrl) throw new TypeError("baseUrl is required");
    if (!ownerAddress) throw new TypeError("ownerAddress is required");
    if (!apiKey && !signer) {
      throw new TypeError("give apiKey, or signer / privateKey (signature mode)");
    }
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.ownerAddress = ownerAddress;
    this.#apiKey = apiKey;
    this.signer = signer ? new RequestSigner(signer) : null;
    this.maxRetries = maxRetries;
    this.backoffS = backoffS;
    this.timeoutS = timeoutS;
    this.fetch = fetchImpl ?? globalThis.fetch.bind(globalThis);
  }

  toJSON() {
    return { baseUrl: this.baseUrl, ownerAddress: this.ownerAddress };  // never a credential
  }

  /**
   * Send one API operation and return its JSON answer. `query` and `body` leave out
   * ownerAddress (added first) and keep their order: signature mode signs them as sent.
   * `idempotent` calls (reads, delete, create with an invoiceId, a signed fee message) are
   * tried again after a lost connection or a 5xx; any call after a refused connection or a
   * replayed timestamp (nothing was done either way). `full`: also the answer's status and
   * the signature sent, as { data, status, headers: { signature } }. `action` null: a public
   * route (no credential, no ownerAddress in the query). `signedId`: an id in the path, or in
   * the query of a POST/PATCH, signed as the payload's first key. `text`: the answer as text
   * (NDJSON, HTML). `accept`: error statuses whose body is still the answer. `queryNames`:
   * the query parameters the route takes (routes.js); any other is refused. `ownerless`: a
   * payer's body (a public route's), which names no owner: sent without ownerAddress.
   */
  async call({ method, path, action, query = {}, body, idempotent = false, full = false,
    signedId, text = false, accept = [], queryNames = [], ownerless = false }) {
    const unknown = Object.keys(query).filter((key) => !queryNames.includes(key));
    if (unknown.length > 0) throw new TypeError(`${path} takes no query ${unknown.join(", ")}`);
    for (let attempt = 1; ; attempt += 1) {
      // A fresh timestamp and signature for each attempt (the service accepts each once).
      const request = await this.#prepare({ method, path, action, query, body, signedId,
        ownerless });
      try {
        const { data, status } = await this.#send(request, { text, accept });
        if (!full) return data;
        return { data, status, headers: { signature: request.init.headers[SIGNATURE_HEADER] } };
      } catch (error) {
        const delayS = this.#retryDelay(idempotent, attempt, error);
        if (delayS === null) throw error;
        await sleep(delayS * 1000);
      }
    }
  }

  async #prepare({ method, path, action, query, body, signedId, ownerless }) {
    const headers = { accept: "application/json" };
    const params = new URLSearchParams();
    let content;
    let payload = {};
    if (body === undefined && action !== null) params.append("ownerAddress", this.ownerAddress);
    for (const [key, value] of Object.entries(query)) {
      params.append(key, queryValue(value));
      if (body === undefined) payload[key] = queryValue(value);
    }
    if (body !== undefined) {
      content = JSON.stringify(ownerless ? body : { ownerAddress: this.ownerAddress, ...body });
      headers["content-type"] = "application/json";
      payload = body;
    }
    if (signedId !== undefined) payload = { id: signedId, ...payload };
    if (action !== null) Object.assign(headers, await this.#credentials(action, payload));
    const search = params.toString() ? `?${params}` : "";
    return { url: `${this.baseUrl}${path}${search}`, init: { method, headers, body: content } };
  }

  async #credentials(action, payload) {
    // API keys and the team are managed in signature mode only: a client given both signs
    // those calls.
    const signatureOnly = SIGNATURE_ONLY.some((prefix) => action.startsWith(prefix));
    if (this.#apiKey && !(signatureOnly && this.signer)) {
      return { [API_KEY_HEADER]: this.#apiKey };
    }
    if (!this.signer) throw new TypeError(`${action} needs an apiKey or a signer`);
    return this.signer.headers(action, this.ownerAddress, payload);
  }

  async #send({ url, init }, { text: asText, accept }) {
    let response;
    let text;
    try {
      response = await this.fetch(url, { ...init, signal: AbortSignal.timeout(this.timeoutS * 1000) });
      text = await response.text();
    } catch (error) {
      throw new ServiceUnreachable(`no answer from ${this.baseUrl}: ${error.message}`, {
        cause: error,
      });
    }
    let data = null;
    try {
      data = text ? parseJson(text) : null;
    } catch {
      data = null;  // a proxy's HTML page, say: the status alone decides
    }
    if (response.ok && asText) return { data: text, status: response.status };
    if (response.ok || accept.includes(response.status)) return { data, status: response.status };
    throw errorFromResponse(response.status, data);
  }

  #retryDelay(idempotent, attempt, error) {
    if (attempt > this.maxRetries) return null;
    if (error instanceof ReplayedRequest) {
      // Another client of this owner used the same millisecond: nothing was done.
      return attempt === 1 ? 0 : null;
    }
    if (error instanceof ApiError) {
      if (!idempotent || !RETRYABLE_STATUSES.has(error.status)) return null;
    } else if (!idempotent && !NOT_SENT_CODES.has(causeCode(error))) {
      return null;
    }
    const delayS = Math.min(this.backoffS * 2 ** (attempt - 1), MAX_BACKOFF_S);
    return delayS * (0.5 + Math.random());  // jitter
  }
}

function causeCode(error) {
  // Node's fetch: TypeError("fetch failed") whose cause carries the socket's error code.
  const cause = error.cause;
  return cause?.cause?.code ?? cause?.code;
}
