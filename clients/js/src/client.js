// The client: one owner, one credential (an API key, or the owner wallet signing each request).
// Every route of the service is a method here or in resources.js, built from its row of
// routes.js.
import { Wallet, getAddress } from "ethers";

import { Members, Reports } from "./account.js";
import { NonceMismatch } from "./errors.js";
import {
  ApiKeys,
  Escrows,
  Events,
  Facilitator,
  Gasless,
  Public,
  Settings,
  Subscriptions,
  WebhookEndpoints,
  WebhookSecrets,
} from "./resources.js";
import { route } from "./routes.js";
import { Transport, given, rawString } from "./transport.js";

const MAX_PAGE_SIZE = 100;  // the service caps limit at 100
const DEFAULT_DEADLINE_S = 600;
const LIST_FILTERS = ["chainId", "status", "paid", "tokenAddress", "invoiceId", "dateFrom", "dateTo"];
const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";

export class Client {
  /**
   * new Client({ baseUrl, ownerAddress, apiKey }) or
   * new Client({ baseUrl, ownerAddress, signer }) / ({ baseUrl, privateKey }) (signature mode).
   * Options: maxRetries (3), backoffS (0.5, doubled at each retry, at most 8), timeoutS (30),
   * fetch (a fetch implementation; the global one by default).
   */
  constructor({ baseUrl, ownerAddress, apiKey, signer, privateKey, ...options }) {
    if (signer && privateKey) throw new TypeError("give signer or privateKey, not both");
    const wallet = privateKey ? new Wallet(privateKey) : signer;
    const owner = ownerAddress ?? (privateKey ? wallet.address : undefined);
    if (privateKey && getAddress(owner) !== wallet.address) {
      throw new TypeError(`privateKey belongs to ${wallet.address}, not to ownerAddress ${owner}`);
    }
    this.transport = new Transport({ baseUrl, ownerAddress: owner, apiKey, signer: wallet, ...options });
    this.ownerAddress = owner;
    this.invoices = new Invoices(this.transport);
    this.fees = new Fees(this.transport);
    this.apiKeys = new ApiKeys(this.transport);
    this.webhookSecrets = new WebhookSecrets(this.transport);
    this.webhookEndpoints = new WebhookEndpoints(this.transport);
    this.events = new Events(this.transport);
    this.escrows = new Escrows(this.transport);
    this.settings = new Settings(this.transport);
    this.members = new Members(this.transport);
    this.reports = new Reports(this.transport);
    this.subscriptions = new Subscriptions(this.transport);
    this.gasless = new Gasless(this.transport);
    this.facilitator = new Facilitator(this.transport);
    this.public = new Public(this.transport);
  }

  toJSON() {
    return this.transport.toJSON();  // never a credential
  }
}

/**
 * An amount in the token's units as the service takes it: a decimal string. A bigint is
 * refused: in this SDK a bigint is raw units (wei), and `amount` is in token units
 * (10000000000000000n would be 10^16 whole tokens); a number is never exact.
 */
function decimalAmount(amount) {
  if (typeof amount === "string") return amount;
  if (typeof amount === "bigint") {
    throw new TypeError("amount is in the token's units: give a decimal string such as \"0.01\"; "
      + "a bigint means raw units in this SDK (formatUnits(raw, decimals) converts)");
  }
  throw new TypeError("amount must be a decimal string (never a float)");
}

class Invoices {
  #transport;

  constructor(transport) {
    this.#transport = transport;
  }

  /**
   * Create an invoice of `amount` in the token's units (a decimal string), or with `currency`
   * (ISO 4217, "USD") a price in that currency, locked into the token amount by the service
   * (`invoice.fiat`). With an invoiceId
   * it is idempotent (an identical retry returns the same invoice, `created: false`) and
   * retried after a lost connection or a 5xx. The answer is the Invoice plus `created` and,
   * in signature mode, `requestSignature` (the x-service-signature the paid webhook carries).
   * `capture: "manual"`: once paid the funds wait in the escrow for invoices.capture or
   * invoices.void (default "automatic").
   */
  async create({ chainId, amount, tokenAddress, invoiceId, webhookUrl, expiresAt, description,
    metadata, currency, redirectUrl, cancelUrl, capture }) {
    // Omitted, never null: a null is a different signed payload.
    const body = {
      chainId,
      amount: decimalAmount(amount),
      ...given({ invoiceId, tokenAddress, webhookUrl, description, expiresAt, metadata, currency,
        redirectUrl, cancelUrl, capture }),
    };
    const { data, status, headers } = await this.#transport.call({
      ...route("invoices.create"),
      body,
      idempotent: invoiceId !== undefined && invoiceId !== null,
      full: true,
    });
    const created = status === 201;
    return { ...data, created, requestSignature: created ? (headers.signature ?? null) : null };
  }

  /** One invoice by its paymentAddress; the service re-checks the chain first. */
  async status(paymentAddress) {
    const data = await this.#transport.call({
      ...route("invoices.status"), query: { paymentAddress }, idempotent: true,
    });
    return data.invoice;
  }

  /** One page: { items, total, page, limit }. */
  async page({ page = 1, limit = 20, ...filters } = {}) {
    return this.#transport.call({
      ...route("invoices.page"), query: { ...listQuery(filters), page, limit }, idempotent: true,
    });
  }

  /**
   * Every invoice matching the filters (chainId, status, paid, tokenAddress, invoiceId,
   * dateFrom, dateTo), newest first, reading page after page as it goes:
   * `for await (const invoice of client.invoices.list({ status: "paid" }))`.
   */
  async *list({ pageSize = MAX_PAGE_SIZE, ...filters } = {}) {
    const query = listQuery(filters);
    const seen = new Set();
    for (let page = 1; ; page += 1) {
      const result = await this.page({ ...query, page, limit: pageSize });
      for (const invoice of result.items) {
        // An invoice created while paging shifts the pages by one: never twice.
        if (!seen.has(invoice.id)) yield invoice;
        seen.add(invoice.id);
      }
      // Everything has been read when page * limit >= total.
      if (result.items.length === 0 || result.page * result.limit >= result.total) return;
    }
  }

  /** Soft-delete: { deleted: true, invoiceId, chainId }. */
  async delete(chainId, invoiceId) {
    return this.#transport.call({
      ...route("invoices.delete"), query: { chainId, invoiceId }, idempotent: true,
    });
  }

  /**
   * Sign a Refund (EIP-712) of `amountRaw` (a bigint, raw units) from the invoice's escrow to
   * `to`, and have the service relay it. Options: tokenAddress (the asset; default the
   * invoice's own, null: the native coin), signer, deadline, factory (as for fees.setFee).
   */
  async refund(paymentAddress, to, amountRaw, options = {}) {
    const amount = rawString(amountRaw, "amountRaw");
    const invoice = await this.status(paymentAddress);
    const token = "tokenAddress" in options ? options.tokenAddress : invoice.tokenAddress;
    const fields = {
      salt: invoice.salt, token: token ?? ZERO_ADDRESS, to, amount: BigInt(amount),
    };
    const bodyFields = { paymentAddress, to, amountRaw: amount, tokenAddress: token ?? null };
    // Signed for the factory that made the escrow (after an upgrade, maybe a previous one).
    return relaySigned(this.#transport, invoice.chainId, options, "invoices.refund", REFUND_TYPES,
      fields, bodyFields, paymentAddress);
  }

  /** Capture a paid manual-capture invoice: its escrow is swept to the owner from now on.
   * { ownerAddress, chainId, invoiceId, paymentAddress, capture, capturedAt }; a repeated
   * capture gets the same answer. */
  async capture(chainId, paymentAddress) {
    return this.#transport.call({
      ...route("invoices.capture"), body: { chainId, paymentAddress }, idempotent: true,
    });
  }

  /**
   * Refund the payer of record of an invoice with no signature at hand: the service signs the
   * Refund with its own key, which the owner named as its refund delegate. Exactly one of
   * amount (a decimal string in the invoice's price: its currency when priced in one) and
   * amountRaw. Not idempotent: each call is a new refund.
   */
  async serviceRefund(chainId, paymentAddress, { amount, amountRaw } = {}) {
    const body = { chainId, paymentAddress };
    if (amount !== undefined) body.amount = amount;
    if (amountRaw !== undefined) body.amountRaw = rawString(amountRaw, "amountRaw");
    return this.#transport.call({ ...route("invoices.service_refund"), body });
  }

  /**
   * Void a paid manual-capture invoice: sign a Refund (EIP-712) of its whole payment (what the
   * escrow holds of the invoice's token, its balanceRaw as status reads it) to `to`, the
   * payer, and have the service relay it. Options: signer (the owner or the owner's refund
   * delegate), deadline, factory (as for refund).
   */
  async void(paymentAddress, to, options = {}) {
    const invoice = await this.status(paymentAddress);
    const amount = rawString(invoice.balanceRaw, "balanceRaw");
    const fields = {
      salt: invoice.salt, token: invoice.tokenAddress ?? ZERO_ADDRESS, to, amount: BigInt(amount),
    };
    const bodyFields = { paymentAddress, to, amountRaw: amount };
    return relaySigned(this.#transport, invoice.chainId, options, "invoices.void", REFUND_TYPES,
      fields, bodyFields, paymentAddress);
  }

  /** The paid webhook's events and delivery attempts of one invoice. */
  async webhooks(paymentAddress) {
    return this.#transport.call({
      ...route("invoices.webhooks"), query: { paymentAddress }, idempotent: true,
    });
  }
}

function listQuery(filters) {
  const unknown = Object.keys(filters).filter((key) => !LIST_FILTERS.includes(key));
  if (unknown.length > 0) throw new TypeError(`unknown list filters: ${unknown.join(", ")}`);
  return given(filters);
}

const DOMAIN = { name: "PaymentFactory", version: "1" };
const NONCE_AND_DEADLINE = [
  { name: "nonce", type: "uint256" },
  { name: "deadline", type: "uint256" },
];
const SET_FEE_TYPES = {
  SetFee: [
    { name: "user", type: "address" },
    { name: "feeBps", type: "uint256" },
    ...NONCE_AND_DEADLINE,
  ],
};
const SET_PAYOUT_TYPES = {
  SetPayout: [
    { name: "user", type: "address" },
    { name: "payout", type: "address" },
    ...NONCE_AND_DEADLINE,
  ],
};
const SET_REFUND_DELEGATE_TYPES = {
  SetRefundDelegate: [
    { name: "user", type: "address" },
    { name: "delegate", type: "address" },
    ...NONCE_AND_DEADLINE,
  ],
};
const REFUND_TYPES = {
  Refund: [
    { name: "user", type: "address" },
    { name: "salt", type: "bytes32" },
    { name: "token", type: "address" },
    { name: "to", type: "address" },
    { name: "amount", type: "uint256" },
    ...NONCE_AND_DEADLINE,
  ],
};

class Fees {
  #transport;

  constructor(transport) {
    this.#transport = transport;
  }

  /** The owner's settings as the factory holds them: { feeBps, payoutAddress, nonce, factory }
   * (nonce, a bigint, is the next one to sign); with paymentAddress (one of the owner's
   * escrows), those of the factory that made it. */
  async get(chainId, paymentAddress) {
    return this.#transport.call({
      ...route("fees.get"), query: given({ chainId, paymentAddress }), idempotent: true,
    });
  }

  /**
   * Sign SetFee (EIP-712) with the owner wallet and have the service relay it (it pays the gas).
   * Reads the nonce first, and once more after a nonce_mismatch. Options: signer (the owner's
   * ethers Signer; default: the client's own), deadline (unix seconds; default now + 600),
   * factory (default: what the service names).
   */
  async setFee(chainId, feeBps, options = {}) {
    return relaySigned(this.#transport, chainId, options, "fees.setFee", SET_FEE_TYPES, { feeBps: BigInt(feeBps) },
      { feeBps: Number(feeBps) });
  }

  /** Sign SetPayout and have the service relay it; options as for setFee. */
  async setPayout(chainId, payoutAddress, options = {}) {
    return relaySigned(this.#transport, chainId, options, "fees.setPayout", SET_PAYOUT_TYPES,
      { payout: payoutAddress }, { payoutAddress });
  }

  /** Sign SetRefundDelegate and have the service relay it: `delegate` may then sign the
   * owner's refunds and voids (the zero address revokes); options as for setFee. */
  async setRefundDelegate(chainId, delegate, options = {}) {
    return relaySigned(this.#transport, chainId, options, "fees.setRefundDelegate",
      SET_REFUND_DELEGATE_TYPES, { delegate }, { delegate });
  }
}

/**
 * Sign one of the owner's EIP-712 messages at its current nonce and have the service relay
 * it; after a nonce_mismatch read the nonce and sign once more.
 */
async function relaySigned(transport, chainId, options, name, types, fields, bodyFields, paymentAddress) {
  const signer = options.signer ?? transport.signer?.signer;
  if (!signer) throw new TypeError("give options.signer: the owner wallet signs this message");
  const attempt = async () => {
    const query = given({ chainId, paymentAddress });
    const settings = await transport.call({ ...route("fees.get"), query, idempotent: true });
    const factory = options.factory ?? settings.factory;
    if (!factory) throw new TypeError("the service did not name its factory: give options.factory");
    const deadline = options.deadline ?? Math.floor(Date.now() / 1000) + DEFAULT_DEADLINE_S;
    const message = {
      user: transport.ownerAddress,
      ...fields,
      nonce: settings.nonce,
      deadline: BigInt(deadline),
    };
    const domain = { ...DOMAIN, chainId: BigInt(chainId), verifyingContract: factory };
    const signature = await signer.signTypedData(domain, types, message);
    // The same signed message sent twice gets the transaction of the first back.
    return transport.call({
      ...route(name),
      body: {
        chainId,
        ...bodyFields,
        nonce: String(settings.nonce),
        deadline: String(deadline),
        signature,
      },
      idempotent: true,
    });
  };
  try {
    return await attempt();
  } catch (error) {
    if (!(error instanceof NonceMismatch)) throw error;
    return attempt();  // another message took the nonce meanwhile: read it again, once
  }
}
