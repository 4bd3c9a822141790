// The provider's options, as medusa-config.ts gives them, checked once at start.
import { MedusaError } from "@medusajs/framework/utils";

export type InvoicingOptions = {
  /** The service's base URL ("https://pay.example"). */
  baseUrl: string;
  /** The shop owner's address and API key on the service. */
  ownerAddress: string;
  apiKey: string;
  chainId: number;
  /** The token invoices are paid in (default: the chain's first allow-listed one). */
  tokenAddress?: string;
  /** Private key of the owner's refund delegate: signs voids and refunds (docs: Refunds). */
  refundDelegateKey: string;
  /** The owner's webhook signing secret(s) ("whsec_…"), several while rotating. */
  webhookSecret: string | string[];
  /** Where the payment page sends the payer back (the storefront), unless a session gives
   * `redirect_url` in its data. */
  redirectUrl?: string;
  /** Where the payment page's "back to the shop" goes without paying. */
  cancelUrl?: string;
  /** Seconds a signed webhook's timestamp may be off (default 300). */
  webhookToleranceS?: number;
  /** Seconds a cancel, or the delete or re-price of a paid session, keeps trying to pay the
   * payer back while the service answers "not yet" (the payer not recorded yet, a nonce just
   * taken) before it fails (default 120). */
  cancelTimeoutS?: number;
};

const REQUIRED = ["baseUrl", "ownerAddress", "apiKey", "refundDelegateKey", "webhookSecret"];

export function validateOptions(options: Record<string, unknown>): void {
  const missing = REQUIRED.filter((name) => !options[name]);
  if (!Number.isSafeInteger(options.chainId)) missing.push("chainId");
  if (missing.length > 0) {
    throw new MedusaError(MedusaError.Types.INVALID_DATA,
      `the invoicing payment provider needs ${missing.join(", ")}`);
  }
}
