// The owner's team (docs/integration/members.md) and the payments report
// (docs/integration/reports.md).
import { Resource } from "./resources.js";
import { given } from "./transport.js";

/** Wallets that act on the owner's account in the dashboard, as viewer, operator or admin.
 * Only the owner's own signature manages them: the client needs a signer (given an apiKey as
 * well, it signs these calls). */
export class Members extends Resource {
  /** The members: [{ address, role, createdAt, updatedAt }]. */
  async list() {
    return (await this.call("members.list")).items;
  }

  /** Add `address` as a `role` ("viewer", "operator" or "admin") member, or change a member's
   * role; the same call again changes nothing. */
  async add(address, role) {
    return this.call("members.add", { body: { address, role }, idempotent: true });
  }

  /** Remove a member (404 when not one): { removed: true, address }; its dashboard sessions
   * on the account end. */
  async remove(address) {
    return this.call("members.remove", { query: { address } });
  }
}

export class Reports extends Resource {
  /**
   * The owner's payments with dateFrom <= paidAt < dateTo (unix ms), only of invoices priced in
   * `currency` (ISO 4217) when given. format "csv" (the default): the CSV text, a header line
   * then a row a payment, every row at once; "json": one page { items, nextCursor } of `limit`
   * rows (the service's default: 100), the next from `cursor: nextCursor`.
   */
  async payments({ dateFrom, dateTo, currency, format = "csv", limit, cursor }) {
    const query = { dateFrom, dateTo, ...given({ currency }), format, ...given({ limit, cursor }) };
    return this.call("reports.payments", { query, text: format === "csv" });
  }
}
