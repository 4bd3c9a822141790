<?php
/**
 * Verification of `x-service-webhook-signature` exactly as docs/integration/webhooks.md
 * ("Signed deliveries") specifies:
 *
 *     x-service-webhook-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>[,v1=…]
 *
 * The HMAC key is the whole secret string (`whsec_…`), the message the timestamp, a dot and
 * the raw body bytes as received; one `v1` per active secret; `t` older or newer than the
 * tolerance is refused as a replay.
 *
 * @package Invoicing_Gateway
 */

defined( 'ABSPATH' ) || exit;

/**
 * Checks that a delivery was signed by the service with the shop's signing secret.
 */
class Invoicing_Webhook_Signature {

	/** Seconds a signature stays acceptable either side of now (the docs' example: 300). */
	const TOLERANCE_S = 300;

	/**
	 * True when exactly one `t` is given, it is within the tolerance of $now, and one `v1`
	 * is the HMAC of "<t>.<raw body>" under $secret.
	 *
	 * @param string   $raw_body The request body, exactly as received (before any JSON parsing).
	 * @param string   $header   The `x-service-webhook-signature` header.
	 * @param string   $secret   The signing secret (`whsec_…`).
	 * @param int|null $now      Unix seconds (null: the clock).
	 */
	public static function verify( $raw_body, $header, $secret, $now = null ) {
		if ( ! is_string( $header ) || '' === $header || ! is_string( $secret ) || '' === $secret ) {
			return false;
		}
		$timestamps = array();
		$signatures = array();
		foreach ( explode( ',', $header ) as $item ) {
			$pair = explode( '=', $item, 2 );
			if ( 2 !== count( $pair ) ) {
				continue;
			}
			if ( 't' === $pair[0] ) {
				$timestamps[] = $pair[1];
			} elseif ( 'v1' === $pair[0] ) {
				$signatures[] = $pair[1];
			}
		}
		if ( 1 !== count( $timestamps ) || ! ctype_digit( $timestamps[0] ) || strlen( $timestamps[0] ) > 12 ) {
			return false;
		}
		$now = null === $now ? time() : (int) $now;
		if ( abs( $now - (int) $timestamps[0] ) > self::TOLERANCE_S ) {
			return false; // Too old, or from the future: a replay.
		}
		$expected = hash_hmac( 'sha256', $timestamps[0] . '.' . $raw_body, $secret );
		$matched  = false;
		foreach ( $signatures as $signature ) {
			// hash_equals runs in constant time for strings of the same length.
			$matched = hash_equals( $expected, $signature ) || $matched;
		}
		return $matched;
	}

	/**
	 * The header value the service would send for $raw_body at $timestamp (for tests and for
	 * checking a set-up by hand).
	 */
	public static function sign( $raw_body, $secret, $timestamp ) {
		return 't=' . (int) $timestamp . ',v1=' . hash_hmac( 'sha256', (int) $timestamp . '.' . $raw_body, $secret );
	}
}
