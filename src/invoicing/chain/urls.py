"""What may be shown of an RPC URL.

A URL is a secret (its path, query or user part often holds a provider's key): no repr, log
line, metric label or error shows one; :func:`redact_url` keeps the scheme and host only.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def redact_url(url: str) -> str:
    """``url`` with only its scheme, host and port: the path, query and user part, where
    providers put their keys, become ``…``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "…"
    shown = f"{parts.scheme}://{host}{port}" if parts.scheme and host else ""
    hidden = bool(parts.username or parts.password or parts.path.strip("/") or parts.query)
    return (shown + "/…" if hidden else shown + "/") if shown else "…"
