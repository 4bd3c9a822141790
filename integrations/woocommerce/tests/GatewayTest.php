<?php
use PHPUnit\Framework\TestCase;

/** The gateway against the WordPress and WooCommerce stand-ins (tests/stubs), the service
 * answered by a handler in place of the network. */
class GatewayTest extends TestCase {
	const OWNER   = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
	const SECRET  = 'whsec_shop_secret';
	const KEY     = 'sk_shop_key';
	const ESCROW  = '0x1111111111111111111111111111111111111111';

	/** @var WC_Gateway_Invoicing */
	private $gateway;

	/** @var array The service's answer to the next request: [status, body array]. */
	private $answer;

	protected function setUp(): void {
		$GLOBALS['wc_orders']        = array();
		$GLOBALS['wc_notices']       = array();
		$GLOBALS['wp_http_requests'] = array();
		$GLOBALS['wp_sent_json']     = array();
		$GLOBALS['wp_options']       = array( 'home' => 'https://shop.test' );
		$this->configure( array() );
		$this->answer                = array( 201, $this->invoice( 'wc-7-tag' ) );
		$GLOBALS['wp_http_handler']  = function ( $method, $url, $args ) {
			return array(
				'response' => array( 'code' => $this->answer[0], 'message' => '' ),
				'headers'  => array(),
				'body'     => json_encode( $this->answer[1] ),
			);
		};
	}

	private function configure( array $changes ): void {
		update_option(
			'woocommerce_invoicing_settings',
			array_merge(
				array(
					'enabled'        => 'yes',
					'service_url'    => 'https://pay.test/',
					'api_key'        => self::KEY,
					'webhook_secret' => self::SECRET,
					'owner_address'  => self::OWNER,
					'chain_id'       => '31337',
					'token_address'  => '',
					'manual_capture' => 'no',
				),
				$changes
			)
		);
		$this->gateway = new WC_Gateway_Invoicing();
		WC()->payment_gateways()->gateways = array( 'invoicing' => $this->gateway );
	}

	private function invoice( string $invoice_id ): array {
		return array(
			'ownerAddress'   => self::OWNER,
			'chainId'        => 31337,
			'invoiceId'      => $invoice_id,
			'paymentAddress' => self::ESCROW,
			'amount'         => '0.006663333333333333',
			'requiredRaw'    => '6663333333333333',
			'status'         => 'pending',
			'url'            => 'https://pay.test/pay/' . self::ESCROW,
		);
	}

	private function order( int $id = 7, string $total = '19.99', string $currency = 'USD' ): WC_Order {
		$order                          = new WC_Order( $id, $total, $currency, 'invoicing' );
		$GLOBALS['wc_orders'][ $id ]    = $order;
		return $order;
	}

	/** Creates the order's invoice through process_payment; answers the order. */
	private function paid_order_setup( int $id = 7 ): WC_Order {
		$order = $this->order( $id );
		$tag   = null;
		$GLOBALS['wp_http_handler'] = function ( $method, $url, $args ) use ( &$tag ) {
			$body = json_decode( $args['body'], true );
			$invoice = $this->invoice( $body['invoiceId'] );
			return array( 'response' => array( 'code' => 201 ), 'body' => json_encode( $invoice ) );
		};
		$this->assertSame( 'success', $this->gateway->process_payment( $id )['result'] );
		return $order;
	}

	private function paid_body( WC_Order $order, array $changes = array() ): string {
		return json_encode(
			array_merge(
				array(
					'ownerAddress'   => self::OWNER,
					'chainId'        => 31337,
					'invoiceId'      => $order->get_meta( '_invoicing_invoice_id' ),
					'paymentAddress' => self::ESCROW,
					'amount'         => '0.006663333333333333',
					'status'         => 'paid',
					'paid'           => true,
					'paidAt'         => 1760000000000,
					'requiredRaw'    => '6663333333333333',
					'balanceRaw'     => '6663333333333333',
					'balance'        => 0.006663333333333333,
					'updatedAt'      => 1760000000000,
					'capture'        => 'automatic',
				),
				$changes
			)
		);
	}

	private function deliver( string $body, ?string $secret = self::SECRET, array $headers = array() ): array {
		if ( null !== $secret ) {
			$headers['x-service-webhook-signature'] = Invoicing_Webhook_Signature::sign( $body, $secret, time() );
		}
		return $this->gateway->handle_delivery( $body, $headers );
	}

	public function test_the_plugin_registers_the_gateway_and_its_callback(): void {
		$this->assertSame( array( 'WC_Gateway_Invoicing' ), apply_filters( 'woocommerce_payment_gateways', array() ) );
		$this->assertContains( array( $this->gateway, 'webhook_callback' ), $GLOBALS['wp_actions']['woocommerce_api_invoicing'] );
		$this->assertTrue( $this->gateway->supports( 'refunds' ) );
	}

	public function test_process_payment_creates_a_fiat_invoice_and_redirects_to_its_page(): void {
		$order  = $this->order( 7, '19.99', 'EUR' );
		$result = $this->gateway->process_payment( 7 );

		$this->assertSame( array( 'result' => 'success', 'redirect' => 'https://pay.test/pay/' . self::ESCROW ), $result );
		$this->assertCount( 1, $GLOBALS['wp_http_requests'] );
		list( $method, $url, $args ) = $GLOBALS['wp_http_requests'][0];
		$this->assertSame( array( 'POST', 'https://pay.test/integration/invoices' ), array( $method, $url ) );
		$this->assertSame( self::KEY, $args['headers']['x-service-api-key'] );
		$this->assertSame( 'application/json', $args['headers']['content-type'] );
		$body = json_decode( $args['body'], true );
		$this->assertMatchesRegularExpression( '/^wc-7-[0-9a-f]{10}$/', $body['invoiceId'] );
		unset( $body['invoiceId'] );
		$this->assertSame(
			array(
				'ownerAddress' => self::OWNER,
				'chainId'      => 31337,
				'amount'       => '19.99',
				'currency'     => 'EUR',
				'webhookUrl'   => 'https://shop.test/wc-api/invoicing/',
				'redirectUrl'  => 'https://shop.test/checkout/order-received/7/?key=wc_order_7',
				'cancelUrl'    => 'https://shop.test/cart/?cancel_order=true&order=wc_order_7&order_id=7',
				'description'  => 'Order #7',
			),
			$body
		);
		$this->assertSame( self::ESCROW, $order->get_meta( '_invoicing_payment_address' ) );
		$this->assertSame( '6663333333333333', $order->get_meta( '_invoicing_required_raw' ) );
		$this->assertSame( 'automatic', $order->get_meta( '_invoicing_capture' ) );
		$this->assertSame( 'pending', $order->get_status() );
	}

	public function test_the_same_order_and_price_reuses_its_invoice_id_a_changed_price_does_not(): void {
		$this->order( 7, '19.99' );
		$this->gateway->process_payment( 7 );
		$this->gateway->process_payment( 7 );
		$this->order( 7, '25.00' );
		$this->gateway->process_payment( 7 );
		$ids = array_map( function ( $request ) { return json_decode( $request[2]['body'], true )['invoiceId']; }, $GLOBALS['wp_http_requests'] );
		$this->assertSame( $ids[0], $ids[1] );
		$this->assertNotSame( $ids[0], $ids[2] );
	}

	public function test_token_and_manual_capture_settings_go_into_the_request(): void {
		$this->configure( array( 'token_address' => '0xA6565348c3269F253E501B4842Fc10304E9fC4E5', 'manual_capture' => 'yes' ) );
		$order = $this->order();
		$this->gateway->process_payment( 7 );
		$body = json_decode( $GLOBALS['wp_http_requests'][0][2]['body'], true );
		$this->assertSame( array( '0xA6565348c3269F253E501B4842Fc10304E9fC4E5', 'manual' ), array( $body['tokenAddress'], $body['capture'] ) );
		$this->assertSame( 'manual', $order->get_meta( '_invoicing_capture' ) );
	}

	public function test_a_refused_create_fails_the_checkout_and_stores_nothing(): void {
		$order        = $this->order();
		$this->answer = array( 400, array( 'error' => array( 'code' => 'unsupported_chain', 'message' => 'chain 31337 is not configured', 'details' => array() ) ) );
		$this->assertSame( array( 'result' => 'failure' ), $this->gateway->process_payment( 7 ) );
		$this->assertSame( array( array( 'The payment could not be started. Please try again in a moment.', 'error' ) ), $GLOBALS['wc_notices'] );
		$this->assertSame( array( 'The invoice could not be created: unsupported_chain: chain 31337 is not configured' ), $order->notes );
		$this->assertSame( '', $order->get_meta( '_invoicing_payment_address' ) );
		$this->assertSame( 'pending', $order->get_status() );
	}

	public function test_an_unreachable_service_fails_the_checkout(): void {
		$order                      = $this->order();
		$GLOBALS['wp_http_handler'] = function () {
			return new WP_Error( 'http_request_failed', 'Connection refused' );
		};
		$this->assertSame( array( 'result' => 'failure' ), $this->gateway->process_payment( 7 ) );
		$this->assertStringStartsWith( 'The invoice could not be created: invoicing_unreachable', $order->notes[0] );
	}

	public function test_a_nothing_to_pay_order_is_refused_before_any_request(): void {
		$this->order( 7, '0.00' );
		$this->assertSame( array( 'result' => 'failure' ), $this->gateway->process_payment( 7 ) );
		$this->assertSame( array(), $GLOBALS['wp_http_requests'] );
	}

	public function test_a_signed_paid_webhook_completes_the_order_once(): void {
		$order = $this->paid_order_setup();
		$body  = $this->paid_body( $order );
		$this->assertSame( array( 200, 'paid' ), $this->deliver( $body ) );
		$this->assertSame( array( 'processing', self::ESCROW ), array( $order->get_status(), $order->get_transaction_id() ) );
		$notes = $order->notes;
		$this->assertSame( array( 200, 'already' ), $this->deliver( $body ) );
		$this->assertSame( $notes, $order->notes );
		$this->assertSame( 'processing', $order->get_status() );
	}

	public function test_the_callback_reads_the_raw_request_and_answers_json(): void {
		$this->paid_order_setup();
		$_SERVER['HTTP_X_SERVICE_WEBHOOK_SIGNATURE'] = 't=1,v1=00';
		$this->gateway->webhook_callback(); // php://input is empty under the CLI: refused
		unset( $_SERVER['HTTP_X_SERVICE_WEBHOOK_SIGNATURE'] );
		$this->assertSame( array( array( array( 'result' => 'signature' ), 401 ) ), $GLOBALS['wp_sent_json'] );
	}

	/** @dataProvider forged */
	public function test_a_forged_or_foreign_delivery_changes_nothing( string $case ): void {
		$order  = $this->paid_order_setup();
		$body   = $this->paid_body( $order );
		$expect = array( 401, 'signature' );
		switch ( $case ) {
			case 'unsigned':
				$answer = $this->deliver( $body, null );
				break;
			case 'another secret':
				$answer = $this->deliver( $body, 'whsec_other' );
				break;
			case 'api key only while a secret is set':
				$answer = $this->deliver( $body, null, array( 'x-service-api-key' => self::KEY ) );
				break;
			case 'old signature':
				$answer = $this->gateway->handle_delivery( $body, array( 'x-service-webhook-signature' => Invoicing_Webhook_Signature::sign( $body, self::SECRET, time() - 301 ) ) );
				break;
			default:
				$changes = array(
					'another escrow'  => array( 'paymentAddress' => '0x2222222222222222222222222222222222222222' ),
					'another owner'   => array( 'ownerAddress' => '0x70997970C51812dc3A010C7d01b50e0d17dc79C8' ),
					'another chain'   => array( 'chainId' => 1 ),
					'another order'   => array( 'invoiceId' => 'wc-8-0123456789' ),
					'not paid'        => array( 'status' => 'pending', 'paid' => false ),
					'invoice id junk' => array( 'invoiceId' => array( 'x' ) ),
				)[ $case ];
				$answer = $this->deliver( $this->paid_body( $order, $changes ) );
				$expect = array( 200, 'ignored' );
		}
		$this->assertSame( $expect, $answer );
		$this->assertSame( array( 'pending', '' ), array( $order->get_status(), $order->get_meta( '_invoicing_paid_at' ) ) );
	}

	public function forged(): array {
		$cases = array( 'unsigned', 'another secret', 'api key only while a secret is set', 'old signature', 'another escrow', 'another owner', 'another chain', 'another order', 'not paid', 'invoice id junk' );
		return array_combine( $cases, array_map( function ( $c ) { return array( $c ); }, $cases ) );
	}

	public function test_without_a_secret_the_api_key_header_is_checked(): void {
		$this->configure( array( 'webhook_secret' => '' ) );
		$order = $this->paid_order_setup();
		$body  = $this->paid_body( $order );
		$this->assertSame( array( 401, 'signature' ), $this->deliver( $body, null, array( 'x-service-api-key' => 'sk_wrong' ) ) );
		$this->assertSame( 'pending', $order->get_status() );
		$this->assertSame( array( 200, 'paid' ), $this->deliver( $body, null, array( 'x-service-api-key' => self::KEY ) ) );
		$this->assertSame( 'processing', $order->get_status() );
	}

	public function test_an_invoice_paid_event_completes_the_order_other_events_are_ignored(): void {
		$order = $this->paid_order_setup();
		$invoice = json_decode( $this->paid_body( $order ), true );
		$expired = json_encode( array( 'id' => 'e1', 'type' => 'invoice.expired', 'data' => array( 'invoice' => $invoice ) ) );
		$this->assertSame( array( 200, 'ignored' ), $this->deliver( $expired ) );
		$this->assertSame( 'pending', $order->get_status() );
		$paid = json_encode( array( 'id' => 'e2', 'type' => 'invoice.paid', 'data' => array( 'invoice' => $invoice ) ) );
		$this->assertSame( array( 200, 'paid' ), $this->deliver( $paid ) );
		$this->assertSame( 'processing', $order->get_status() );
	}

	public function test_a_malformed_signed_body_is_a_400(): void {
		$this->assertSame( array( 400, 'body' ), $this->deliver( 'not json' ) );
	}

	public function test_manual_capture_holds_the_order_and_captures_when_it_moves_on(): void {
		$this->configure( array( 'manual_capture' => 'yes' ) );
		$order = $this->paid_order_setup();
		$this->assertSame( array( 200, 'authorized' ), $this->deliver( $this->paid_body( $order, array( 'capture' => 'manual' ) ) ) );
		$this->assertSame( 'on-hold', $order->get_status() );

		$GLOBALS['wp_http_requests'] = array();
		$this->answer                = array( 200, array( 'capture' => 'manual', 'capturedAt' => 1760000100000 ) );
		$GLOBALS['wp_http_handler']  = function () {
			return array( 'response' => array( 'code' => $this->answer[0] ), 'body' => json_encode( $this->answer[1] ) );
		};
		$order->update_status( 'processing' ); // The shop owner's click, and WooCommerce's action.
		$this->assertCount( 1, $GLOBALS['wp_http_requests'] );
		list( $method, $url, $args ) = $GLOBALS['wp_http_requests'][0];
		$this->assertSame( array( 'POST', 'https://pay.test/integration/invoices/capture' ), array( $method, $url ) );
		$this->assertSame( array( 'ownerAddress' => self::OWNER, 'chainId' => 31337, 'paymentAddress' => self::ESCROW ), json_decode( $args['body'], true ) );
		$this->assertSame( array( 'processing', '1760000100000' ), array( $order->get_status(), $order->get_meta( '_invoicing_captured_at' ) ) );
	}

	public function test_a_refused_capture_puts_the_order_back_on_hold(): void {
		$this->configure( array( 'manual_capture' => 'yes' ) );
		$order = $this->paid_order_setup();
		$this->deliver( $this->paid_body( $order, array( 'capture' => 'manual' ) ) );
		$GLOBALS['wp_http_handler'] = function () {
			return array( 'response' => array( 'code' => 409 ), 'body' => json_encode( array( 'error' => array( 'code' => 'invoice_voided', 'message' => 'the invoice is voided' ) ) ) );
		};
		$order->update_status( 'completed' );
		$this->assertSame( array( 'on-hold', '' ), array( $order->get_status(), $order->get_meta( '_invoicing_captured_at' ) ) );
		$this->assertSame( 'The capture was refused: invoice_voided: the invoice is voided', end( $order->notes ) );
	}

	public function test_an_automatic_order_moving_on_sends_no_capture(): void {
		$order = $this->paid_order_setup();
		$this->deliver( $this->paid_body( $order ) );
		$GLOBALS['wp_http_requests'] = array();
		$order->update_status( 'on-hold' );
		$order->update_status( 'completed' );
		$this->assertSame( array(), $GLOBALS['wp_http_requests'] );
	}

	public function test_a_refund_asks_the_service_to_pay_that_share_back_to_the_payer(): void {
		$order                       = $this->paid_order_setup();
		$GLOBALS['wp_http_requests'] = array();
		$this->answer                = array( 202, array( 'txHash' => '0x' . str_repeat( 'ab', 32 ), 'chainId' => 31337, 'ownerAddress' => self::OWNER, 'nonce' => '4', 'status' => 'submitted', 'to' => '0x2222222222222222222222222222222222222222', 'amountRaw' => '1666666666666666' ) );
		$GLOBALS['wp_http_handler']  = function () {
			return array( 'response' => array( 'code' => $this->answer[0] ), 'body' => json_encode( $this->answer[1] ) );
		};

		$this->assertTrue( $this->gateway->process_refund( 7, '5.00', 'broken mug' ) );

		$this->assertCount( 1, $GLOBALS['wp_http_requests'] );
		list( $method, $url, $args ) = $GLOBALS['wp_http_requests'][0];
		$this->assertSame( array( 'POST', 'https://pay.test/integration/invoices/refund' ), array( $method, $url ) );
		$this->assertSame( self::KEY, $args['headers']['x-service-api-key'] );
		$this->assertSame( array( 'ownerAddress' => self::OWNER, 'chainId' => 31337, 'paymentAddress' => self::ESCROW, 'amount' => '5.00' ), json_decode( $args['body'], true ) );
		$this->assertSame( 'Refund of 5.00 USD sent to the payer 0x2222222222222222222222222222222222222222 (1666666666666666 raw units): transaction 0x' . str_repeat( 'ab', 32 ) . '. Reason: broken mug', end( $order->notes ) );
	}

	public function test_a_refund_without_an_amount_refunds_the_whole_price(): void {
		$this->paid_order_setup();
		$this->answer               = array( 202, array( 'txHash' => '0x01', 'to' => '0x2222222222222222222222222222222222222222', 'amountRaw' => '6663333333333333' ) );
		$GLOBALS['wp_http_handler'] = function () {
			return array( 'response' => array( 'code' => $this->answer[0] ), 'body' => json_encode( $this->answer[1] ) );
		};
		$GLOBALS['wp_http_requests'] = array();
		$this->assertTrue( $this->gateway->process_refund( 7 ) );
		$this->assertSame( '19.99', json_decode( $GLOBALS['wp_http_requests'][0][2]['body'], true )['amount'] );
	}

	public function test_a_refused_refund_answers_the_services_error_and_notes_it(): void {
		$order                      = $this->paid_order_setup();
		$GLOBALS['wp_http_handler'] = function () {
			return array( 'response' => array( 'code' => 409 ), 'body' => json_encode( array( 'error' => array( 'code' => 'refund_delegate_not_named', 'message' => "name this service's refund delegate first (dashboard, Settings)" ) ) ) );
		};
		$answer = $this->gateway->process_refund( 7, '5.00', '' );
		$this->assertInstanceOf( WP_Error::class, $answer );
		$this->assertSame( array( 'refund_delegate_not_named', 409 ), array( $answer->get_error_code(), $answer->get_error_data()['status'] ) );
		$this->assertSame( "The refund of 5.00 USD was refused: refund_delegate_not_named: name this service's refund delegate first (dashboard, Settings)", end( $order->notes ) );
	}

	/** @dataProvider bad_refunds */
	public function test_a_refund_the_plugin_cannot_ask_for_sends_nothing( string $method, $amount, string $code ): void {
		$order = $this->paid_order_setup();
		if ( 'other' === $method ) {
			$GLOBALS['wc_orders'][8] = new WC_Order( 8, '5.00', 'USD', 'cod' );
		}
		$GLOBALS['wp_http_requests'] = array();
		$answer                      = $this->gateway->process_refund( 'other' === $method ? 8 : ( 'missing' === $method ? 99 : 7 ), $amount );
		$this->assertInstanceOf( WP_Error::class, $answer );
		$this->assertSame( $code, $answer->get_error_code() );
		$this->assertSame( array(), $GLOBALS['wp_http_requests'] );
	}

	public static function bad_refunds(): array {
		return array(
			'another gateway' => array( 'other', '5.00', 'invoicing_refund_unknown_order' ),
			'no such order'   => array( 'missing', '5.00', 'invoicing_refund_unknown_order' ),
			'zero'            => array( 'ours', '0.00', 'invoicing_refund_amount' ),
			'negative'        => array( 'ours', '-5.00', 'invoicing_refund_amount' ),
			'not a number'    => array( 'ours', 'five', 'invoicing_refund_amount' ),
		);
	}
}
