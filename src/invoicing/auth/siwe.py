"""Sign-In with Ethereum (EIP-4361) messages: the parser, the writer and the checks of
every field against what this service expects.

Written against the EIP's ABNF (https://eips.ethereum.org/EIPS/eip-4361) rather than taken
from the PyPI ``siwe`` package, which pins web3 7 and eth-account 0.13 (this service is on
web3 8 and a newer eth-account); ``tests/unit/test_siwe.py`` runs the EIP's published test
vectors (spruceid/siwe ``test/*.json``) and hypothesis properties against it.

The grammar, line by line (``[]`` optional; LF is the only line break)::

    [scheme "://"] domain " wants you to sign in with your Ethereum account:"
    address                        ; 0x + 40 hex, EIP-55 checksummed
    (empty line)
    [statement]                    ; printable ASCII, no LF; absent: an empty line
    (empty line)
    "URI: " uri
    "Version: 1"
    "Chain ID: " 1*DIGIT
    "Nonce: " 8*(ALPHA / DIGIT)
    "Issued At: " date-time        ; RFC 3339
    ["Expiration Time: " date-time]
    ["Not Before: " date-time]
    ["Request ID: " *pchar]
    ["Resources:" *(LF "- " URI)]

Anything else (a field out of order, an extra line, a second LF, trailing text) does not
parse. The signature itself is checked elsewhere (``auth.sign_in``): recovery for an EOA,
EIP-1271 for a contract wallet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from invoicing.addresses import checksum_encode

PREAMBLE = " wants you to sign in with your Ethereum account:"
MAX_MESSAGE_CHARS = 4096

# RFC 3986 pieces, as the ABNF uses them.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_RESERVED = r":/?#\[\]@" + _SUB_DELIMS
_PCT = r"%[0-9A-Fa-f]{2}"
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_USERINFO = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_REG_NAME = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"
_IP_LITERAL = r"\[[0-9A-Fa-f:.vV]+\]"
_HOST = rf"(?:{_IP_LITERAL}|{_REG_NAME})"
_AUTHORITY = rf"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
# An absolute URI: scheme ":" hier-part [ "?" query ] [ "#" fragment ], its characters those
# RFC 3986 allows (the parts' finer structure is not needed to refuse what the ABNF refuses).
_URI = rf"{_SCHEME}:(?:[{_UNRESERVED}{_RESERVED}]|{_PCT})*"
_DATE_TIME = r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+\-]\d{2}:\d{2})"

_FIRST_LINE = re.compile(rf"(?:({_SCHEME})://)?({_AUTHORITY}){re.escape(PREAMBLE)}")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_STATEMENT = re.compile(rf"[{_UNRESERVED}{_RESERVED} ]*")
_NONCE = re.compile(r"[A-Za-z0-9]{8,}")
_CHAIN_ID = re.compile(r"[0-9]+")
_URI_RE = re.compile(_URI)
_DATE_TIME_RE = re.compile(_DATE_TIME)
_REQUEST_ID = re.compile(rf"{_PCHAR}*")


class SiweParseError(ValueError):
    """The text is not an EIP-4361 message (the reason names the first bad line)."""


@dataclass(frozen=True)
class SiweMessage:
    """One parsed message; times are kept as written (``*_ms`` give them as unix ms)."""

    domain: str
    address: str
    uri: str
    chain_id: int
    nonce: str
    issued_at: str
    version: str = "1"
    scheme: str | None = None
    statement: str | None = None
    expiration_time: str | None = None
    not_before: str | None = None
    request_id: str | None = None
    resources: tuple[str, ...] = field(default_factory=tuple)

    @property
    def issued_at_ms(self) -> int:
        return rfc3339_ms(self.issued_at)

    @property
    def expiration_ms(self) -> int | None:
        return None if self.expiration_time is None else rfc3339_ms(self.expiration_time)

    @property
    def not_before_ms(self) -> int | None:
        return None if self.not_before is None else rfc3339_ms(self.not_before)

    def text(self) -> str:
        """The message as the EIP writes it (``parse_siwe(m.text()) == m``)."""
        origin = f"{self.scheme}://{self.domain}" if self.scheme else self.domain
        lines = [origin + PREAMBLE, self.address, ""]
        lines += [self.statement, ""] if self.statement is not None else [""]
        lines += [
            f"URI: {self.uri}",
            f"Version: {self.version}",
            f"Chain ID: {self.chain_id}",
            f"Nonce: {self.nonce}",
            f"Issued At: {self.issued_at}",
        ]
        if self.expiration_time is not None:
            lines.append(f"Expiration Time: {self.expiration_time}")
        if self.not_before is not None:
            lines.append(f"Not Before: {self.not_before}")
        if self.request_id is not None:
            lines.append(f"Request ID: {self.request_id}")
        if self.resources:
            lines.append("Resources:")
            lines += [f"- {resource}" for resource in self.resources]
        return "\n".join(lines)


def rfc3339_ms(text: str) -> int:
    """Unix milliseconds of an RFC 3339 date-time (already matched by the grammar)."""
    if not _DATE_TIME_RE.fullmatch(text):
        raise SiweParseError(f"not an RFC 3339 date-time: {text!r}")
    normal = text.upper().replace("Z", "+00:00")
    seconds, _, rest = normal.partition(".")
    if rest:  # fractions of any length: keep milliseconds
        digits = re.match(r"\d+", rest)
        assert digits is not None
        fraction = digits.group(0)
        normal = f"{seconds}.{(fraction + '000000')[:6]}{rest[len(fraction) :]}"
    try:
        moment = datetime.fromisoformat(normal)
    except ValueError as exc:
        raise SiweParseError(f"not a valid date-time: {text!r}") from exc
    return int(moment.timestamp() * 1000)


class _Lines:
    """The message's lines, taken in order."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.at = 0

    def take(self) -> str:
        if self.at >= len(self.lines):
            raise SiweParseError("the message ends early")
        line = self.lines[self.at]
        self.at += 1
        return line

    def peek(self) -> str | None:
        return self.lines[self.at] if self.at < len(self.lines) else None

    def field(self, name: str, pattern: re.Pattern[str]) -> str:
        line = self.take()
        prefix = f"{name}: "
        if not line.startswith(prefix):
            raise SiweParseError(f"line {self.at}: expected {name!r}")
        value = line[len(prefix) :]
        if not pattern.fullmatch(value):
            raise SiweParseError(f"line {self.at}: bad {name}")
        return value

    def optional(self, name: str, pattern: re.Pattern[str]) -> str | None:
        line = self.peek()
        if line is None or not line.startswith(f"{name}: "):
            return None
        return self.field(name, pattern)


def parse_siwe(text: str) -> SiweMessage:
    """Parse an EIP-4361 message exactly as the ABNF allows; SiweParseError otherwise."""
    if len(text) > MAX_MESSAGE_CHARS:
        raise SiweParseError("the message is too long")
    if "\r" in text:
        raise SiweParseError("lines end with LF only")
    lines = _Lines(text)
    first = _FIRST_LINE.fullmatch(lines.take())
    if first is None:
        raise SiweParseError("line 1: expected '<domain> wants you to sign in…'")
    scheme, domain = first.group(1), first.group(2)
    address = lines.take()
    if not _ADDRESS.fullmatch(address):
        raise SiweParseError("line 2: expected an address")
    if checksum_encode(bytes.fromhex(address[2:])) != address:
        raise SiweParseError("line 2: the address is not EIP-55 checksummed")
    if lines.take() != "":
        raise SiweParseError("line 3: expected an empty line")
    statement: str | None = lines.take()
    if statement == "":
        statement = None
    else:
        assert statement is not None
        if not _STATEMENT.fullmatch(statement):
            raise SiweParseError("line 4: the statement has characters the EIP does not allow")
        if lines.take() != "":
            raise SiweParseError("line 5: expected an empty line after the statement")
    uri = lines.field("URI", _URI_RE)
    version = lines.take()
    if version != "Version: 1":
        raise SiweParseError(f"line {lines.at}: expected 'Version: 1'")
    chain_id = lines.field("Chain ID", _CHAIN_ID)
    nonce = lines.field("Nonce", _NONCE)
    issued_at = lines.field("Issued At", _DATE_TIME_RE)
    expiration = lines.optional("Expiration Time", _DATE_TIME_RE)
    not_before = lines.optional("Not Before", _DATE_TIME_RE)
    request_id = lines.optional("Request ID", _REQUEST_ID)
    resources: list[str] = []
    if lines.peek() == "Resources:":
        lines.take()
        while lines.peek() is not None:
            line = lines.take()
            if not line.startswith("- ") or not _URI_RE.fullmatch(line[2:]):
                raise SiweParseError(f"line {lines.at}: expected '- <URI>'")
            resources.append(line[2:])
    if lines.peek() is not None:
        raise SiweParseError(f"line {lines.at + 1}: unexpected text")
    if len(chain_id) > 18:
        raise SiweParseError("the chain id is too large")
    message = SiweMessage(
        domain=domain,
        address=address,
        uri=uri,
        chain_id=int(chain_id),
        nonce=nonce,
        issued_at=issued_at,
        scheme=scheme,
        statement=statement,
        expiration_time=expiration,
        not_before=not_before,
        request_id=request_id,
        resources=tuple(resources),
    )
    for moment in (issued_at, expiration, not_before):
        if moment is not None:
            rfc3339_ms(moment)  # a date the grammar matched but the calendar lacks: refused
    return message


@dataclass(frozen=True)
class SiweExpectations:
    """What a message must say to sign in here: this service's origin (``scheme`` and
    ``domain``, from ``INVOICING_BASE_URL``), a URI under that origin, a configured chain,
    and times that hold ``now``."""

    scheme: str
    domain: str
    chain_ids: frozenset[int]
    max_age_ms: int  # how old ``Issued At`` may be
    max_clock_skew_ms: int = 60_000

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.domain}"


def siwe_problem(message: SiweMessage, expected: SiweExpectations, now_ms: int) -> str | None:
    """Why ``message`` may not sign in here now, or None. The nonce and the signature are
    checked by the caller (the nonce is single-use, stored by the service)."""
    if message.domain != expected.domain:
        return "the message is for another domain"
    if message.scheme is not None and message.scheme != expected.scheme:
        return "the message is for another scheme"
    if message.uri != expected.origin and not message.uri.startswith(expected.origin + "/"):
        return "the message's URI is not this service"
    if message.chain_id not in expected.chain_ids:
        return "the message's chain is not one this service runs on"
    issued = message.issued_at_ms
    if issued > now_ms + expected.max_clock_skew_ms:
        return "the message is issued in the future"
    if now_ms - issued > expected.max_age_ms:
        return "the message is too old"
    expiration = message.expiration_ms
    if expiration is not None and expiration <= now_ms:
        return "the message has expired"
    not_before = message.not_before_ms
    if not_before is not None and not_before > now_ms:
        return "the message is not valid yet"
    return None
