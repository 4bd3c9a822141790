"""The hosted payment page (docs/integration/invoices.md): ``/pay/<address>`` and its JSON."""
