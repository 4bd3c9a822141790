// The provider inside a real Medusa server (@medusajs/medusa on PostgreSQL, `medusa start`)
// against a real `invoicing dev`, driven through Medusa's HTTP API: the admin routes set up
// a region paying with the provider and a product sold through a publishable API key; the
// store routes, as a storefront calls them, make a cart, add the product, start a payment
// session with the provider, and (once the invoice is paid on anvil) complete the cart into
// an order whose payment is authorized; the admin's capture (as on fulfilment) captures it
// on the service too, and an order cancelled moments after its payment has its payment
// voided back to the payer. Then the service's own signed webhooks, delivered over HTTP to
// Medusa's webhook route, complete a paid cart into an order and capture its payment, and a
// refund from Medusa's admin route pays the payer back on chain.
// PostgreSQL: MEDUSA_TEST_POSTGRES (a server URL, default postgresql://postgres@127.0.0.1:5432).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { JsonRpcProvider } from "ethers";

import { type MedusaServer, startMedusa } from "./medusa-server.js";
import { anvilAccount, devService, type Ready, shopOwner, tusd, waitFor } from "./support.js";

const PROVIDER_ID = "pp_invoicing_invoicing";
// Medusa's webhook route of the provider: /hooks/payment/{identifier}_{id}.
const WEBHOOK_ROUTE = "/hooks/payment/invoicing_invoicing";
const PAYER_INDEX = 5;
const PAYER = "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc";  // anvil account 5

let service: Awaited<ReturnType<typeof devService>>;
let ready: Ready;
let shop: Awaited<ReturnType<typeof shopOwner>>;
let medusa: MedusaServer;
let shopSetUp: Awaited<ReturnType<typeof setUpShop>>;

before(async () => {
  service = await devService();
  ready = service.ready;
  shop = await shopOwner(ready);
  medusa = await startMedusa(shop.options);
  shopSetUp = await setUpShop();
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

/** A storefront's cart of two T-shirts (25 USD) with a payment session of the provider,
 * its invoice paid in TUSD on anvil. */
async function paidCart() {
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
  assert.equal(invoice.metadata?.medusa_session_id, session.id);

  const token = tusd(ready, anvilAccount(ready, PAYER_INDEX));
  await (await token.transfer(session.data.paymentAddress, 25_000_000n)).wait();
  return { store, cartId: cart.id as string, sessionId: session.id as string,
    paymentAddress: session.data.paymentAddress as string };
}

/** The order of a cart of 25 USD paid through the provider, its payment authorized. */
async function placedOrder(orderId: string) {
  const { order } = await medusa.admin("GET", `/admin/orders/${orderId}?fields=`
    + "id,status,payment_status,total,payment_collections.payments.id,"
    + "payment_collections.payments.amount,payment_collections.payments.provider_id");
  assert.equal(order.status, "pending");
  assert.equal(order.payment_status, "authorized");
  assert.equal(order.total, 25);
  const [payment] = order.payment_collections.flatMap((item: any) => item.payments);
  assert.equal(payment.amount, 25);
  assert.equal(payment.provider_id, PROVIDER_ID);
  return payment.id as string;
}

/** A storefront's checkout: the paid cart completed into an order. */
async function checkout() {
  const { store, cartId, paymentAddress } = await paidCart();
  // The cart completes once the provider reports the invoice authorized (paid, uncaptured);
  // until the service has seen the payment, the route answers with the cart and an error.
  const order = await waitFor(async () => {
    const completed = await store("POST", `/store/carts/${cartId}/complete`);
    return completed.type === "order" && completed.order;
  }, 60_000, "the cart to complete");
  return { orderId: order.id as string, paymentId: await placedOrder(order.id), paymentAddress };
}

const balances = () => tusd(ready, new JsonRpcProvider(ready.rpc_url));

test("a storefront cart paid on anvil is an order, captured on fulfilment; one cancelled at once is voided", async () => {
  const start = await balances().balanceOf(PAYER);

  // Captured in Medusa (25 USD, one capture) and on the service.
  const captured = await checkout();
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

  // Cancelled in Medusa as soon as it is placed, seconds after the payment (before the
  // service may have recorded who paid, which the void is addressed to); on the service
  // voided: of the two payments of 25 TUSD, the second back to the payer.
  const cancelled = await checkout();
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
    const balance = await balances().balanceOf(PAYER);
    return balance === start - 25_000_000n && balance;
  }, 30_000, "the payer's balance"), start - 25_000_000n);
});

test("the service's webhooks to Medusa's webhook route place and capture an order; an admin refund pays the payer back", async () => {
  // The owner's endpoint: Medusa's webhook route (over HTTP, signed by the service).
  await shop.client.webhookEndpoints.create({
    url: `${medusa.url}${WEBHOOK_ROUTE}`,
    events: ["invoice.paid", "invoice.captured", "invoice.voided", "invoice.refunded"],
  });
  const start = await balances().balanceOf(PAYER);

  // Paid, and never completed by the storefront: the invoice.paid delivery has Medusa
  // authorize the session and complete the cart into an order.
  const { store, cartId, sessionId, paymentAddress } = await paidCart();
  const orderPayment = await waitFor(async () => {
    const { payments } = await medusa.admin("GET",
      `/admin/payments?payment_session_id=${sessionId}&fields=id`);
    return payments[0];
  }, 90_000, `the order of the webhook\n${medusa.log()}`);
  const { cart } = await store("GET", `/store/carts/${cartId}?fields=id,completed_at`);
  assert.ok(cart.completed_at);
  const { orders } = await medusa.admin("GET", "/admin/orders?fields=id,"
    + "payment_collections.payments.id&limit=100");
  const order = orders.find((item: any) => item.payment_collections
    .some((collection: any) => collection.payments.some((payment: any) => payment.id === orderPayment.id)));
  assert.equal(await placedOrder(order.id), orderPayment.id);

  // Captured on the service (as from its dashboard): the invoice.captured delivery has
  // Medusa capture the payment.
  await shop.client.invoices.capture(ready.chain_id, paymentAddress);
  const captured = await waitFor(async () => {
    const { payment } = await medusa.admin("GET",
      `/admin/payments/${orderPayment.id}?fields=id,captured_at,captures.amount`);
    return payment.captured_at && payment;
  }, 90_000, `the capture of the webhook\n${medusa.log()}`);
  assert.deepEqual(captured.captures.map((item: any) => item.amount), [25]);

  // Refunded from Medusa's admin, 10 of the 25 USD: 10 TUSD back to the payer, from the
  // escrow (captured, not swept yet).
  await medusa.admin("POST", `/admin/payments/${orderPayment.id}/refund`, { amount: 10 });
  const { payment: refunded } = await medusa.admin("GET",
    `/admin/payments/${orderPayment.id}?fields=id,refunds.amount`);
  assert.deepEqual(refunded.refunds.map((item: any) => item.amount), [10]);
  const onService = await shop.client.invoices.status(paymentAddress);
  assert.deepEqual(onService.refunds?.map((item) => [item.to, item.amountRaw]),
    [[PAYER, 10_000_000n]]);
  assert.equal(await waitFor(async () => {
    const balance = await balances().balanceOf(PAYER);
    return balance === start - 15_000_000n && balance;
  }, 30_000, "the payer's balance"), start - 15_000_000n);
  const { order: refundedOrder } = await medusa.admin("GET",
    `/admin/orders/${order.id}?fields=id,payment_status`);
  assert.equal(refundedOrder.payment_status, "partially_refunded");
});
