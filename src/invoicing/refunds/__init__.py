"""Gasless refunds: an owner-signed EIP-712 Refund relayed from an invoice's escrow."""
