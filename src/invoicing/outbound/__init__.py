"""Outbound HTTP that is not JSON-RPC: the one home for requests to URLs that strangers name.

Owners name webhook URLs today; an attestation service or a shop's API would be the next
such hosts. Whatever sends to them goes through these parts, not a library of its own:

- ``guard``: the SSRF guard. A URL's host is resolved and refused when any of its addresses
  is not globally routable; the ``Target`` it answers holds the checked addresses, and only
  those are connected to (the Host header and the TLS name stay the URL's host).
- ``resolver``: name lookups on threads of their own, failing fast when all are busy, with a
  cache of answers and of failures.
- ``http11``: the pooled HTTP/1.1 wire on asyncio streams, with bounded idle connections
  and bounded answer heads.

The JSON-RPC client (``chain.rpc``) stays apart: node URLs are the operator's, not a
stranger's, and its failover and quorum rules are the chain's. The webhook client
(``notifications.client``) is this package's first user.
"""
