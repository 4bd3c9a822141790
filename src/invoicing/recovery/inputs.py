"""What ``invoicing recover`` reads before it touches a chain: its arguments, the sender key
and the escrow export, every line checked against the factory's CREATE2 derivation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from eth_account import Account

from invoicing.addresses import normalize_address
from invoicing.chain.escrows import escrow_address

DEFAULT_BATCH_SIZE = 200
MAX_BATCH_SIZE = 2000
_SALT = re.compile(r"0x[0-9a-fA-F]{64}")


class BadArgument(ValueError):
    """A command-line argument is missing or malformed."""


class RecoveryRefused(Exception):
    """The export, the factory or the chain is not what the arguments say; nothing was sent."""


@dataclass(frozen=True)
class ExportedEscrow:
    """One line of the export, checked against the factory's derivation."""

    line: int
    payment_address: str
    salt: bytes
    token_address: str | None
    chain_id: int


@dataclass(frozen=True)
class RecoveryOptions:
    rpc_url: str
    factory: str
    owner: str
    export_file: Path
    sender_key: str | None
    dry_run: bool
    batch_size: int


def parse_options(
    *,
    rpc_url: str | None,
    factory: str | None,
    owner: str | None,
    export_file: str | None,
    sender_key: str | None,
    dry_run: bool,
    batch_size: str | None,
    environ: Mapping[str, str],
) -> RecoveryOptions:
    """The command's arguments, checked; the sender key is read from ``env:VAR`` or
    ``file:PATH`` (never echoed). Raises BadArgument with a one-line reason."""
    for name, value in (("--rpc-url", rpc_url), ("--factory", factory), ("--owner", owner)):
        if not value:
            raise BadArgument(f"{name} is required")
    if not export_file:
        raise BadArgument("--from is required (the escrow export file)")
    if not rpc_url or not rpc_url.startswith(("http://", "https://")):
        raise BadArgument("--rpc-url must be an http(s) URL")
    path = Path(export_file)
    if not path.is_file():
        raise BadArgument(f"--from {export_file}: no such file")
    key = None
    if sender_key:
        key = load_sender_key(sender_key, environ)
    elif not dry_run:
        raise BadArgument("--sender-key is required (env:VAR or file:PATH) unless --dry-run")
    return RecoveryOptions(
        rpc_url=rpc_url,
        factory=_address("--factory", factory),
        owner=_address("--owner", owner),
        export_file=path,
        sender_key=key,
        dry_run=dry_run,
        batch_size=_batch_size(batch_size),
    )


def _address(name: str, value: str | None) -> str:
    try:
        return normalize_address(value or "")
    except ValueError as exc:
        raise BadArgument(f"{name} {exc}") from None


def _batch_size(value: str | None) -> int:
    if value is None:
        return DEFAULT_BATCH_SIZE
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_BATCH_SIZE:
        raise BadArgument(f"--batch-size must be a whole number from 1 to {MAX_BATCH_SIZE}")
    return int(value)


def load_sender_key(spec: str, environ: Mapping[str, str], flag: str = "--sender-key") -> str:
    """The private key named by ``env:VAR`` or ``file:PATH``; messages never show it."""
    kind, _, where = spec.partition(":")
    if kind == "env" and where:
        key = environ.get(where, "").strip()
        if not key:
            raise BadArgument(f"{flag}: environment variable {where} is not set")
    elif kind == "file" and where:
        try:
            key = Path(where).read_text().strip()
        except OSError as exc:
            raise BadArgument(f"{flag}: cannot read {where}: {exc.strerror}") from None
    else:
        raise BadArgument(f"{flag} must be env:VAR or file:PATH")
    try:
        Account.from_key(key)
    except Exception:  # noqa: BLE001 - eth-account raises several types; none may echo the key
        raise BadArgument(f"{flag} {spec} is not a valid private key") from None
    return key


def read_export(
    lines: Iterable[str], factory: str, owner: str, elsewhere: dict[str, int] | None = None
) -> list[ExportedEscrow]:
    """The export's escrows (duplicates once). Refuses the whole file when a line is not an
    escrow of ``owner`` at ``factory``: a file that does not match is not trusted. A line
    whose ``factory`` field names another factory (an escrow a previous factory version
    made) is left out and counted in ``elsewhere`` (factory → lines): sweep those with that
    factory."""
    found: dict[str, ExportedEscrow] = {}
    refused: list[str] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            escrow = _exported_escrow(number, text, factory, owner)
        except ValueError as exc:
            refused.append(f"line {number}: {exc}")
            continue
        except _OtherFactory as other:
            if elsewhere is not None:
                elsewhere[other.factory] = elsewhere.get(other.factory, 0) + 1
            continue
        found.setdefault(escrow.payment_address, escrow)
    if refused:
        more = f" (and {len(refused) - 1} more line(s))" if len(refused) > 1 else ""
        raise RecoveryRefused(f"{refused[0]}{more}; nothing was sent")
    chains = {escrow.chain_id for escrow in found.values()}
    if len(chains) > 1:
        raise RecoveryRefused(f"the export mixes chains {sorted(chains)}; nothing was sent")
    return list(found.values())


class _OtherFactory(Exception):
    """An export line of an escrow another factory made (its ``factory`` field)."""

    def __init__(self, factory: str) -> None:
        super().__init__(factory)
        self.factory = factory


def _exported_escrow(number: int, text: str, factory: str, owner: str) -> ExportedEscrow:
    try:
        entry = json.loads(text)
    except ValueError:
        raise ValueError("not a JSON object") from None
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    salt, address, token, chain_id = (
        entry.get(k) for k in ("salt", "paymentAddress", "tokenAddress", "chainId")
    )
    if not isinstance(salt, str) or not _SALT.fullmatch(salt):
        raise ValueError("salt must be 0x followed by 64 hex digits")
    if not isinstance(address, str) or not isinstance(chain_id, int) or isinstance(chain_id, bool):
        raise ValueError("paymentAddress and chainId are required")
    if token is not None and not isinstance(token, str):
        raise ValueError("tokenAddress must be an address or null")
    made_by = entry.get("factory")
    if made_by is not None:
        if not isinstance(made_by, str):
            raise ValueError("factory must be an address")
        if normalize_address(made_by) != normalize_address(factory):
            raise _OtherFactory(normalize_address(made_by))
    payment_address = normalize_address(address)
    derived = escrow_address(factory, owner, bytes.fromhex(salt[2:]))
    if derived != payment_address:
        raise ValueError(
            f"paymentAddress {payment_address} is not the escrow of owner {owner} and this "
            f"salt at factory {factory} (that would be {derived}); refusing the file"
        )
    return ExportedEscrow(
        number,
        payment_address,
        bytes.fromhex(salt[2:]),
        normalize_address(token) if token else None,
        chain_id,
    )
