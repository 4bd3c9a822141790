"""x402 v2: an invoice as an x402 resource, and a facilitator for owners' own x402
servers."""
