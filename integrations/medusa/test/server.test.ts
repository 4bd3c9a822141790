// The provider inside a real Medusa server (@medusajs/medusa on PostgreSQL, `medusa start`)
// against a real `invoicing dev`, driven through Medusa's HTTP API: the admin routes set up
// a region paying with the provider and a product sold through a publishable API key; the
// store routes, as a storefront calls them, make a cart, add the product, start a payment
// session with the provider, and (once the invoice is paid on anvil) complete the cart into
// an order whose payment is authorized; the admin's capture (as on fulfilment) captures it
// on the service too, and a cancelled order's payment is voided back to the payer.
// PostgreSQL: MEDUSA_TEST_POSTGRES (a server URL, default postgresql://postgres@127.0.0.1:5432).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { JsonRpcProvider } from "ethers";

import { type MedusaServer, startMedusa } from "./medusa-server.js";
import { anvilAccount, devService, type Ready, shopOwner, tusd, waitFor } from "./support.js";

const PROVIDER_ID = "pp_invoicing_invoicing";
const PAYER_INDEX = 5;
const PAYER = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc";  // anvil account 5

let service: Awaited<ReturnType<typeof devService>>;
let ready: Ready;
let shop: Awaited<ReturnType<typeof shopOwner>>;
let medusa: MedusaServer;

before(async () => {
  service = await devService();
  ready = service.ready;
  shop = await shopOwner(ready);
  medusa = await startMedusa(shop.options);
});

after(async () => {
  await medusa?.stop();
  await service?.stop();
});

/** What the shop's admin sets up: a US region paying with the provider, and a 12.50 USD
 * T-shirt in a sales channel that a publishable API key sells through. */
async function setUpShop(): Promise<{ regionId: string; variantId: string; publishableKey: string }> {
  const { region } = await medusa.admin("POST", "/admin/regions",
    { name: "US", currency_code: "usd", payment_providers: [PROVIDER_ID] });
  const { sales_channel: channel } = await medusa.admin("POST", "/admin/sales-channels",
    { name: "Storefront" });
  const { api_key: key } = await medusa.admin("POST", "/admin/api-keys",
    { title: "Storefront", type: "publishable" });
  await medusa.admin("POST", `/admin/api-keys/${key.id}/sales-channels`, { add: [channel.id] });
  const { product } = await medusa.admin("POST", "/admin/products", {
    title: "T-shirt", status: "published", sales_channels: [{ id: channel.id }],
    options: [{ title: "Size", values: ["M"] }],
    variants: [{
      title: "M", options: { Size: "M" }, manage_inventory: false,
      prices: [{ currency_code: "usd", amount: 12.5 }],
    }],
  });
  return { regionId: region.id, variantId: product.variants[0].id, publishableKey: key.token };
}

/** A storefront's checkout: a cart of two T-shirts (25 USD), a payment session with the
 * provider, the invoice paid in TUSD on anvil, the cart completed into an order. */
async function checkout(shopSetUp: Awaited<ReturnType<typeof setUpShop>>) {
  const store = medusa.store(shopSetUp.publishableKey);
  const { cart } = await store("POST", "/store/carts",
    { region_id: shopSetUp.regionId, email: "buyer@example.com" });
  const { cart: filled } = await store("POST", `/store/carts/${cart.id}/line-items`,
    { variant_id: shopSetUp.variantId, quantity: 2 });
  assert.equal(filled.total, 25);
  const { payment_collection: collection } = await store("POST", "/store/payment-collections",
    { cart_id: cart.id });
  const { payment_collection: withSession } = await store("POST",
    `/store/payment-collections/${collection.id}/payment-sessions`, { provider_id: PROVIDER_ID });
  const [session] = withSession.payment_sessions;
  assert.equal(session.provider_id, PROVIDER_ID);
  assert.equal(session.amount, 25);
  const invoice = await shop.client.invoices.status(session.data.paymentAddress);
  assert.equal(invoice.fiat?.amount, "25");
  assert.equal(invoice.capture, "manual");

  const token = tusd(ready, anvilAccount(ready, PAYER_INDEX));
  await (await token.transfer(session.data.paymentAddress, 25_000_000n)).wait();
  // The cart completes once the provider reports the invoice authorized (paid, uncaptured);
  // until the service has seen the payment, the route answers with the cart and an error.
  const order = await waitFor(async () => {
    const completed = await store("POST", `/store/carts/${cart.id}/complete`);
    return completed.type === "order" && completed.order;
  }, 60_000, "the cart to complete");
  const { order: placed } = await medusa.admin("GET", `/admin/orders/${order.id}?fields=`
    + "id,status,payment_status,total,payment_collections.payments.id,"
    + "payment_collections.payments.amount,payment_collections.payments.provider_id");
  assert.equal(placed.status, "pending");
  assert.equal(placed.payment_status, "authorized");
  assert.equal(placed.total, 25);
  const [payment] = placed.payment_collections.flatMap((item: any) => item.payments);
  assert.equal(payment.amount, 25);
  assert.equal(payment.provider_id, PROVIDER_ID);
  return { orderId: placed.id as string, paymentId: payment.id as string,
    paymentAddress: session.data.paymentAddress as string };
}

test("a storefront cart paid on anvil is an order, captured on fulfilment; a cancelled one is voided", async () => {
  const shopSetUp = await setUpShop();
  const token = tusd(ready, new JsonRpcProvider(ready.rpc_url));
  const start = await token.balanceOf(PAYER);

  // Captured in Medusa (25 USD, one capture) and on the service.
  const captured = await checkout(shopSetUp);
  await medusa.admin("POST", `/admin/payments/${captured.paymentId}/capture`, {});
  const { payment } = await medusa.admin("GET",
    `/admin/payments/${captured.paymentId}?fields=id,captured_at,captures.amount`);
  assert.ok(payment.captured_at);
  assert.deepEqual(payment.captures.map((item: any) => item.amount), [25]);
  const { order: capturedOrder } = await medusa.admin("GET",
    `/admin/orders/${captured.orderId}?fields=id,payment_status`);
  assert.equal(capturedOrder.payment_status, "captured");
  const onService = await shop.client.invoices.status(captured.paymentAddress);
  assert.equal(onService.capture, "manual");
  assert.equal(typeof onService.capturedAt, "number");
  assert.equal(onService.fiat?.amount, "25");

  // Cancelled in Medusa; on the service voided: of the two payments of 25 TUSD, the second
  // back to the payer.
  const cancelled = await checkout(shopSetUp);
  // A void needs the payer of record, which the service records seconds after the payment;
  // Medusa's cancel logs a provider's error and cancels the order all the same.
  await waitFor(async () => {
    for await (const event of shop.client.events.list({ type: "invoice.payment_recorded" })) {
      if ((event.data as { invoice?: { paymentAddress?: string } }).invoice?.paymentAddress
        === cancelled.paymentAddress) return true;
    }
    return false;
  }, 60_000, "the payment of record");
  await medusa.admin("POST", `/admin/orders/${cancelled.orderId}/cancel`, {});
  const { order: cancelledOrder } = await medusa.admin("GET",
    `/admin/orders/${cancelled.orderId}?fields=id,status,canceled_at,`
    + "payment_collections.payments.canceled_at,payment_collections.payments.captured_at");
  assert.equal(cancelledOrder.status, "canceled");
  assert.ok(cancelledOrder.canceled_at);
  const [cancelledPayment] = cancelledOrder.payment_collections.flatMap((item: any) => item.payments);
  assert.ok(cancelledPayment.canceled_at, medusa.log());
  assert.equal(cancelledPayment.captured_at, null);
  const voided = await waitFor(async () => {
    const invoice = await shop.client.invoices.status(cancelled.paymentAddress);
    return invoice.voidedAt ? invoice : null;
  }, 60_000, "the void");
  assert.equal(voided.status, "cancelled");
  assert.equal(await waitFor(async () => {
    const balance = await token.balanceOf(PAYER);
    return balance === start - 25_000_000n && balance;
  }, 30_000, "the payer's balance"), start - 25_000_000n);
});
