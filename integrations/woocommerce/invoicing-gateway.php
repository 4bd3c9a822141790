<?php
/**
 * Plugin Name: Crypto invoices (self-hosted invoicing service)
 * Description: A WooCommerce payment gateway for a self-hosted crypto invoicing service: invoices, hosted payment page, signed webhooks, manual capture.
 * Version: 0.1.0
 * Requires PHP: 7.4
 * Requires Plugins: woocommerce
 * License: MIT
 *
 * @package Invoicing_Gateway
 */

defined( 'ABSPATH' ) || exit;

define( 'INVOICING_GATEWAY_DIR', __DIR__ );

/** Loads the gateway once WooCommerce is there, and offers it to WooCommerce. */
function invoicing_gateway_load() {
	if ( ! class_exists( 'WC_Payment_Gateway' ) ) {
		return;
	}
	require_once INVOICING_GATEWAY_DIR . '/includes/class-invoicing-client.php';
	require_once INVOICING_GATEWAY_DIR . '/includes/class-invoicing-webhook-signature.php';
	require_once INVOICING_GATEWAY_DIR . '/includes/class-wc-gateway-invoicing.php';
	add_filter( 'woocommerce_payment_gateways', 'invoicing_gateway_register' );
	add_action( 'woocommerce_order_status_on-hold_to_processing', 'invoicing_gateway_capture' );
	add_action( 'woocommerce_order_status_on-hold_to_completed', 'invoicing_gateway_capture' );
}
add_action( 'plugins_loaded', 'invoicing_gateway_load' );

function invoicing_gateway_register( $gateways ) {
	$gateways[] = 'WC_Gateway_Invoicing';
	return $gateways;
}

/** A manual-capture order leaving on-hold is captured by the gateway WooCommerce holds. */
function invoicing_gateway_capture( $order_id ) {
	$gateways = WC()->payment_gateways()->payment_gateways();
	if ( isset( $gateways[ WC_Gateway_Invoicing::ID ] ) ) {
		$gateways[ WC_Gateway_Invoicing::ID ]->capture_order( $order_id );
	}
}
