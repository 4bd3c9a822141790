"""Notifications: events, the endpoints that receive them, and the outbox that delivers them.

Below the domains: invoices, refunds and settlement record their moves' events through
``invoices.notify``, which builds them (the owner's view of the invoice, the paid
webhook) and hands them to ``record``; the event types endpoints may take come in with the
endpoint rules. Nothing here imports a domain's service; one module reads the invoices table
(``claims``: the credential a paid webhook carries, named in its docstring).

- ``models``: events, the outbox (one row per delivery) and its attempts, endpoints,
  signing secrets and owner settings;
- ``record``: events and their deliveries written in the caller's transaction; ``outbox``:
  the rows of the two kinds of delivery (the paid webhook, an event to an endpoint);
- ``endpoints``: owners' endpoints and the health of every owner's URL delivered to;
- ``claims`` (which due deliveries a worker takes: order, per-host and per-owner caps,
  leases), ``delivery`` (record results), ``retries`` (backoff, disabling endpoints),
  ``worker`` (deliveries in flight), ``signing`` (the signature header and its secrets),
  ``client``, ``guard`` and ``http11`` (the outbound HTTP with its SSRF guard);
- ``service``: the events list, an event's deliveries, redelivery, pings, an invoice's paid
  webhook log; ``retention``: pruning.
"""
