"""Subscriptions: a payer's one EIP-712 signature lets the Subscriptions contract charge each
period into that period's invoice escrow (docs/integration/subscriptions.md)."""
