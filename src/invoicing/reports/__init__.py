"""Reports for an owner's accounts (docs/integration/reports.md).

- ``payments``: the payments report, one row per payment, from a row source
  (``sources``): today the paid invoices, one row each; a source of payments of record
  (one row per transfer, with its ``txHash`` and ``from``) takes its place by implementing
  the same ``PaymentSource`` protocol, with nothing else to change;
- ``sweeps``: what the sweeps of the rows' invoices moved, their fee and transaction.
"""
