// Checking a webhook delivery before acting on it.
//
//   signed deliveries:  x-service-webhook-signature: t=<unix s>,v1=<hex>[,v1=<hex>…]
//                       v1 = HMAC-SHA256(key = the secret "whsec_…" as UTF-8, "<t>.<raw body>"),
//                       one v1 per active secret of the owner (so secrets rotate without downtime)
//   API-key invoices:   x-service-api-key: the owner's API key
//   signature mode:     x-service-signature: the signature of the request that created the invoice
import { computeHmac, getAddress, toUtf8Bytes } from "ethers";

import { InvoicingError } from "./errors.js";
import { API_KEY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER } from "./signing.js";
import { parseJson } from "./transport.js";

export const WEBHOOK_SIGNATURE_HEADER = "x-service-webhook-signature";
export const EVENT_ID_HEADER = "x-service-event-id";
export const DEFAULT_TOLERANCE_S = 300;

/** A delivery that does not carry the proof asked for; do not act on it. */
export class WebhookVerificationError extends InvoicingError {}

/**
 * Check a delivery and return its parsed JSON body (the paid webhook, or an event envelope
 * `{id, type, createdAt, data}`).
 *
 * `headers`: a Headers object or a plain object (Node's `req.headers`); `body`: the raw body
 * exactly as received (a string or bytes; a signature covers the bytes, not a re-serialized
 * object). `options` names the proofs to check; every one given must hold:
 *   signingSecret (a "whsec_…" string, or several while rotating): the HMAC header, with its
 *       timestamp at most toleranceS (300) seconds from now (`nowS` to override the clock);
 *   apiKey: the x-service-api-key header equals the owner's key;
 *   ownerAddress with requestSignature: a signature-mode invoice's delivery carries the
 *       signature of the request that created it (what invoices.create returned as
 *       requestSignature; a signature alone proves nothing, anyone who saw one can resend it).
 * ownerAddress, when given, must also be the delivery's owner.
 * Throws WebhookVerificationError otherwise.
 */
export function verify(headers, body, options = {}) {
  const raw = rawBytes(body);
  const header = headerReader(headers);
  const { apiKey, ownerAddress, requestSignature } = options;
  const secrets = many(options.signingSecret ?? options.signingSecrets);
  if (!secrets && !apiKey && !requestSignature) {
    throw new TypeError("give signingSecret, apiKey, or ownerAddress with requestSignature");
  }
  if (requestSignature && !ownerAddress) {
    throw new TypeError("requestSignature needs ownerAddress");
  }
  if (secrets) verifySigned(header(WEBHOOK_SIGNATURE_HEADER), raw, secrets, options);
  if (apiKey) checkEqual(header(API_KEY_HEADER), [apiKey], API_KEY_HEADER);
  if (requestSignature) {
    if (!header(TIMESTAMP_HEADER)) throw new WebhookVerificationError(`${TIMESTAMP_HEADER} is missing`);
    checkEqual(header(SIGNATURE_HEADER), many(requestSignature), SIGNATURE_HEADER);
  }
  const payload = parse(raw);
  if (ownerAddress) {
    // An event envelope carries the owner's invoice under data.invoice.
    const owner = payload?.type && payload?.data ? payload.data.invoice?.ownerAddress
      : payload?.ownerAddress;
    if (!sameAddress(owner, ownerAddress)) {
      throw new WebhookVerificationError("the delivery is for another ownerAddress");
    }
  }
  return payload;
}

function many(value) {
  if (value === undefined || value === null) return null;
  return typeof value === "string" ? [value] : [...value];
}

function checkEqual(sent, expected, name) {
  if (!sent) throw new WebhookVerificationError(`${name} is missing`);
  // Every candidate compared, each in constant time.
  const matches = expected.map((value) => constantTimeEqual(sent, value));
  if (!matches.includes(true)) throw new WebhookVerificationError(`${name} does not match`);
}

function verifySigned(value, raw, secrets, { toleranceS = DEFAULT_TOLERANCE_S, nowS }) {
  if (!value) throw new WebhookVerificationError(`${WEBHOOK_SIGNATURE_HEADER} is missing`);
  let timestamp = null;
  const signatures = [];
  for (const part of value.split(",")) {
    const [key, item] = part.trim().split("=", 2);
    if (key === "t" && /^\d{1,12}$/.test(item ?? "")) timestamp = Number(item);
    if (key === "v1" && item) signatures.push(item.toLowerCase());
  }
  if (timestamp === null || signatures.length === 0) {
    throw new WebhookVerificationError(`${WEBHOOK_SIGNATURE_HEADER} is malformed`);
  }
  const now = nowS ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > toleranceS) {
    throw new WebhookVerificationError(`the signature's timestamp is more than ${toleranceS} s away`);
  }
  const message = concat(toUtf8Bytes(`${timestamp}.`), raw);
  const expected = secrets.map((secret) =>
    computeHmac("sha256", toUtf8Bytes(secret), message).slice(2));
  const matches = expected.some((mac) => signatures.some((sig) => constantTimeEqual(sig, mac)));
  if (!matches) {
    throw new WebhookVerificationError("no v1 signature matches the signing secret");
  }
}

function rawBytes(body) {
  if (typeof body === "string") return toUtf8Bytes(body);
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  throw new TypeError("body must be the raw body as received (a string or bytes)");
}

function headerReader(headers) {
  if (typeof headers?.get === "function") return (name) => headers.get(name);
  const lower = new Map(
    Object.entries(headers ?? {}).map(([key, value]) => [key.toLowerCase(), value]),
  );
  return (name) => {
    const value = lower.get(name);
    return Array.isArray(value) ? value.join(",") : value;
  };
}

function parse(raw) {
  try {
    return parseJson(new TextDecoder("utf-8", { fatal: true }).decode(raw));
  } catch {
    throw new WebhookVerificationError("the body is not JSON");
  }
}

function sameAddress(value, expected) {
  try {
    return getAddress(value) === getAddress(expected);
  } catch {
    return false;
  }
}

function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** Equal strings in time that depends only on their lengths. */
function constantTimeEqual(a, b) {
  const x = toUtf8Bytes(a);
  const y = toUtf8Bytes(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i += 1) {
    diff |= (x[i % (x.length || 1)] ?? 0) ^ (y[i % (y.length || 1)] ?? 0);
  }
  return diff === 0;
}
