"""Payers pay without gas: EIP-3009 transfer authorizations relayed into invoice escrows,
for the payment page and for x402 clients."""
