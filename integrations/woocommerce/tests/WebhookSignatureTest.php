<?php
use PHPUnit\Framework\TestCase;

/** The signed-delivery check of docs/integration/webhooks.md ("Signed deliveries"). */
class WebhookSignatureTest extends TestCase {
	const SECRET = 'whsec_test_0123456789abcdef';
	const NOW    = 1760000000;
	const BODY   = '{"invoiceId":"wc-7-0123456789","status":"paid"}';

	public function test_the_docs_scheme_verifies(): void {
		// HMAC-SHA256 keyed by the whole secret string over "<t>.<raw body>", in hex.
		$hex = hash_hmac( 'sha256', self::NOW . '.' . self::BODY, self::SECRET );
		$this->assertTrue( Invoicing_Webhook_Signature::verify( self::BODY, 't=' . self::NOW . ',v1=' . $hex, self::SECRET, self::NOW ) );
	}

	public function test_one_matching_v1_among_several_is_enough(): void {
		$ours  = hash_hmac( 'sha256', self::NOW . '.' . self::BODY, self::SECRET );
		$other = hash_hmac( 'sha256', self::NOW . '.' . self::BODY, 'whsec_another' );
		$this->assertTrue( Invoicing_Webhook_Signature::verify( self::BODY, 't=' . self::NOW . ",v1=$other,v1=$ours", self::SECRET, self::NOW ) );
	}

	/** @dataProvider refused */
	public function test_refused( string $body, string $header, string $secret ): void {
		$this->assertFalse( Invoicing_Webhook_Signature::verify( $body, $header, $secret, self::NOW ) );
	}

	public function refused(): array {
		$good = Invoicing_Webhook_Signature::sign( self::BODY, self::SECRET, self::NOW );
		$hex  = substr( $good, strpos( $good, 'v1=' ) + 3 );
		return array(
			'another secret'        => array( self::BODY, $good, 'whsec_another' ),
			'a changed body'        => array( str_replace( 'paid', 'PAID', self::BODY ), $good, self::SECRET ),
			'a re-encoded body'     => array( json_encode( json_decode( self::BODY ) , JSON_PRETTY_PRINT ), $good, self::SECRET ),
			'301 s old'             => array( self::BODY, Invoicing_Webhook_Signature::sign( self::BODY, self::SECRET, self::NOW - 301 ), self::SECRET ),
			'301 s ahead'           => array( self::BODY, Invoicing_Webhook_Signature::sign( self::BODY, self::SECRET, self::NOW + 301 ), self::SECRET ),
			'two timestamps'        => array( self::BODY, $good . ',t=' . self::NOW, self::SECRET ),
			'no timestamp'          => array( self::BODY, 'v1=' . $hex, self::SECRET ),
			'a timestamp in ms'     => array( self::BODY, 't=' . self::NOW . '000,v1=' . $hex, self::SECRET ),
			'a signed other t'      => array( self::BODY, 't=' . ( self::NOW + 1 ) . ',v1=' . $hex, self::SECRET ),
			'upper-case hex'        => array( self::BODY, 't=' . self::NOW . ',v1=' . strtoupper( $hex ), self::SECRET ),
			'v0 instead of v1'      => array( self::BODY, 't=' . self::NOW . ',v0=' . $hex, self::SECRET ),
			'empty header'          => array( self::BODY, '', self::SECRET ),
			'no secret configured'  => array( self::BODY, $good, '' ),
			'negative timestamp'    => array( self::BODY, 't=-1,v1=' . $hex, self::SECRET ),
		);
	}

	public function test_within_the_tolerance_either_side(): void {
		foreach ( array( -300, 0, 300 ) as $skew ) {
			$header = Invoicing_Webhook_Signature::sign( self::BODY, self::SECRET, self::NOW + $skew );
			$this->assertTrue( Invoicing_Webhook_Signature::verify( self::BODY, $header, self::SECRET, self::NOW ), "skew $skew" );
		}
	}

	/** Random bodies and headers (a property test by hand): a signed body verifies, any
	 * one-byte change of it does not, and garbage headers never verify nor throw. */
	public function test_random_bodies_and_headers(): void {
		mt_srand( 20261128 );
		for ( $i = 0; $i < 300; $i++ ) {
			$body   = mt_rand( 0, 9 ) ? random_bytes( mt_rand( 1, 400 ) ) : "";
			$header = Invoicing_Webhook_Signature::sign( $body, self::SECRET, self::NOW );
			$this->assertTrue( Invoicing_Webhook_Signature::verify( $body, $header, self::SECRET, self::NOW ) );
			if ( '' !== $body ) {
				$at      = mt_rand( 0, strlen( $body ) - 1 );
				$changed = $body;
				$changed[ $at ] = chr( ord( $body[ $at ] ) ^ ( 1 << mt_rand( 0, 7 ) ) );
				$this->assertFalse( Invoicing_Webhook_Signature::verify( $changed, $header, self::SECRET, self::NOW ) );
			}
			$garbage = random_bytes( mt_rand( 1, 120 ) );
			$this->assertFalse( Invoicing_Webhook_Signature::verify( $body, $garbage, self::SECRET, self::NOW ) );
			$this->assertFalse( Invoicing_Webhook_Signature::verify( $body, 't=' . self::NOW . ',' . $garbage, self::SECRET, self::NOW ) );
		}
	}
}
