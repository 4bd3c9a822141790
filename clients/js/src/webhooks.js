// Checking a webhook delivery before acting on it.
//
//   signed deliveries:  x-service-webhook-signature: t=<unix s>,v1=<hex>[,v1=<hex>…]
//                       v1 = HMAC-SHA256(key = the secret "whsec_…" as UTF-8, "<t>.<raw body>"),
//                       one v1 per active secret of the owner (so secrets rotate without downtime)
//   API-key invoices:   x-service-api-key: the owner's API key
//   signature mode:     x-service-signature: the signature of the request that created the invoice
import { computeHmac, getAddress, toUtf8Bytes } from "ethers";

import { InvoicingError } from "./errors.js";
import { API_KEY_HEADER, SIGNATURE_HEADER } from "./signing.js";

export const WEBHOOK_SIGNATURE_HEADER = "x-service-webhook-signature";
export const EVENT_ID_HEADER = "x-service-event-id";
export const DEFAULT_TOLERANCE_S = 300;

/** A delivery that does not carry the proof asked for; do not act on it. */
export class WebhookVerificationError extends InvoicingError {}

/**
 * Check a delivery and return its parsed JSON body.
 *
 * `headers`: a Headers object or a plain object (Node's `req.headers`); `body`: the raw body
 * exactly as received (a string or bytes; a signature covers the bytes, not a re-serialized
 * object). `options`, one of:
 *   { signingSecret } or { signingSecrets: [...] }: the HMAC header, with its timestamp at most
 *       toleranceS (300) seconds from now (`nowS` to override the clock);
 *   { apiKey }: the x-service-api-key header equals the owner's key;
 *   { ownerAddress, requestSignature }: a signature-mode invoice's delivery carries the
 *       signature of the request that created it (what invoices.create returned as
 *       requestSignature), for that owner.
 * Throws WebhookVerificationError otherwise.
 */
export function verify(headers, body, options = {}) {
  const raw = rawBytes(body);
  const header = headerReader(headers);
  const secrets = options.signingSecrets ?? (options.signingSecret ? [options.signingSecret] : null);
  if (secrets) {
    verifySigned(header(WEBHOOK_SIGNATURE_HEADER), raw, secrets, options);
  } else if (options.apiKey) {
    if (!constantTimeEqual(header(API_KEY_HEADER) ?? "", options.apiKey)) {
      throw new WebhookVerificationError(`${API_KEY_HEADER} does not match the API key`);
    }
  } else if (options.ownerAddress) {
    if (!options.requestSignature) {
      throw new TypeError(
        "give requestSignature (what invoices.create returned) with ownerAddress, or use a " +
          "signing secret",
      );
    }
    if (!constantTimeEqual(header(SIGNATURE_HEADER) ?? "", options.requestSignature)) {
      throw new WebhookVerificationError(`${SIGNATURE_HEADER} is not the creation request's`);
    }
  } else {
    throw new TypeError("give signingSecret(s), apiKey, or ownerAddress with requestSignature");
  }
  const payload = parse(raw);
  if (options.ownerAddress && !sameAddress(payload?.ownerAddress, options.ownerAddress)) {
    throw new WebhookVerificationError("the delivery is for another ownerAddress");
  }
  return payload;
}

function verifySigned(value, raw, secrets, { toleranceS = DEFAULT_TOLERANCE_S, nowS }) {
  if (!value) throw new WebhookVerificationError(`no ${WEBHOOK_SIGNATURE_HEADER} header`);
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
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
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
