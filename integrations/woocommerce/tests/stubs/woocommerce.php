<?php
/**
 * Stand-ins for the WooCommerce classes and functions the plugin calls, written from their
 * documented interfaces (woocommerce.github.io/code-reference): WC_Payment_Gateway's settings
 * API, WC_Order's getters, meta, notes and status changes (with the
 * `woocommerce_order_status_<from>_to_<to>` action), wc_get_order, WC()->api_request_url.
 */

$GLOBALS['wc_orders']  = array(); // id => WC_Order
$GLOBALS['wc_notices'] = array(); // [message, type]

abstract class WC_Settings_API {
	public $id          = '';
	public $form_fields = array();
	public $settings    = array();

	public function init_settings() {
		$saved = get_option( 'woocommerce_' . $this->id . '_settings', array() );
		foreach ( $this->form_fields as $key => $field ) {
			$this->settings[ $key ] = array_key_exists( $key, $saved ) ? $saved[ $key ] : ( isset( $field['default'] ) ? $field['default'] : '' );
		}
	}

	public function get_option( $key, $empty_value = null ) {
		return isset( $this->settings[ $key ] ) ? $this->settings[ $key ] : $empty_value;
	}

	public function process_admin_options() {
		return true;
	}
}

abstract class WC_Payment_Gateway extends WC_Settings_API {
	public $title              = '';
	public $description        = '';
	public $method_title       = '';
	public $method_description = '';
	public $has_fields         = false;
	public $supports           = array( 'products' );
	public $enabled            = 'no';

	/** As WooCommerce: the order-received page of the order. */
	public function get_return_url( $order = null ) {
		return $order ? $order->get_checkout_order_received_url() : home_url( '/checkout/order-received/' );
	}

	public function supports( $feature ) {
		return in_array( $feature, $this->supports, true );
	}
}

class WC_Order {
	private $id;
	private $total;
	private $currency;
	private $status         = 'pending';
	private $payment_method = '';
	private $transaction_id = '';
	private $meta           = array();
	public $notes           = array();
	public $saves           = 0;

	public function __construct( $id, $total, $currency, $payment_method ) {
		$this->id             = $id;
		$this->total          = $total;
		$this->currency       = $currency;
		$this->payment_method = $payment_method;
	}

	public function get_id() {
		return $this->id;
	}

	public function get_order_number() {
		return (string) $this->id;
	}

	public function get_total() {
		return $this->total;
	}

	public function get_currency() {
		return $this->currency;
	}

	public function get_status() {
		return $this->status;
	}

	public function get_payment_method() {
		return $this->payment_method;
	}

	public function get_transaction_id() {
		return $this->transaction_id;
	}

	public function set_transaction_id( $id ) {
		$this->transaction_id = $id;
	}

	public function get_meta( $key, $single = true ) {
		return isset( $this->meta[ $key ] ) ? $this->meta[ $key ] : '';
	}

	public function update_meta_data( $key, $value ) {
		$this->meta[ $key ] = $value;
	}

	public function add_order_note( $note ) {
		$this->notes[] = $note;
		return count( $this->notes );
	}

	public function save() {
		++$this->saves;
		return $this->id;
	}

	/** As WooCommerce: processing, completed (and the paid statuses filter) count as paid. */
	public function is_paid() {
		return in_array( $this->status, array( 'processing', 'completed' ), true );
	}

	public function needs_processing() {
		return true;
	}

	/** As WooCommerce: records the transaction id, moves to processing, returns true. */
	public function payment_complete( $transaction_id = '' ) {
		if ( $this->is_paid() ) {
			return false;
		}
		if ( '' !== $transaction_id ) {
			$this->transaction_id = $transaction_id;
		}
		$this->update_status( $this->needs_processing() ? 'processing' : 'completed' );
		return true;
	}

	/** As WooCommerce: a note, then `woocommerce_order_status_<from>_to_<to>` after saving. */
	public function update_status( $new_status, $note = '' ) {
		$old          = $this->status;
		$this->status = $new_status;
		if ( '' !== $note ) {
			$this->add_order_note( $note );
		}
		$this->save();
		if ( $old !== $new_status ) {
			do_action( 'woocommerce_order_status_' . $old . '_to_' . $new_status, $this->id, $this );
			do_action( 'woocommerce_order_status_' . $new_status, $this->id, $this );
		}
		return true;
	}

	public function get_checkout_order_received_url() {
		return home_url( '/checkout/order-received/' . $this->id . '/?key=wc_order_' . $this->id );
	}

	public function get_cancel_order_url_raw( $redirect = '' ) {
		return home_url( '/cart/?cancel_order=true&order=wc_order_' . $this->id . '&order_id=' . $this->id );
	}
}

function wc_get_order( $id ) {
	return isset( $GLOBALS['wc_orders'][ (int) $id ] ) ? $GLOBALS['wc_orders'][ (int) $id ] : false;
}

function wc_get_price_decimals() {
	return (int) get_option( 'woocommerce_price_num_decimals', 2 );
}

/** As WooCommerce: a decimal string with $dp decimals, from the string stored on the order. */
function wc_format_decimal( $number, $dp = false ) {
	$number = (string) $number;
	if ( false !== $dp && is_numeric( $number ) ) {
		$number = number_format( (float) $number, (int) $dp, '.', '' );
	}
	return $number;
}

function wc_add_notice( $message, $type = 'success' ) {
	$GLOBALS['wc_notices'][] = array( $message, $type );
}

class WC_Payment_Gateways_Stub {
	public $gateways = array();

	public function payment_gateways() {
		return $this->gateways;
	}
}

class WooCommerce_Stub {
	public $gateways;

	public function __construct() {
		$this->gateways = new WC_Payment_Gateways_Stub();
	}

	/** As WooCommerce: `<home>/wc-api/<request>/`, what `woocommerce_api_<request>` answers. */
	public function api_request_url( $request, $ssl = null ) {
		return home_url( '/wc-api/' . $request . '/' );
	}

	public function payment_gateways() {
		return $this->gateways;
	}
}

function WC() {
	static $instance = null;
	if ( null === $instance ) {
		$instance = new WooCommerce_Stub();
	}
	return $instance;
}
