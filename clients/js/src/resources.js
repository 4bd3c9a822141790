// The resources that need only the transport: API keys, webhook signing secrets, webhook
// endpoints, events, the escrow export, the owner's settings and the public routes (the team
// and the payments report: account.js).
import { route } from "./routes.js";
import { given, rawString } from "./transport.js";

const MAX_PAGE_SIZE = 100;  // the service caps limit at 100

export class Resource {
  constructor(transport) {
    Object.defineProperty(this, "transport", { value: transport, enumerable: false });
  }

  call(name, { params, ...options } = {}) {
    const idempotent = ["GET", "DELETE", "PUT"].includes(route(name).method);
    return this.transport.call({ ...route(name, params), idempotent, ...options });
  }
}

/** The owner's API keys; managed in signature mode (the client needs a signer). */
export class ApiKeys extends Resource {
  /** A new key: { id, apiKey, label, createdAt }; apiKey is shown this once. */
  async create(label) {
    if (label !== null && typeof label === "object") ({ label } = label);
    return this.call("apiKeys.create", { body: given({ label }) });
  }

  /** The owner's keys without their secrets. */
  async list() {
    return (await this.call("apiKeys.list")).items;
  }

  /** Revoke one key: { revoked: true, id, revokedAt }. */
  async revoke(id) {
    return this.call("apiKeys.revoke", { query: { id } });
  }
}

/** Secrets that sign deliveries (x-service-webhook-signature); several while rotating. */
export class WebhookSecrets extends Resource {
  /** A new secret: { id, secret, createdAt }; the "whsec_…" secret is shown this once. */
  async create() {
    return this.call("webhookSecrets.create", { body: {} });
  }

  /** The owner's secrets: ids and dates, never the secrets. */
  async list() {
    return (await this.call("webhookSecrets.list")).items;
  }

  async revoke(id) {
    return this.call("webhookSecrets.revoke", { query: { id } });
  }
}

/** Endpoints that receive the owner's events (invoice.paid, invoice.expired, …). */
export class WebhookEndpoints extends Resource {
  async create({ url, events, description }) {
    return this.call("webhookEndpoints.create", { body: { url, events, ...given({ description }) } });
  }

  async list() {
    return (await this.call("webhookEndpoints.list")).items;
  }

  /** Change what is given of { url, events, enabled, description }. */
  async update(id, changes) {
    const { url, events, enabled, description } = changes;
    return this.call("webhookEndpoints.update", {
      query: { id }, body: given({ url, events, enabled, description }), signedId: id,
      idempotent: true,
    });
  }

  async delete(id) {
    return this.call("webhookEndpoints.delete", { query: { id } });
  }

  /** Send a ping event to the endpoint: { eventId, deliveryId, endpointId, status } (202). */
  async test(id) {
    return this.call("webhookEndpoints.test", { query: { id }, body: {}, signedId: id });
  }
}

export class Events extends Resource {
  /**
   * One page, newest first: { items, hasMore }; `after`: the last id of the page before.
   * `deliveryStatus` (pending, failing, delivered, failed): only events with a delivery in
   * that state, such as every failing delivery across events.
   */
  async page({ type, deliveryStatus, after, limit = 20 } = {}) {
    return this.call("events.page", {
      query: { ...given({ type, deliveryStatus, after }), limit },
    });
  }

  /** Every event (of `type`, with a delivery in `deliveryStatus`, when given), newest first,
   * page after page. */
  async *list({ type, deliveryStatus, pageSize = MAX_PAGE_SIZE } = {}) {
    let after;
    for (;;) {
      const result = await this.page({ type, deliveryStatus, after, limit: pageSize });
      yield* result.items;
      if (!result.hasMore || result.items.length === 0) return;
      after = result.items.at(-1).id;
    }
  }

  /** One event with a page of its deliveries (oldest first) and their attempts:
   * { event, deliveries, hasMore }; `after`: the last delivery id of the page before,
   * `limit`: deliveries a page (the service's default: 20). */
  async get(id, { after, limit } = {}) {
    return this.call("events.get", {
      params: { event_id: id }, query: given({ after, limit }), signedId: id,
    });
  }

  /** Send the event again: to one endpoint, or (no endpointId) to the invoice's webhookUrl
   * (invoice.paid events only). */
  async redeliver(id, { endpointId } = {}) {
    const body = endpointId === undefined ? { webhookUrl: true } : { endpointId };
    return this.call("events.redeliver", { params: { event_id: id }, body, signedId: id });
  }
}

export class Escrows extends Resource {
  /** Every escrow of the owner on a chain with its salt: what recovers the funds without the
   * service. One object a line of the service's NDJSON. */
  async export(chainId) {
    const text = await this.call("escrows.export", { query: { chainId }, text: true });
    return text.split("\n").filter((line) => line).map((line) => JSON.parse(line));
  }
}

export class Settings extends Resource {
  async get() {
    return this.call("settings.get");
  }

  /**
   * Change what is given: { webhookApiKeyHeader }, whether paid webhooks carry the owner's API
   * key; { underpaymentToleranceBps } (0 to 500), how far short of the amount due a payment
   * may fall and still pay invoices created from now on.
   */
  async update({ webhookApiKeyHeader, underpaymentToleranceBps } = {}) {
    const body = given({ webhookApiKeyHeader, underpaymentToleranceBps });
    return this.call("settings.update", { body });
  }

  /** What the payment page shows of the owner: { displayName, accentColor, textColor, logoUrl }. */
  async brand() {
    return this.call("settings.brand");
  }

  /**
   * Change what is given: { displayName } (1 to 64 characters), { accentColor } ("#rrggbb"),
   * { logo } (the bytes of a PNG, JPEG or WebP file of at most 128 KiB, a Uint8Array); null
   * clears a part, a part left out stays.
   */
  async updateBrand({ displayName, accentColor, logo } = {}) {
    const body = {};
    if (displayName !== undefined) body.displayName = displayName;
    if (accentColor !== undefined) body.accentColor = accentColor;
    if (logo !== undefined) body.logo = logo === null ? null : Buffer.from(logo).toString("base64");
    return this.call("settings.updateBrand", { body });
  }

  /** Which events are mailed to the owner: { email, events, language, receipts } (no address
   * and no events when never set). */
  async notifications() {
    return this.call("settings.notifications");
  }

  /**
   * Mail `events` (invoice event types such as "invoice.paid"; [] mails nothing) to `email`,
   * in `language` (the service's default: "en"); `receipts` (default false): whether payers
   * may ask for a receipt on the payment page.
   */
  async updateNotifications({ email, events, language, receipts }) {
    const body = { email, events, ...given({ language, receipts }) };
    return this.call("settings.updateNotifications", { body });
  }
}

/** The owner's subscriptions (docs/integration/subscriptions.md): a payer signs once, and each
 * period is charged into that period's own invoice. */
export class Subscriptions extends Resource {
  /**
   * Create one of `amount` in the token's units (a decimal string) every `periodSeconds`, for
   * `maxPeriods` periods (default 0: no end). The payer approves authorization.spender and
   * signs authorization.typedData at `url` (or through public.authorizeSubscription). With a
   * subscriptionId (your reference, unique per owner) it is idempotent: the same body gets the
   * first back.
   */
  async create({ chainId, tokenAddress, amount, periodSeconds, maxPeriods, subscriptionId,
    description, redirectUrl, cancelUrl }) {
    if (typeof amount !== "string") {
      throw new TypeError("amount is in the token's units: give a decimal string such as \"0.01\"");
    }
    const body = {
      chainId, tokenAddress, amount, periodSeconds,
      ...given({ maxPeriods, subscriptionId, description, redirectUrl, cancelUrl }),
    };
    const idempotent = subscriptionId !== undefined && subscriptionId !== null;
    return this.call("subscriptions.create", { body, idempotent });
  }

  /** One subscription by its id (the service's), with its payer, nextChargeAt (ms, by the
   * chain's time) and charges. */
  async status(id) {
    return (await this.call("subscriptions.status", { query: { id } })).subscription;
  }

  /** Every subscription of the owner, newest first, page after page. */
  async *list({ pageSize = MAX_PAGE_SIZE } = {}) {
    const seen = new Set();
    for (let page = 1; ; page += 1) {
      const result = await this.call("subscriptions.list", { query: { page, limit: pageSize } });
      for (const subscription of result.items) {
        // One created while paging shifts the pages by one: never twice.
        if (!seen.has(subscription.id)) yield subscription;
        seen.add(subscription.id);
      }
      if (result.items.length === 0 || result.page * result.limit >= result.total) return;
    }
  }

  /** Cancel (idempotent): the service charges nothing for it any more. To end it on chain as
   * well, sign Cancel with the owner's wallet (docs: Subscriptions). */
  async cancel(id) {
    return (await this.call("subscriptions.cancel", { query: { id } })).subscription;
  }
}

/** Whether payers may pay the owner's invoices on a chain without gas (off by default). */
export class Gasless extends Resource {
  async get(chainId) {
    return this.call("gasless.get", { query: { chainId } });
  }

  /** Each gasless payment's gas counts against the owner's share of the relayer's budget. */
  async set(chainId, enabled) {
    return this.call("gasless.set", { body: { chainId, enabled } });
  }
}

/** This service as the x402 v2 facilitator of the owner's own x402 server (API key only):
 * the x402 specification's bodies and answers. */
export class Facilitator extends Resource {
  async verify(request) {
    return this.call("facilitator.verify", { body: request });
  }

  async settle(request) {
    return this.call("facilitator.settle", { body: request, idempotent: true });
  }

  async supported() {
    return this.call("facilitator.supported");
  }
}

/** The routes anyone may call (no credential is sent): health, payment pages, and the relay
 * of messages an owner signed in a wallet front end. */
export class Public extends Resource {
  async health() {
    return this.call("public.health");
  }

  /** { ready, checks, degraded? }; ready is false (HTTP 503) when a check failed. */
  async ready() {
    return this.call("public.ready", { accept: [503] });
  }

  /** The hosted payment page's HTML, in `lang` ("es", "zh-Hans", …) when given. */
  async paymentPage(paymentAddress, { lang } = {}) {
    return this.call("public.paymentPage", {
      params: { payment_address: paymentAddress }, text: true,
      ...(lang === undefined ? {} : { query: { lang } }),
    });
  }

  /** What the payment page shows: amounts, remaining, status. */
  async paymentStatus(paymentAddress) {
    return this.call("public.paymentStatus", { params: { payment_address: paymentAddress } });
  }

  /** Submit a payer's signed EIP-3009 authorization for the invoice at `paymentAddress`
   * ({ chainId, tokenAddress, from, to, value, validAfter, validBefore, nonce, signature });
   * the relayer pays the gas. The same authorization again answers with the same txHash. */
  async payWithoutGas(paymentAddress, authorization) {
    const body = { ...authorization };
    for (const name of ["value", "validAfter", "validBefore"]) {
      body[name] = rawString(authorization[name], name);
    }
    return this.call("public.payWithoutGas", {
      params: { payment_address: paymentAddress }, body, idempotent: true, ownerless: true,
    });
  }

  /** Submit the payer's signature of the subscription's authorization.typedData (`payer`: a
   * contract wallet names itself; `permit`: the payer's EIP-2612 permit, { value, deadline,
   * signature }, relayed before the first charge); period 0 is charged at once. The same
   * authorization again charges nothing more. */
  async authorizeSubscription(id, { signature, payer, permit }) {
    return (await this.call("public.authorizeSubscription", {
      params: { subscription_id: id }, body: { signature, ...given({ payer, permit }) },
      idempotent: true, ownerless: true,
    })).subscription;
  }

  /** Relay the payer's (or the owner's) signed EIP-712 Cancel of the subscription: it is
   * cancelled on chain. Posting it again sends nothing more. */
  async cancelSubscription(id, { signature }) {
    return (await this.call("public.cancelSubscription", {
      params: { subscription_id: id }, body: { signature }, idempotent: true, ownerless: true,
    })).subscription;
  }

  /** Ask for a receipt of the pending invoice at `paymentAddress`, mailed to `email` once it
   * is paid, in `lang` (the payment page's language) when given; 403 when the owner sends
   * none. Asking again replaces the address. */
  async askReceipt(paymentAddress, email, { lang } = {}) {
    return this.call("public.askReceipt", {
      params: { payment_address: paymentAddress }, query: given({ lang }), body: { email },
      idempotent: true, ownerless: true,
    });
  }

  /** The invoice's x402 resource asked without payment: the PaymentRequired object (402;
   * pay it with an x402 client such as @x402/fetch), or the page's status once nothing is due. */
  async x402Requirements(paymentAddress) {
    return this.call("public.x402Requirements", {
      params: { payment_address: paymentAddress }, accept: [402],
    });
  }

  /** Relay a SetFee the owner signed elsewhere, at `nonce` (no credential). */
  async relayFee({ chainId, feeBps, nonce, deadline, signature }) {
    return this.#relay("public.relayFee", { chainId, feeBps }, nonce, deadline, signature);
  }

  /** Relay a SetPayout the owner signed elsewhere, at `nonce` (no credential). */
  async relayPayout({ chainId, payoutAddress, nonce, deadline, signature }) {
    return this.#relay("public.relayPayout", { chainId, payoutAddress }, nonce, deadline,
      signature);
  }

  async #relay(name, fields, nonce, deadline, signature) {
    const body = {
      ...fields,
      nonce: rawString(nonce, "nonce"),
      deadline: rawString(deadline, "deadline"),
      signature,
    };
    return this.call(name, { body, idempotent: true });
  }
}
