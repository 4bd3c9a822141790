// @invoicing/client: the invoicing service's API from JavaScript (Node 20 and browsers).
export { Client } from "./client.js";
export { ROUTES } from "./routes.js";
export * from "./errors.js";
export {
  API_KEY_HEADER,
  MESSAGE_PREFIX,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  canonicalJson,
  requestMessage,
} from "./signing.js";
export * as webhooks from "./webhooks.js";
export { WebhookVerificationError } from "./webhooks.js";
