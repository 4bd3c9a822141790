"""The hosted payment page (DESIGN section 7): ``/pay/<paymentAddress>`` and its status JSON."""
