<?php
/**
 * Stand-ins for the WordPress functions and classes the plugin calls, written from their
 * documented interfaces (developer.wordpress.org/reference). They keep state in globals that
 * the tests read and reset; only what the plugin uses is here.
 */

define( 'ABSPATH', __DIR__ . '/' );

$GLOBALS['wp_actions']       = array(); // hook => list of callables
$GLOBALS['wp_options']       = array(); // option name => value
$GLOBALS['wp_http_handler']  = null;    // callable(method, url, args) => response, or null for real HTTP
$GLOBALS['wp_http_requests'] = array(); // every request: [method, url, args]
$GLOBALS['wp_sent_json']     = array(); // every wp_send_json: [data, status]

class WP_Error {
	private $code;
	private $message;
	private $data;

	public function __construct( $code = '', $message = '', $data = '' ) {
		$this->code    = $code;
		$this->message = $message;
		$this->data    = $data;
	}

	public function get_error_code() {
		return $this->code;
	}

	public function get_error_message() {
		return $this->message;
	}

	public function get_error_data() {
		return $this->data;
	}
}

function is_wp_error( $thing ) {
	return $thing instanceof WP_Error;
}

function add_action( $hook, $callback, $priority = 10, $accepted_args = 1 ) {
	$GLOBALS['wp_actions'][ $hook ][] = $callback;
	return true;
}

function add_filter( $hook, $callback, $priority = 10, $accepted_args = 1 ) {
	return add_action( $hook, $callback, $priority, $accepted_args );
}

function do_action( $hook, ...$args ) {
	foreach ( isset( $GLOBALS['wp_actions'][ $hook ] ) ? $GLOBALS['wp_actions'][ $hook ] : array() as $callback ) {
		call_user_func_array( $callback, $args );
	}
}

function apply_filters( $hook, $value, ...$args ) {
	foreach ( isset( $GLOBALS['wp_actions'][ $hook ] ) ? $GLOBALS['wp_actions'][ $hook ] : array() as $callback ) {
		$value = call_user_func_array( $callback, array_merge( array( $value ), $args ) );
	}
	return $value;
}

function get_option( $name, $default = false ) {
	return array_key_exists( $name, $GLOBALS['wp_options'] ) ? $GLOBALS['wp_options'][ $name ] : $default;
}

function update_option( $name, $value ) {
	$GLOBALS['wp_options'][ $name ] = $value;
	return true;
}

function home_url( $path = '' ) {
	return rtrim( get_option( 'home', 'http://shop.test' ), '/' ) . '/' . ltrim( $path, '/' );
}

function add_query_arg( $key, $value, $url ) {
	return $url . ( false === strpos( $url, '?' ) ? '?' : '&' ) . rawurlencode( $key ) . '=' . rawurlencode( $value );
}

function wp_json_encode( $data, $options = 0, $depth = 512 ) {
	return json_encode( $data, $options | JSON_UNESCAPED_SLASHES, $depth );
}

/** As WordPress: the JSON and the status; the real one then dies, the tests read it here. */
function wp_send_json( $response, $status_code = null, $options = 0 ) {
	$GLOBALS['wp_sent_json'][] = array( $response, $status_code );
}

/**
 * WordPress's HTTP API: an array with 'response' => ['code', 'message'], 'headers', 'body',
 * or a WP_Error when no answer came. A test handler answers in place of the network; without
 * one the request goes out for real (PHP's HTTP stream), as WP_Http would send it.
 */
function wp_remote_request( $url, $args = array() ) {
	$method                         = isset( $args['method'] ) ? $args['method'] : 'GET';
	$GLOBALS['wp_http_requests'][] = array( $method, $url, $args );
	if ( null !== $GLOBALS['wp_http_handler'] ) {
		return call_user_func( $GLOBALS['wp_http_handler'], $method, $url, $args );
	}
	$lines = array();
	foreach ( isset( $args['headers'] ) ? $args['headers'] : array() as $name => $value ) {
		$lines[] = $name . ': ' . $value;
	}
	$context = stream_context_create(
		array(
			'http' => array(
				'method'          => $method,
				'header'          => implode( "\r\n", $lines ),
				'content'         => isset( $args['body'] ) ? $args['body'] : '',
				'timeout'         => isset( $args['timeout'] ) ? $args['timeout'] : 5,
				'ignore_errors'   => true,
				'follow_location' => 0,
			),
		)
	);
	$body = @file_get_contents( $url, false, $context );
	if ( false === $body || ! isset( $http_response_header[0] ) ) {
		return new WP_Error( 'http_request_failed', 'no answer from ' . $url );
	}
	preg_match( '#^HTTP/\S+ (\d+)#', $http_response_header[0], $match );
	return array(
		'response' => array( 'code' => (int) $match[1], 'message' => '' ),
		'headers'  => array_slice( $http_response_header, 1 ),
		'body'     => $body,
	);
}

function wp_remote_post( $url, $args = array() ) {
	return wp_remote_request( $url, array_merge( array( 'method' => 'POST' ), $args ) );
}

function wp_remote_get( $url, $args = array() ) {
	return wp_remote_request( $url, array_merge( $args, array( 'method' => 'GET' ) ) );
}

function wp_remote_retrieve_response_code( $response ) {
	return is_wp_error( $response ) || ! isset( $response['response']['code'] ) ? '' : $response['response']['code'];
}

function wp_remote_retrieve_body( $response ) {
	return is_wp_error( $response ) || ! isset( $response['body'] ) ? '' : $response['body'];
}
