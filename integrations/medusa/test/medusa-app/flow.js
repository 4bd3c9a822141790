// Run by `medusa exec` (test/server.test.ts): two carts of a region that pays with this
// provider, each paid on anvil and completed into an order; the first order's payment is
// captured (as on fulfilment), the second order is cancelled (its payment voided). Prints
// one line, "FLOW_RESULT <json>", for the test to check.
const {
  cancelOrderWorkflow, capturePaymentWorkflow, completeCartWorkflow, createCartWorkflow,
  createPaymentCollectionForCartWorkflow, createPaymentSessionsWorkflow, createRegionsWorkflow,
} = require("@medusajs/medusa/core-flows");
const { ContainerRegistrationKeys } = require("@medusajs/framework/utils");
const { Contract, HDNodeWallet, JsonRpcProvider, NonceManager } = require("ethers");

const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";
const PROVIDER_ID = "pp_invoicing_invoicing";

async function paidOrder(container, region, payer, ready) {
  const query = container.resolve(ContainerRegistrationKeys.QUERY);
  const { result: cart } = await createCartWorkflow(container).run({ input: {
    region_id: region.id, email: "buyer@example.com", currency_code: "usd",
    items: [{ title: "T-shirt", unit_price: 12.5, quantity: 2, requires_shipping: false }],
  } });
  await createPaymentCollectionForCartWorkflow(container).run({ input: { cart_id: cart.id } });
  const { data: [found] } = await query.graph({
    entity: "cart", filters: { id: cart.id }, fields: ["payment_collection.id"],
  });
  const { result: session } = await createPaymentSessionsWorkflow(container).run({ input: {
    payment_collection_id: found.payment_collection.id, provider_id: PROVIDER_ID,
  } });
  const token = new Contract(ready.tokens.TUSD,
    ["function transfer(address to, uint256 amount) returns (bool)"], payer);
  await (await token.transfer(session.data.paymentAddress, 25_000_000n)).wait();
  // The cart completes once the provider reports the invoice authorized (paid, uncaptured).
  for (let attempt = 1; ; attempt += 1) {
    try {
      const { result } = await completeCartWorkflow(container).run({ input: { id: cart.id } });
      const { data: [payment] } = await query.graph({
        entity: "payment", filters: { payment_session_id: session.id }, fields: ["id", "amount"],
      });
      return { orderId: result.id, session, payment };
    } catch (error) {
      if (attempt >= 60) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

exports.default = async function flow({ container }) {
  const ready = JSON.parse(process.env.INVOICING_DEV_READY);
  const wallet = HDNodeWallet.fromPhrase(ANVIL_MNEMONIC, undefined,
    `m/44'/60'/0'/0/${process.env.PAYER_INDEX}`);
  const payer = new NonceManager(wallet.connect(new JsonRpcProvider(ready.rpc_url)));
  const query = container.resolve(ContainerRegistrationKeys.QUERY);
  const { result: [region] } = await createRegionsWorkflow(container).run({ input: {
    regions: [{ name: "US", currency_code: "usd", payment_providers: [PROVIDER_ID] }],
  } });

  const captured = await paidOrder(container, region, payer, ready);
  await capturePaymentWorkflow(container).run({ input: { payment_id: captured.payment.id } });
  const { data: [afterCapture] } = await query.graph({
    entity: "payment", filters: { id: captured.payment.id },
    fields: ["captured_at", "captures.amount"],
  });

  const cancelled = await paidOrder(container, region, payer, ready);
  await cancelOrderWorkflow(container).run({ input: { order_id: cancelled.orderId } });
  const { data: [afterCancel] } = await query.graph({
    entity: "payment", filters: { id: cancelled.payment.id }, fields: ["canceled_at", "captured_at"],
  });
  const { data: [order] } = await query.graph({
    entity: "order", filters: { id: cancelled.orderId }, fields: ["status"],
  });

  console.log("FLOW_RESULT " + JSON.stringify({
    payer: wallet.address,
    captured: {
      orderId: captured.orderId, paymentAddress: captured.session.data.paymentAddress,
      amount: Number(captured.payment.amount), capturedAt: afterCapture.captured_at,
      captures: afterCapture.captures.map((capture) => Number(capture.amount)),
    },
    cancelled: {
      orderId: cancelled.orderId, paymentAddress: cancelled.session.data.paymentAddress,
      canceledAt: afterCancel.canceled_at, capturedAt: afterCancel.captured_at,
      orderStatus: order.status,
    },
  }));
};
