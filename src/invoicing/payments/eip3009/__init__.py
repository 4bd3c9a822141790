"""Gasless payments of invoices on the payment page: a payer's EIP-3009 transfer
authorization into the escrow, carried by the relayer."""
