"""Reports for an owner's accounts (docs/integration/reports.md).

- ``payments``: the payments report, one row per payment, from a row source (``sources``):
  the payments of record, one row per transfer into an escrow, with its ``txHash``,
  ``from`` and block time;
- ``sweeps``: what the sweeps of the rows' invoices moved, their fee and transaction.
"""
