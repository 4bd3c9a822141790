"""Fiat prices: an invoice's amount given in a currency, converted to the asset it is paid in
(docs/integration/pricing.md)."""
