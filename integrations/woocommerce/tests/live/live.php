<?php
/**
 * The plugin against a real invoicing service, driven step by step by
 * tests/integration/test_woocommerce_plugin.py (which starts `invoicing dev`, pays on anvil
 * and receives the real webhook). The shop's orders live in a state file between steps.
 *
 *   php live.php create  STATE ORDER_ID TOTAL CURRENCY   -> JSON: process_payment's answer, the order's meta
 *   php live.php deliver STATE BODY_FILE HEADERS_JSON    -> JSON: handle_delivery's answer, the order
 *   php live.php refund  STATE ORDER_ID AMOUNT           -> JSON: process_refund's answer (true, or the error code), the orders
 *
 * The gateway's settings come from the environment: INVOICING_BASE_URL, INVOICING_API_KEY,
 * INVOICING_OWNER, INVOICING_CHAIN_ID, INVOICING_WEBHOOK_SECRET, SHOP_HOME, and
 * INVOICING_MANUAL_CAPTURE (yes or no, default no). No HTTP handler
 * is set: the stand-in wp_remote_post sends real requests.
 */

require dirname( __DIR__ ) . '/bootstrap.php';

list( , $step, $state ) = $argv;
$GLOBALS['wp_options']['home'] = getenv( 'SHOP_HOME' );
update_option(
	'woocommerce_invoicing_settings',
	array(
		'enabled'        => 'yes',
		'service_url'    => getenv( 'INVOICING_BASE_URL' ),
		'api_key'        => getenv( 'INVOICING_API_KEY' ),
		'webhook_secret' => getenv( 'INVOICING_WEBHOOK_SECRET' ),
		'owner_address'  => getenv( 'INVOICING_OWNER' ),
		'chain_id'       => getenv( 'INVOICING_CHAIN_ID' ),
		'manual_capture' => getenv( 'INVOICING_MANUAL_CAPTURE' ) ? getenv( 'INVOICING_MANUAL_CAPTURE' ) : 'no',
	)
);
$gateway = new WC_Gateway_Invoicing();
if ( is_file( $state ) ) {
	$GLOBALS['wc_orders'] = unserialize( file_get_contents( $state ) );
}

function describe( WC_Order $order ) {
	return array(
		'status'         => $order->get_status(),
		'transactionId'  => $order->get_transaction_id(),
		'paymentAddress' => $order->get_meta( '_invoicing_payment_address' ),
		'invoiceId'      => $order->get_meta( '_invoicing_invoice_id' ),
		'requiredRaw'    => $order->get_meta( '_invoicing_required_raw' ),
		'notes'          => $order->notes,
	);
}

if ( 'create' === $step ) {
	$order                                  = new WC_Order( (int) $argv[3], $argv[4], $argv[5], 'invoicing' );
	$GLOBALS['wc_orders'][ $order->get_id() ] = $order;
	$result                                 = $gateway->process_payment( $order->get_id() );
	$output                                 = array( 'result' => $result, 'order' => describe( $order ), 'notices' => $GLOBALS['wc_notices'] );
} elseif ( 'refund' === $step ) {
	$answer = $gateway->process_refund( (int) $argv[3], $argv[4], 'live test' );
	$orders = array();
	foreach ( $GLOBALS['wc_orders'] as $id => $order ) {
		$orders[ $id ] = describe( $order );
	}
	$output = array( 'answer' => is_wp_error( $answer ) ? $answer->get_error_code() : $answer, 'orders' => $orders );
} else {
	$answer = $gateway->handle_delivery( file_get_contents( $argv[3] ), json_decode( $argv[4], true ) );
	$orders = array();
	foreach ( $GLOBALS['wc_orders'] as $id => $order ) {
		$orders[ $id ] = describe( $order );
	}
	$output = array( 'answer' => $answer, 'orders' => $orders );
}
file_put_contents( $state, serialize( $GLOBALS['wc_orders'] ) );
echo json_encode( $output ), "\n";
