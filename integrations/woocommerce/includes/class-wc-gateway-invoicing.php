<?php
/**
 * The WooCommerce payment gateway: an order becomes an invoice of the invoicing service, the
 * payer pays on its hosted page, and the service's signed paid webhook completes the order.
 *
 * @package Invoicing_Gateway
 */

defined( 'ABSPATH' ) || exit;

/**
 * Pay with crypto through a self-hosted invoicing service.
 */
class WC_Gateway_Invoicing extends WC_Payment_Gateway {

	const ID = 'invoicing';

	/** Order meta keys this gateway writes. */
	const META_PAYMENT_ADDRESS = '_invoicing_payment_address';
	const META_INVOICE_ID      = '_invoicing_invoice_id';
	const META_REQUIRED_RAW    = '_invoicing_required_raw';
	const META_CAPTURE         = '_invoicing_capture';
	const META_PAID_AT         = '_invoicing_paid_at';
	const META_CAPTURED_AT     = '_invoicing_captured_at';

	/** @var Invoicing_Client|null Set by tests; otherwise built from the settings. */
	public $client = null;

	public function __construct() {
		$this->id                 = self::ID;
		$this->method_title       = 'Crypto invoice';
		$this->method_description = 'Takes payment in a stablecoin or the native coin through your invoicing service: the payer pays on its hosted page and the signed webhook completes the order.';
		$this->has_fields         = false;
		$this->supports           = array( 'products', 'refunds' );
		$this->init_form_fields();
		$this->init_settings();
		$this->title       = $this->get_option( 'title' );
		$this->description = $this->get_option( 'description' );
		add_action( 'woocommerce_update_options_payment_gateways_' . $this->id, array( $this, 'process_admin_options' ) );
		add_action( 'woocommerce_api_' . $this->id, array( $this, 'webhook_callback' ) );
	}

	public function init_form_fields() {
		$this->form_fields = array(
			'enabled'        => array( 'title' => 'Enable', 'type' => 'checkbox', 'label' => 'Take payments through the invoicing service', 'default' => 'no' ),
			'title'          => array( 'title' => 'Title', 'type' => 'text', 'default' => 'Pay with crypto' ),
			'description'    => array( 'title' => 'Description', 'type' => 'textarea', 'default' => 'You will be sent to a payment page to pay from your wallet.' ),
			'service_url'    => array( 'title' => 'Service URL', 'type' => 'text', 'description' => 'The base URL of your invoicing service, e.g. https://pay.example.com', 'default' => '' ),
			'api_key'        => array( 'title' => 'API key', 'type' => 'password', 'description' => 'An API key of the owner (sk_…).', 'default' => '' ),
			'webhook_secret' => array( 'title' => 'Webhook signing secret', 'type' => 'password', 'description' => 'A signing secret (whsec_…) from POST /integration/webhook-secrets. Deliveries without a valid signature are refused.', 'default' => '' ),
			'owner_address'  => array( 'title' => 'Owner address', 'type' => 'text', 'description' => 'The wallet the invoices are paid to (0x…).', 'default' => '' ),
			'chain_id'       => array( 'title' => 'Chain id', 'type' => 'text', 'description' => 'e.g. 1 for Ethereum, 8453 for Base.', 'default' => '' ),
			'token_address'  => array( 'title' => 'Token address', 'type' => 'text', 'description' => 'An allow-listed ERC-20 (e.g. USDC); empty: the chain\'s native coin.', 'default' => '' ),
			'manual_capture' => array( 'title' => 'Manual capture', 'type' => 'checkbox', 'label' => 'Authorize only: a paid order goes on hold and is captured when you set it to Processing or Completed', 'default' => 'no' ),
			'invoice_prefix' => array( 'title' => 'Invoice id prefix', 'type' => 'text', 'description' => 'Invoice ids are <prefix><order id>-<price tag>; use a different prefix per shop sharing an owner.', 'default' => 'wc-' ),
		);
	}

	/** The service client, from the settings. */
	public function client() {
		if ( null === $this->client ) {
			$this->client = new Invoicing_Client( $this->get_option( 'service_url' ), $this->get_option( 'api_key' ) );
		}
		return $this->client;
	}

	/**
	 * Creates the order's invoice and sends the payer to its hosted payment page.
	 *
	 * The invoiceId is the order id and a tag of the price: the same order at the same price
	 * sent again gets the same invoice back (the service answers 200 to an identical create),
	 * a changed cart gets a new invoice.
	 */
	public function process_payment( $order_id ) {
		$order = wc_get_order( $order_id );
		if ( ! $order ) {
			return $this->failure( 'This order does not exist.' );
		}
		$amount   = wc_format_decimal( $order->get_total(), wc_get_price_decimals() );
		$currency = (string) $order->get_currency();
		if ( ! preg_match( '/^\d+(\.\d+)?$/', (string) $amount ) || ! preg_match( '/[1-9]/', (string) $amount ) ) {
			return $this->failure( 'This order has nothing to pay.' );
		}
		$token  = trim( (string) $this->get_option( 'token_address' ) );
		$manual = 'yes' === $this->get_option( 'manual_capture' );
		$tag    = substr( hash( 'sha256', $amount . '|' . $currency . '|' . strtolower( $token ) . '|' . ( $manual ? 'manual' : 'automatic' ) ), 0, 10 );
		$body   = array(
			'ownerAddress' => $this->get_option( 'owner_address' ),
			'chainId'      => (int) $this->get_option( 'chain_id' ),
			'amount'       => (string) $amount,
			'currency'     => $currency,
			'invoiceId'    => $this->get_option( 'invoice_prefix' ) . $order->get_id() . '-' . $tag,
			'webhookUrl'   => WC()->api_request_url( $this->id ),
			'redirectUrl'  => $this->get_return_url( $order ),
			'cancelUrl'    => $order->get_cancel_order_url_raw(),
			'description'  => 'Order #' . $order->get_order_number(),
		);
		if ( '' !== $token ) {
			$body['tokenAddress'] = $token;
		}
		if ( $manual ) {
			$body['capture'] = 'manual';
		}
		$invoice = $this->client()->create_invoice( $body );
		if ( is_wp_error( $invoice ) ) {
			$order->add_order_note( 'The invoice could not be created: ' . $invoice->get_error_code() . ': ' . $invoice->get_error_message() );
			return $this->failure( 'The payment could not be started. Please try again in a moment.' );
		}
		$url = isset( $invoice['url'] ) ? (string) $invoice['url'] : '';
		if ( ! preg_match( '#^https?://#', $url ) || empty( $invoice['paymentAddress'] ) ) {
			return $this->failure( 'The payment could not be started. Please try again in a moment.' );
		}
		$order->update_meta_data( self::META_PAYMENT_ADDRESS, (string) $invoice['paymentAddress'] );
		$order->update_meta_data( self::META_INVOICE_ID, (string) $invoice['invoiceId'] );
		$order->update_meta_data( self::META_REQUIRED_RAW, (string) $invoice['requiredRaw'] );
		$order->update_meta_data( self::META_CAPTURE, $manual ? 'manual' : 'automatic' );
		$order->add_order_note( 'Invoice ' . $invoice['invoiceId'] . ' created: the payer pays ' . $invoice['amount'] . ' into ' . $invoice['paymentAddress'] . '.' );
		$order->save();
		return array(
			'result'   => 'success',
			'redirect' => $url,
		);
	}

	/**
	 * WooCommerce API callback (`/?wc-api=invoicing`): the service's deliveries.
	 */
	public function webhook_callback() {
		$headers = array();
		foreach ( $_SERVER as $name => $value ) {
			if ( 0 === strpos( $name, 'HTTP_' ) ) {
				$headers[ strtolower( str_replace( '_', '-', substr( $name, 5 ) ) ) ] = (string) $value;
			}
		}
		list( $status, $message ) = $this->handle_delivery( (string) file_get_contents( 'php://input' ), $headers );
		wp_send_json( array( 'result' => $message ), $status );
	}

	/**
	 * One delivery: the paid webhook, or an event envelope from a registered endpoint.
	 *
	 * @param string $raw_body The body exactly as received.
	 * @param array  $headers  Request headers, names in lower case.
	 * @return array{0: int, 1: string} HTTP status and a word for the log. Any 2xx stops retries.
	 */
	public function handle_delivery( $raw_body, array $headers ) {
		if ( ! $this->is_genuine( $raw_body, $headers ) ) {
			return array( 401, 'signature' );
		}
		$body = json_decode( $raw_body, true );
		if ( ! is_array( $body ) ) {
			return array( 400, 'body' );
		}
		if ( isset( $body['type'] ) ) {
			if ( 'invoice.paid' !== $body['type'] || ! isset( $body['data']['invoice'] ) || ! is_array( $body['data']['invoice'] ) ) {
				return array( 200, 'ignored' ); // Other events are not acted on.
			}
			$body = $body['data']['invoice'];
		}
		return $this->invoice_paid( $body );
	}

	/**
	 * A signed delivery when a signing secret is set (then nothing else is accepted);
	 * otherwise the API key of the paid webhook, compared in constant time.
	 */
	private function is_genuine( $raw_body, array $headers ) {
		$secret = (string) $this->get_option( 'webhook_secret' );
		if ( '' !== $secret ) {
			$header = isset( $headers['x-service-webhook-signature'] ) ? $headers['x-service-webhook-signature'] : '';
			return Invoicing_Webhook_Signature::verify( $raw_body, $header, $secret );
		}
		$key = (string) $this->get_option( 'api_key' );
		return '' !== $key && isset( $headers['x-service-api-key'] ) && hash_equals( $key, (string) $headers['x-service-api-key'] );
	}

	/** Marks the invoice's order paid (or on hold, for manual capture), once. */
	private function invoice_paid( array $invoice ) {
		$order = $this->order_of( $invoice );
		if ( null === $order ) {
			return array( 200, 'ignored' ); // Not one of this shop's invoices.
		}
		if ( ! isset( $invoice['status'] ) || ! in_array( $invoice['status'], array( 'paid', 'completed' ), true ) || true !== ( isset( $invoice['paid'] ) ? $invoice['paid'] : false ) ) {
			return array( 200, 'ignored' );
		}
		if ( '' !== (string) $order->get_meta( self::META_PAID_AT ) || $order->is_paid() ) {
			return array( 200, 'already' ); // At-least-once delivery: the same event again.
		}
		$order->update_meta_data( self::META_PAID_AT, (string) $invoice['paidAt'] );
		$address = $invoice['paymentAddress'];
		if ( 'manual' === $order->get_meta( self::META_CAPTURE ) ) {
			$order->set_transaction_id( $address );
			$order->update_status( 'on-hold', 'Paid into ' . $address . ', not captured yet: set the order to Processing or Completed to capture, or refund it.' );
			$order->save();
			return array( 200, 'authorized' );
		}
		$order->add_order_note( 'Paid into ' . $address . ' (' . $invoice['balanceRaw'] . ' raw units).' );
		$order->payment_complete( $address );
		return array( 200, 'paid' );
	}

	/**
	 * The order an invoice belongs to, when every field matches what this shop created:
	 * owner, chain, invoice id and escrow address.
	 */
	private function order_of( array $invoice ) {
		foreach ( array( 'ownerAddress', 'chainId', 'invoiceId', 'paymentAddress' ) as $field ) {
			if ( ! isset( $invoice[ $field ] ) || ! is_scalar( $invoice[ $field ] ) ) {
				return null;
			}
		}
		if ( strtolower( (string) $invoice['ownerAddress'] ) !== strtolower( (string) $this->get_option( 'owner_address' ) )
			|| (int) $invoice['chainId'] !== (int) $this->get_option( 'chain_id' ) ) {
			return null;
		}
		$prefix = preg_quote( (string) $this->get_option( 'invoice_prefix' ), '/' );
		if ( ! preg_match( '/^' . $prefix . '(\d+)-[0-9a-f]{10}$/', (string) $invoice['invoiceId'], $match ) ) {
			return null;
		}
		$order = wc_get_order( (int) $match[1] );
		if ( ! $order || $order->get_payment_method() !== $this->id
			|| (string) $order->get_meta( self::META_INVOICE_ID ) !== (string) $invoice['invoiceId']
			|| strtolower( (string) $order->get_meta( self::META_PAYMENT_ADDRESS ) ) !== strtolower( (string) $invoice['paymentAddress'] ) ) {
			return null;
		}
		return $order;
	}

	/**
	 * Captures a manual-capture order's invoice as the shop owner moves it out of on-hold.
	 * A refused capture puts the order back on hold with the service's reason.
	 */
	public function capture_order( $order_id ) {
		$order = wc_get_order( $order_id );
		if ( ! $order || $order->get_payment_method() !== $this->id || 'manual' !== $order->get_meta( self::META_CAPTURE )
			|| '' === (string) $order->get_meta( self::META_PAID_AT ) || '' !== (string) $order->get_meta( self::META_CAPTURED_AT ) ) {
			return;
		}
		$answer = $this->client()->capture( $this->get_option( 'owner_address' ), $this->get_option( 'chain_id' ), $order->get_meta( self::META_PAYMENT_ADDRESS ) );
		if ( is_wp_error( $answer ) ) {
			$order->update_status( 'on-hold', 'The capture was refused: ' . $answer->get_error_code() . ': ' . $answer->get_error_message() );
			return;
		}
		$order->update_meta_data( self::META_CAPTURED_AT, (string) $answer['capturedAt'] );
		$order->add_order_note( 'Captured: the funds are swept to the owner at the service\'s next settlement pass.' );
		$order->save();
	}

	/**
	 * Refunds `$amount` of the order's price to whoever paid it, from the invoice's escrow.
	 * The service signs the refund with its own key, which the owner named as the refund
	 * delegate once in the invoicing dashboard (Settings, "Refunds from your shop"); it goes
	 * only to the payer of record, at most what the escrow holds. WooCommerce records the
	 * refund when this answers true; a refusal is answered as the service's error.
	 */
	public function process_refund( $order_id, $amount = null, $reason = '' ) {
		$order = wc_get_order( $order_id );
		if ( ! $order || $order->get_payment_method() !== $this->id || '' === (string) $order->get_meta( self::META_PAYMENT_ADDRESS ) ) {
			return new WP_Error( 'invoicing_refund_unknown_order', 'This order was not paid through the invoicing service.' );
		}
		$decimal = (string) wc_format_decimal( null === $amount ? $order->get_total() : $amount, wc_get_price_decimals() );
		if ( ! preg_match( '/^\d+(\.\d+)?$/', $decimal ) || ! preg_match( '/[1-9]/', $decimal ) ) {
			return new WP_Error( 'invoicing_refund_amount', 'A refund needs a positive amount.' );
		}
		$answer = $this->client()->refund( $this->get_option( 'owner_address' ), $this->get_option( 'chain_id' ), $order->get_meta( self::META_PAYMENT_ADDRESS ), $decimal );
		if ( is_wp_error( $answer ) ) {
			$order->add_order_note( 'The refund of ' . $decimal . ' ' . $order->get_currency() . ' was refused: ' . $answer->get_error_code() . ': ' . $answer->get_error_message() );
			return $answer;
		}
		$note = 'Refund of ' . $decimal . ' ' . $order->get_currency() . ' sent to the payer ' . $answer['to'] . ' (' . $answer['amountRaw'] . ' raw units): transaction ' . $answer['txHash'] . '.';
		$order->add_order_note( '' === (string) $reason ? $note : $note . ' Reason: ' . $reason );
		$order->save();
		return true;
	}

	private function failure( $message ) {
		wc_add_notice( $message, 'error' );
		return array( 'result' => 'failure' );
	}
}
