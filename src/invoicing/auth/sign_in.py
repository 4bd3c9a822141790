"""Signing in to the dashboard, and its sessions (docs/dashboard.md#sign-in).

Two ways in, each a single-use *ticket* stored as its SHA-256 and deleted when used:

- **Sign-In with Ethereum.** The service issues a nonce (:func:`issue_nonce`); the wallet
  signs an EIP-4361 message naming this service's origin, a chain it runs, the nonce and the
  times (``auth.siwe``). :func:`verify_sign_in` checks every field, then the signature: an
  EOA by recovery (coincurve, ``auth.signatures``), a contract wallet by EIP-1271
  ``isValidSignature`` through an ``eth_call`` of at most the relayer's meta gas cap, so a
  wallet cannot make the check burn more. Only then is the nonce spent, in the transaction
  that writes the session: a replayed message finds no nonce.
- **A login link** (``invoicing dashboard-link --owner``): a token for one owner, expiring
  in minutes, spent on first use (:func:`spend_link`).

A session is a row (:class:`auth.models.DashboardSession`) found by the SHA-256 of its cookie
value; it expires, is listed, and is ended by logout or by its owner revoking it. Its CSRF
token is random and travels in every state-changing request's form or header.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.auth.signatures import personal_message_hash, recover_signer
from invoicing.auth.siwe import (
    SiweExpectations,
    SiweMessage,
    SiweParseError,
    parse_siwe,
    siwe_problem,
)
from invoicing.db import Database
from invoicing.errors import InvalidRequest, NotFound, Unauthorized
from invoicing.tables.auth import DashboardSession, SignInTicket

NONCE = "nonce"
LINK = "link"
LINK_PREFIX = "dl_"
# A session's last_seen_at is written at most this often (not on every page).
SEEN_RESOLUTION_MS = 60_000
MAX_SIGNATURE_CHARS = 4098


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


async def issue_nonce(db: Database, now_ms: int, ttl_ms: int) -> str:
    """A fresh SIWE nonce (alphanumeric, 16 characters, as EIP-4361 asks: at least 8)."""
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789"
    nonce = "".join(secrets.choice(alphabet) for _ in range(16))
    async with db.transaction() as session:
        session.add(SignInTicket(ticket_hash=_hash(nonce), kind=NONCE, expires_at=now_ms + ttl_ms))
    return nonce


async def issue_link(db: Database, owner_address: str, now_ms: int, ttl_ms: int) -> str:
    """A single-use login token for ``owner_address`` (the path of its login link)."""
    token = LINK_PREFIX + secrets.token_urlsafe(32)
    async with db.transaction() as session:
        session.add(
            SignInTicket(
                ticket_hash=_hash(token),
                kind=LINK,
                owner_address=owner_address,
                expires_at=now_ms + ttl_ms,
            )
        )
    return token


def login_url(base_url: str, token: str) -> str:
    """The login link of ``token`` on the service's public origin (``INVOICING_BASE_URL``)."""
    return f"{base_url.rstrip('/')}/dashboard/login/link/{token}"


async def _spend(session: AsyncSession, kind: str, secret: str, now_ms: int) -> SignInTicket | None:
    """Delete the unexpired ticket ``secret`` of ``kind``; the ticket, or None when there is
    none (never issued, expired, or already spent by this or another process)."""
    ticket = await session.scalar(
        select(SignInTicket).where(
            SignInTicket.ticket_hash == _hash(secret), SignInTicket.kind == kind
        )
    )
    if ticket is None or ticket.expires_at <= now_ms:
        return None
    spent = await session.execute(
        delete(SignInTicket).where(SignInTicket.ticket_hash == ticket.ticket_hash)
    )
    return ticket if spent.rowcount == 1 else None  # type: ignore[attr-defined]


async def spend_link(session: AsyncSession, token: str, now_ms: int) -> str:
    """The owner a login link was issued for, spending it; 401 when unknown, used or expired."""
    ticket = None
    if token.startswith(LINK_PREFIX) and len(token) < 100:
        ticket = await _spend(session, LINK, token, now_ms)
    if ticket is None or ticket.owner_address is None:
        raise Unauthorized("this login link is unknown, used or expired")
    return ticket.owner_address


class WalletChain(Protocol):
    """What the EIP-1271 check needs of the message's chain (a ``chain.gateway.ChainGateway``)."""

    async def has_code(self, address: str) -> bool: ...

    async def is_valid_signature(
        self, wallet: str, digest: bytes, signature: bytes, gas_cap: int
    ) -> bool: ...


class Chains(Protocol):
    def get(self, chain_id: int) -> WalletChain: ...


@dataclass(frozen=True)
class SignIn:
    """A checked SIWE sign-in, its nonce not yet spent (:func:`spend_nonce`)."""

    message: SiweMessage
    owner_address: str


async def verify_sign_in(
    chains: Chains,
    text: str,
    signature: str,
    expected: SiweExpectations,
    now_ms: int,
    gas_cap: int,
) -> SignIn:
    """Parse and check a signed EIP-4361 message; 400 ``invalid_request`` when it does not
    parse, 401 ``unauthorized`` when a field or the signature is not right."""
    try:
        message = parse_siwe(text)
    except SiweParseError as exc:
        raise InvalidRequest(f"message: not an EIP-4361 message ({exc})") from None
    problem = siwe_problem(message, expected, now_ms)
    if problem is not None:
        raise Unauthorized(problem)
    if len(signature) > MAX_SIGNATURE_CHARS:
        raise Unauthorized("the signature is not by the message's address")
    if recover_signer(text, signature) != message.address:
        if not await _contract_wallet_signed(chains, message, text, signature, gas_cap):
            raise Unauthorized("the signature is not by the message's address")
    return SignIn(message, message.address)


async def _contract_wallet_signed(
    chains: Chains, message: SiweMessage, text: str, signature: str, gas_cap: int
) -> bool:
    """EIP-1271 on the message's chain, when its address holds code."""
    chain = chains.get(message.chain_id)
    if not signature.startswith("0x"):
        return False
    try:
        raw = bytes.fromhex(signature[2:])
    except ValueError:
        return False
    if not await chain.has_code(message.address):
        return False
    return await chain.is_valid_signature(
        message.address, personal_message_hash(text), raw, gas_cap
    )


async def spend_nonce(session: AsyncSession, sign_in: SignIn, now_ms: int) -> None:
    """Spend the message's nonce; 401 when it was never issued, is spent or expired."""
    if await _spend(session, NONCE, sign_in.message.nonce, now_ms) is None:
        raise Unauthorized("the message's nonce is unknown, used or expired: sign in again")


@dataclass(frozen=True)
class NewSession:
    owner_address: str  # the account the session acts on
    method: str
    chain_id: int | None
    user_agent: str | None
    # A member signing in to the owner's account (``auth.team``); None: the owner.
    member_address: str | None = None


async def open_session(
    session: AsyncSession, new: NewSession, now_ms: int, ttl_ms: int
) -> tuple[DashboardSession, str]:
    """Write a session; returns it and its cookie value (shown to the browser only)."""
    token = secrets.token_urlsafe(32)
    row = DashboardSession(
        id=str(uuid.uuid4()),
        token_hash=_hash(token),
        owner_address=new.owner_address,
        owner_key=new.owner_address.lower(),
        csrf_token=secrets.token_urlsafe(32),
        method=new.method,
        chain_id=new.chain_id,
        user_agent=(new.user_agent or "")[:200] or None,
        created_at=now_ms,
        last_seen_at=now_ms,
        expires_at=now_ms + ttl_ms,
        member_key=None if new.member_address is None else new.member_address.lower(),
    )
    session.add(row)
    await session.flush()
    return row, token


async def live_session(db: Database, token: str, now_ms: int) -> DashboardSession | None:
    """The unrevoked, unexpired session of a cookie value, or None; notes when it was seen."""
    if not token or len(token) > 100:
        return None
    async with db.sessions() as session:
        row = await session.scalar(
            select(DashboardSession).where(DashboardSession.token_hash == _hash(token))
        )
    if row is None or row.revoked_at is not None or row.expires_at <= now_ms:
        return None
    if now_ms - row.last_seen_at >= SEEN_RESOLUTION_MS:
        async with db.transaction() as session:
            await session.execute(
                update(DashboardSession)
                .where(DashboardSession.id == row.id)
                .values(last_seen_at=now_ms)
            )
        row.last_seen_at = now_ms
    return row


def csrf_matches(row: DashboardSession, presented: str | None) -> bool:
    """Whether ``presented`` is the session's CSRF token (compared in constant time)."""
    return presented is not None and hmac.compare_digest(
        row.csrf_token.encode(), presented.encode()
    )


async def list_sessions(
    session: AsyncSession, owner_key: str, now_ms: int
) -> Sequence[DashboardSession]:
    """The owner's sessions that are still live, newest first."""
    rows = await session.scalars(
        select(DashboardSession)
        .where(
            DashboardSession.owner_key == owner_key,
            DashboardSession.revoked_at.is_(None),
            DashboardSession.expires_at > now_ms,
        )
        .order_by(DashboardSession.created_at.desc(), DashboardSession.id)
    )
    return rows.all()


async def revoke_session(
    session: AsyncSession, owner_key: str, session_id: str, now_ms: int
) -> DashboardSession:
    """End one of the owner's sessions (404 if not theirs); ending twice keeps the first time."""
    row = await session.scalar(
        select(DashboardSession).where(
            DashboardSession.id == session_id, DashboardSession.owner_key == owner_key
        )
    )
    if row is None:
        raise NotFound("no such session for this owner")
    if row.revoked_at is None:
        row.revoked_at = now_ms
    return row


async def purge_sign_in(db: Database, now_ms: int) -> None:
    """Forget expired tickets and sessions over a day past their end (housekeeping)."""
    async with db.transaction() as session:
        await session.execute(delete(SignInTicket).where(SignInTicket.expires_at <= now_ms))
        await session.execute(
            delete(DashboardSession).where(DashboardSession.expires_at <= now_ms - 86_400_000)
        )
