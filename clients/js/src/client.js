// The client: one owner, one credential (an API key, or the owner wallet signing each request).
import { Wallet, getAddress } from "ethers";

import { NonceMismatch } from "./errors.js";
import { Transport, given } from "./transport.js";

const MAX_PAGE_SIZE = 100;  // the service caps limit at 100
const DEFAULT_DEADLINE_S = 600;
const LIST_FILTERS = ["chainId", "status", "paid", "tokenAddress", "invoiceId", "dateFrom", "dateTo"];

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
  }

  toJSON() {
    return this.transport.toJSON();  // never a credential
  }
}

/** A decimal string as the service takes it; never a float. */
function decimalAmount(amount) {
  if (typeof amount === "bigint") return String(amount);
  if (typeof amount === "string") return amount;
  throw new TypeError("amount must be a decimal string or a bigint (never a float)");
}

class Invoices {
  #transport;

  constructor(transport) {
    this.#transport = transport;
  }

  /**
   * Create an invoice. With an invoiceId it is idempotent (an identical retry returns the
   * same invoice, `created: false`) and retried after a lost connection or a 5xx.
   * The answer is the Invoice plus `created` and, in signature mode, `requestSignature`
   * (the x-service-signature the paid webhook carries back).
   */
  async create({ chainId, amount, tokenAddress, invoiceId, webhookUrl, expiresAt, description,
    metadata }) {
    // Omitted, never null: a null is a different signed payload (spec 5.2 rule 6).
    const body = {
      chainId,
      amount: decimalAmount(amount),
      ...given({ invoiceId, tokenAddress, webhookUrl, description, expiresAt, metadata }),
    };
    const { data, status, headers } = await this.#transport.call({
      method: "POST",
      path: "/integration/invoices",
      action: "invoice.create",
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
      method: "GET",
      path: "/integration/invoices/status",
      action: "invoice.status",
      query: { paymentAddress },
      idempotent: true,
    });
    return data.invoice;
  }

  /** One page: { items, total, page, limit }. */
  async page({ page = 1, limit = 20, ...filters } = {}) {
    return this.#transport.call({
      method: "GET",
      path: "/integration/invoices",
      action: "invoice.list",
      query: { ...listQuery(filters), page, limit },
      idempotent: true,
    });
  }

  /**
   * Every invoice matching the filters (chainId, status, paid, tokenAddress, invoiceId,
   * dateFrom, dateTo), newest first, reading page after page as it goes:
   * `for await (const invoice of client.invoices.list({ status: "paid" }))`.
   */
  async *list({ pageSize = MAX_PAGE_SIZE, ...filters } = {}) {
    const query = listQuery(filters);
    for (let page = 1; ; page += 1) {
      const result = await this.page({ ...query, page, limit: pageSize });
      yield* result.items;
      // Spec 4.3: everything has been read when page * limit >= total.
      if (result.items.length === 0 || result.page * result.limit >= result.total) return;
    }
  }

  /** Soft-delete: { deleted: true, invoiceId, chainId }. */
  async delete(chainId, invoiceId) {
    return this.#transport.call({
      method: "DELETE",
      path: "/integration/invoices",
      action: "invoice.delete",
      query: { chainId, invoiceId },
      idempotent: true,
    });
  }
}

function listQuery(filters) {
  const unknown = Object.keys(filters).filter((key) => !LIST_FILTERS.includes(key));
  if (unknown.length > 0) throw new TypeError(`unknown list filters: ${unknown.join(", ")}`);
  return given(filters);
}

const DOMAIN = { name: "PaymentFactory", version: "1" };
const SET_FEE_TYPES = {
  SetFee: [
    { name: "user", type: "address" },
    { name: "feeBps", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
};
const SET_PAYOUT_TYPES = {
  SetPayout: [
    { name: "user", type: "address" },
    { name: "payout", type: "address" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
};

class Fees {
  #transport;

  constructor(transport) {
    this.#transport = transport;
  }

  /** The owner's settings as the factory holds them: { feeBps, payoutAddress, nonce }
   * (nonce, a decimal string, is the next one to sign). */
  async get(chainId) {
    return this.#transport.call({
      method: "GET",
      path: "/integration/fees",
      action: "fee.get",
      query: { chainId },
      idempotent: true,
    });
  }

  /**
   * Sign SetFee (EIP-712) with the owner wallet and have the service relay it (it pays the gas).
   * Reads the nonce first, and once more after a nonce_mismatch. Options: signer (the owner's
   * ethers Signer; default: the client's own), deadline (unix seconds; default now + 600),
   * factory (default: what the service names).
   */
  async setFee(chainId, feeBps, options = {}) {
    return this.#submit(chainId, options, "/integration/fees/set-meta", "fee.set-meta",
      SET_FEE_TYPES, { feeBps: BigInt(feeBps) }, { feeBps: Number(feeBps) });
  }

  /** Sign SetPayout and have the service relay it; options as for setFee. */
  async setPayout(chainId, payoutAddress, options = {}) {
    return this.#submit(chainId, options, "/integration/fees/set-payout-meta",
      "fee.set-payout-meta", SET_PAYOUT_TYPES, { payout: payoutAddress }, { payoutAddress });
  }

  async #submit(chainId, options, path, action, types, fields, bodyFields) {
    const signer = options.signer ?? this.#transport.signer?.signer;
    if (!signer) throw new TypeError("give options.signer: the owner wallet signs this message");
    const attempt = async () => {
      const settings = await this.get(chainId);
      const factory = options.factory ?? settings.factory;
      if (!factory) throw new TypeError("the service did not name its factory: give options.factory");
      const deadline = options.deadline ?? Math.floor(Date.now() / 1000) + DEFAULT_DEADLINE_S;
      const message = {
        user: this.#transport.ownerAddress,
        ...fields,
        nonce: BigInt(settings.nonce),
        deadline: BigInt(deadline),
      };
      const domain = { ...DOMAIN, chainId: BigInt(chainId), verifyingContract: factory };
      const signature = await signer.signTypedData(domain, types, message);
      // The same signed message sent twice gets the transaction of the first back.
      return this.#transport.call({
        method: "POST",
        path,
        action,
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
}

/** The owner's API keys; managed in signature mode (the client needs a signer). */
class ApiKeys {
  #transport;

  constructor(transport) {
    this.#transport = transport;
  }

  /** A new key: { id, apiKey, label, createdAt }; apiKey is shown this once. */
  async create(label) {
    if (label !== null && typeof label === "object") ({ label } = label);
    return this.#transport.call({
      method: "POST",
      path: "/integration/api-keys",
      action: "apikey.create",
      body: given({ label }),
    });
  }

  /** The owner's keys without their secrets. */
  async list() {
    const data = await this.#transport.call({
      method: "GET",
      path: "/integration/api-keys",
      action: "apikey.list",
      idempotent: true,
    });
    return data.items;
  }

  /** Revoke one key: { revoked: true, id, revokedAt }. */
  async revoke(id) {
    return this.#transport.call({
      method: "DELETE",
      path: "/integration/api-keys",
      action: "apikey.revoke",
      query: { id },
      idempotent: true,
    });
  }
}
