<?php
/**
 * The service's HTTP API as this plugin uses it: create an invoice, look one up, capture a
 * manual-capture invoice, refund a payer. Every request carries the API key in `x-service-api-key`
 * (docs/integration/authentication.md) and goes through WordPress's HTTP API.
 *
 * @package Invoicing_Gateway
 */

defined( 'ABSPATH' ) || exit;

/**
 * A small client of the invoicing service's integration API.
 */
class Invoicing_Client {

	/** @var string Service base URL, without a trailing slash. */
	private $base_url;

	/** @var string The owner's API key (`sk_…`). */
	private $api_key;

	/** @var int Seconds before a request gives up. */
	private $timeout;

	/**
	 * @param string $base_url Service base URL (`https://pay.example.com`).
	 * @param string $api_key  The owner's API key.
	 * @param int    $timeout  Seconds per request.
	 */
	public function __construct( $base_url, $api_key, $timeout = 20 ) {
		$this->base_url = rtrim( (string) $base_url, '/' );
		$this->api_key  = (string) $api_key;
		$this->timeout  = (int) $timeout;
	}

	/**
	 * POST /integration/invoices. The same body sent again answers 200 with the invoice that
	 * exists, so a retry of an order whose answer was lost is safe (docs: Idempotency).
	 *
	 * @param array $body The create request (ownerAddress, chainId, amount, ...).
	 * @return array|WP_Error The invoice, or why not.
	 */
	public function create_invoice( array $body ) {
		return $this->request( 'POST', '/integration/invoices', $body );
	}

	/**
	 * GET /integration/invoices/status: reads the chain, answers the invoice.
	 *
	 * @return array|WP_Error The invoice, or why not.
	 */
	public function invoice_status( $owner_address, $payment_address ) {
		$query  = http_build_query(
			array(
				'ownerAddress'   => $owner_address,
				'paymentAddress' => $payment_address,
			)
		);
		$answer = $this->request( 'GET', '/integration/invoices/status?' . $query, null );
		if ( is_wp_error( $answer ) ) {
			return $answer;
		}
		return isset( $answer['invoice'] ) && is_array( $answer['invoice'] )
			? $answer['invoice']
			: new WP_Error( 'invoicing_bad_answer', 'The service answered a status without an invoice.' );
	}

	/**
	 * POST /integration/invoices/capture (docs: Manual capture). Safe to retry.
	 *
	 * @return array|WP_Error The capture answer, or why not.
	 */
	public function capture( $owner_address, $chain_id, $payment_address ) {
		return $this->request(
			'POST',
			'/integration/invoices/capture',
			array(
				'ownerAddress'   => $owner_address,
				'chainId'        => (int) $chain_id,
				'paymentAddress' => $payment_address,
			)
		);
	}

	/**
	 * POST /integration/invoices/refund: the service signs the refund as the owner's refund
	 * delegate and pays `$amount` of the invoice's price back to its payer of record. Not
	 * idempotent: each call is a new refund.
	 *
	 * @param string $amount A decimal string in the invoice's price currency ("10.00").
	 * @return array|WP_Error The submission (txHash, to, amountRaw, ...), or why not.
	 */
	public function refund( $owner_address, $chain_id, $payment_address, $amount ) {
		return $this->request(
			'POST',
			'/integration/invoices/refund',
			array(
				'ownerAddress'   => $owner_address,
				'chainId'        => (int) $chain_id,
				'paymentAddress' => $payment_address,
				'amount'         => (string) $amount,
			)
		);
	}

	/**
	 * One request; a non-2xx answer becomes a WP_Error whose code is the service's error code
	 * (`invoice_exists`, `rate_limited`, …) and whose data holds the HTTP status and details.
	 *
	 * @param string     $method GET or POST.
	 * @param string     $path   Path and query.
	 * @param array|null $body   JSON body of a POST.
	 * @return array|WP_Error
	 */
	private function request( $method, $path, $body ) {
		$args = array(
			'method'      => $method,
			'timeout'     => $this->timeout,
			'redirection' => 0,
			'headers'     => array(
				'x-service-api-key' => $this->api_key,
				'accept'            => 'application/json',
			),
		);
		if ( null !== $body ) {
			$args['headers']['content-type'] = 'application/json';
			$args['body']                    = wp_json_encode( $body );
		}
		$response = 'GET' === $method
			? wp_remote_get( $this->base_url . $path, $args )
			: wp_remote_post( $this->base_url . $path, $args );
		if ( is_wp_error( $response ) ) {
			return new WP_Error( 'invoicing_unreachable', 'The invoicing service could not be reached: ' . $response->get_error_message() );
		}
		$status = (int) wp_remote_retrieve_response_code( $response );
		$json   = json_decode( (string) wp_remote_retrieve_body( $response ), true );
		if ( $status >= 200 && $status < 300 && is_array( $json ) ) {
			return $json;
		}
		// The documented error shape: {"error": {"code", "message", "details"}}.
		$error   = is_array( $json ) && isset( $json['error'] ) && is_array( $json['error'] ) ? $json['error'] : array();
		$code    = isset( $error['code'] ) && is_string( $error['code'] ) ? $error['code'] : 'invoicing_http_' . $status;
		$message = isset( $error['message'] ) && is_string( $error['message'] ) ? $error['message'] : 'The invoicing service answered HTTP ' . $status . '.';
		return new WP_Error(
			$code,
			$message,
			array(
				'status'  => $status,
				'details' => isset( $error['details'] ) ? $error['details'] : null,
			)
		);
	}
}
