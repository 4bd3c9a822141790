<?php
require __DIR__ . '/stubs/wordpress.php';
require __DIR__ . '/stubs/woocommerce.php';
require dirname( __DIR__ ) . '/invoicing-gateway.php';
do_action( 'plugins_loaded' );
