"""Values of settings read beyond their type (``invoicing.settings``): CORS origins, the
trusted proxies' networks, and the example settings file's placeholders, which are refused
outside development."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Mapping

from pydantic import SecretStr

# How the example settings file (deploy/systemd/invoicing.env.example) marks a value to fill:
# INVOICING_SECRET, the database role's password, the metrics token.
EXAMPLE_PLACEHOLDER = "replace-with-"


def refuse_example_values(values: Mapping[str, str | SecretStr | None]) -> None:
    """ValueError naming every setting of ``values`` that still holds the example's
    placeholder (never its value: a database URL carries a password)."""
    left = [
        name
        for name, value in values.items()
        if value is not None
        and EXAMPLE_PLACEHOLDER
        in (value.get_secret_value() if isinstance(value, SecretStr) else value)
    ]
    if left:
        hold = "still holds" if len(left) == 1 else "still hold"
        raise ValueError(
            f"{', '.join(left)} {hold} the example settings file's placeholder "
            f"({EXAMPLE_PLACEHOLDER}…): set your own values outside development (the database "
            "role's password, a random token: docs/operations/deploy.md, steps 2 and 3)"
        )


def parse_origins(value: str) -> frozenset[str]:
    """A CORS setting: comma-separated origins (``https://shop.example``), or ``*``."""
    origins = frozenset(part.strip().rstrip("/") for part in value.split(",") if part.strip())
    for origin in origins - {"*"}:
        if not re.fullmatch(r"https?://[^/\s]+", origin):
            raise ValueError(f"CORS: not an origin (scheme://host[:port]): {origin!r}")
    return origins


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def trusted_networks(setting: str) -> tuple[IPNetwork, ...]:
    """The CIDRs of ``INVOICING_TRUSTED_PROXIES`` (comma-separated); ValueError if one is bad."""
    networks = []
    for part in setting.split(","):
        if part.strip():
            try:
                networks.append(ipaddress.ip_network(part.strip(), strict=False))
            except ValueError:
                raise ValueError(
                    f"INVOICING_TRUSTED_PROXIES: {part.strip()!r} is not a CIDR"
                ) from None
    return tuple(networks)
