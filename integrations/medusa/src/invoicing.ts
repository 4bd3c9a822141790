// The invoicing service as this provider uses it, all through @invoicing/client. A void is
// signed here (the SDK's invoices.void signs the balance its status lookup read, and a void
// must name what the escrow holds now) and sent through the SDK's own transport and its
// generated route table (ROUTES): the same credentials, retries and error classes as every
// SDK call, and no HTTP written here.
import { Client, InvalidRequest, ROUTES } from "@invoicing/client";
import type { Invoice, RefundOptions } from "@invoicing/client";
import { Wallet } from "ethers";

const DEFAULT_DEADLINE_S = 600;
const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";
// The EIP-712 Refund of the service's factory (docs: Refunds), which a void also is.
const REFUND_TYPES = {
  Refund: [
    { name: "user", type: "address" },
    { name: "salt", type: "bytes32" },
    { name: "token", type: "address" },
    { name: "to", type: "address" },
    { name: "amount", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
};

type TransportCall = (request: Record<string, unknown>) => Promise<any>;

export type InvoiceRequest = {
  chainId: number;
  amount: string;
  currency: string;
  invoiceId: string;
  tokenAddress?: string;
  redirectUrl?: string;
  cancelUrl?: string;
  webhookUrl?: string;
  metadata?: Record<string, unknown>;
};

/** One owner's invoices, with the refund delegate's wallet for voids and refunds. */
export class Invoicing {
  readonly client: Client;
  readonly #delegate: Wallet;

  constructor(client: Client, delegate: Wallet) {
    this.client = client;
    this.#delegate = delegate;
  }

  /** A manual-capture invoice; idempotent on invoiceId (a retry gets the same invoice). */
  async create(request: InvoiceRequest): Promise<Invoice> {
    return this.client.invoices.create({ ...request, capture: "manual" });
  }

  /** The invoice as the service sees it (the service re-reads an unpaid escrow first). */
  async status(paymentAddress: string): Promise<Invoice> {
    return this.client.invoices.status(paymentAddress);
  }

  async capture(chainId: number, paymentAddress: string): Promise<Record<string, unknown>> {
    return { ...await this.client.invoices.capture(chainId, paymentAddress) };
  }

  /**
   * Void: the whole escrow balance back to the payer, signed by the refund delegate. The
   * invoice's balanceRaw can differ from what the escrow holds (a refund just made, a
   * transfer after the payment): a void refused for its amount names what the escrow holds
   * (details.balanceRaw), and is signed again for that, once.
   */
  async void(invoice: Invoice, to: string, amountRaw: bigint): Promise<Record<string, unknown>> {
    try {
      return await this.#void(invoice, to, amountRaw);
    } catch (error) {
      const held = error instanceof InvalidRequest
        ? (error.details as { balanceRaw?: unknown } | undefined)?.balanceRaw : undefined;
      if (held === undefined) throw error;
      return this.#void(invoice, to, BigInt(held as string | bigint));
    }
  }

  async #void(invoice: Invoice, to: string, amountRaw: bigint): Promise<Record<string, unknown>> {
    const { nonce, factory } = await this.client.fees.get(invoice.chainId, invoice.paymentAddress);
    const deadline = BigInt(Math.floor(Date.now() / 1000) + DEFAULT_DEADLINE_S);
    const domain = {
      name: "PaymentFactory", version: "1", chainId: BigInt(invoice.chainId),
      verifyingContract: factory,
    };
    const message = {
      user: this.client.ownerAddress, salt: invoice.salt,
      token: invoice.tokenAddress ?? ZERO_ADDRESS, to, amount: amountRaw, nonce, deadline,
    };
    const signature = await this.#delegate.signTypedData(domain, REFUND_TYPES, message);
    const body = {
      chainId: invoice.chainId, paymentAddress: invoice.paymentAddress, to,
      amountRaw: String(amountRaw), nonce: String(nonce), deadline: String(deadline), signature,
    };
    const [method, path, action, queryNames] = ROUTES["invoices.void"];
    const transport = (this.client as unknown as { transport: { call: TransportCall } }).transport;
    return transport.call({ method, path, action, queryNames, body, idempotent: true });
  }

  /** A refund of `amountRaw` to `to`, signed by the refund delegate. */
  async refund(paymentAddress: string, to: string, amountRaw: bigint): Promise<Record<string, unknown>> {
    const submitted = await this.client.invoices.refund(paymentAddress, to, amountRaw, {
      // The SDK's ethers is its ESM build, ours the CommonJS one: the same Signer, two types.
      signer: this.#delegate as unknown as RefundOptions["signer"],
    });
    return { ...submitted };
  }
}

/**
 * Who paid the invoice: the sender of its first payment of record in its own token (whom
 * the service's own refunds pay), or null while the service has not recorded the payment
 * yet (it does seconds after it sees the balance).
 */
export function payerOfRecord(invoice: Invoice): string | null {
  const token = invoice.tokenAddress?.toLowerCase() ?? null;
  const own = (invoice.payments ?? []).filter(
    (payment) => (payment.tokenAddress?.toLowerCase() ?? null) === token);
  own.sort((a, b) => a.blockNumber - b.blockNumber);
  return own[0]?.from ?? null;
}
