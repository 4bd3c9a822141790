"""Recover an owner's funds without this service: ``invoicing recover``.

Needs nothing but a JSON-RPC URL, the factory address, the owner, the escrow export
(``invoices.export``: one ``{"paymentAddress","salt","tokenAddress",…}`` a line) and a key
that pays the gas. No database, no configuration. Every line must derive its
paymentAddress from (owner, salt) at that factory, or the file is refused and nothing is sent.
Balances are read in batches with the factory's ``balancesOf`` (native coin and every token
the file names), then every escrow holding funds is swept with the permissionless
``withdraw(owner, token, salts)``: native coin first, then each token, in batches estimated
under the per-transaction gas cap (a batch that does not fit or fails is split in halves).
The factory pays the owner (and the owner's payout address its fee share, if one is set).

``inputs`` reads the arguments, the key and the export; ``sweep`` reads the balances and
sends the withdraws.
"""
