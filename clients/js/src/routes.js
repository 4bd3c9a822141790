// Every route of the service, named by the SDK method that calls it: [method, path, action,
// query] (action: the x-signature-action, null for the public, unauthenticated routes; query:
// the query parameters it takes besides ownerAddress). Each call is built from its row, and
// tests/unit/test_sdk_coverage.py checks this table against the service's openapi.json and
// against the client's methods, so a route without a call, or a query parameter the SDK does
// not know, fails a test.
const INVOICE_QUERY = ["chainId", "status", "paid", "tokenAddress", "invoiceId", "page", "limit",
  "dateFrom", "dateTo"];
const EVENT_QUERY = ["type", "deliveryStatus", "after", "limit"];

export const ROUTES = Object.freeze({
  "invoices.create": ["POST", "/integration/invoices", "invoice.create"],
  "invoices.status": ["GET", "/integration/invoices/status", "invoice.status", ["paymentAddress"]],
  "invoices.page": ["GET", "/integration/invoices", "invoice.list", INVOICE_QUERY],
  "invoices.list": ["GET", "/integration/invoices", "invoice.list", INVOICE_QUERY],
  "invoices.delete": ["DELETE", "/integration/invoices", "invoice.delete",
    ["chainId", "invoiceId"]],
  "invoices.refund": ["POST", "/integration/invoices/refund-meta", "invoice.refund"],
  "invoices.webhooks": ["GET", "/integration/invoices/webhooks", "invoice.webhooks",
    ["paymentAddress"]],
  "fees.get": ["GET", "/integration/fees", "fee.get", ["chainId", "paymentAddress"]],
  "fees.setFee": ["POST", "/integration/fees/set-meta", "fee.set-meta"],
  "fees.setPayout": ["POST", "/integration/fees/set-payout-meta", "fee.set-payout-meta"],
  "apiKeys.create": ["POST", "/integration/api-keys", "apikey.create"],
  "apiKeys.list": ["GET", "/integration/api-keys", "apikey.list"],
  "apiKeys.revoke": ["DELETE", "/integration/api-keys", "apikey.revoke", ["id"]],
  "webhookSecrets.create": ["POST", "/integration/webhook-secrets", "webhook_secret.create"],
  "webhookSecrets.list": ["GET", "/integration/webhook-secrets", "webhook_secret.list"],
  "webhookSecrets.revoke": ["DELETE", "/integration/webhook-secrets", "webhook_secret.revoke",
    ["id"]],
  "webhookEndpoints.create": ["POST", "/integration/webhook-endpoints", "webhook_endpoint.create"],
  "webhookEndpoints.list": ["GET", "/integration/webhook-endpoints", "webhook_endpoint.list"],
  "webhookEndpoints.update": ["PATCH", "/integration/webhook-endpoints", "webhook_endpoint.update",
    ["id"]],
  "webhookEndpoints.delete": ["DELETE", "/integration/webhook-endpoints", "webhook_endpoint.delete",
    ["id"]],
  "webhookEndpoints.test": ["POST", "/integration/webhook-endpoints/test", "webhook_endpoint.test",
    ["id"]],
  "events.page": ["GET", "/integration/events", "event.list", EVENT_QUERY],
  "events.list": ["GET", "/integration/events", "event.list", EVENT_QUERY],
  "events.get": ["GET", "/integration/events/{event_id}", "event.get", ["after", "limit"]],
  "events.redeliver": ["POST", "/integration/events/{event_id}/redeliver", "event.redeliver"],
  "escrows.export": ["GET", "/integration/escrows/export", "escrow.export", ["chainId"]],
  "gasless.get": ["GET", "/integration/gasless", "gasless.get", ["chainId"]],
  "gasless.set": ["POST", "/integration/gasless", "gasless.set"],
  "facilitator.verify": ["POST", "/x402/facilitator/verify", "facilitator.verify"],
  "facilitator.settle": ["POST", "/x402/facilitator/settle", "facilitator.settle"],
  "facilitator.supported": ["GET", "/x402/facilitator/supported", "facilitator.supported"],
  "settings.get": ["GET", "/integration/settings", "settings.get"],
  "settings.update": ["PUT", "/integration/settings", "settings.update"],
  "settings.brand": ["GET", "/integration/settings/brand", "brand.get"],
  "settings.updateBrand": ["PUT", "/integration/settings/brand", "brand.update"],
  "public.health": ["GET", "/healthz", null],
  "public.ready": ["GET", "/readyz", null],
  "public.paymentPage": ["GET", "/pay/{payment_address}", null, ["lang"]],
  "public.paymentStatus": ["GET", "/pay/{payment_address}/status", null],
  "public.payWithoutGas": ["POST", "/pay/{payment_address}/authorization", null],
  "public.x402Requirements": ["GET", "/pay/{payment_address}/x402", null],
  "public.relayFee": ["POST", "/fees/set-meta", null],
  "public.relayPayout": ["POST", "/fees/set-payout-meta", null],
});

/**
 * The { method, path, action, queryNames } of the SDK method `name`, its path parameters
 * filled in (the transport refuses a query parameter that is not in queryNames).
 */
export function route(name, params = {}) {
  const [method, template, action, queryNames = []] = ROUTES[name];
  const path = template.replace(/\{(\w+)\}/g, (_, key) => encodeURIComponent(params[key]));
  return { method, path, action, queryNames };
}
