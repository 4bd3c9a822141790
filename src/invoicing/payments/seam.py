"""The payment seam: every payment a payer signs and the relayer pays the gas for, whatever
its method, is carried here, and only here (docs/architecture.md#payment-methods).

A method hands over a ``PayerPurpose``: a ``settlement.signed_relay`` purpose that also says
which authorization it carries (token, payer, nonce), what it moves and to whose owner. Before
anything reaches the chain, in this order:

1. the payee owner turned relayed payments on for the chain (400 ``gasless_unavailable``);
2. the payment moves something (``value`` above 0; 400 ``invalid_authorization``);
3. the authorization was not carried before: the same one pending or confirmed is a repeat
   (``Relayed.first`` false, with the first transaction), any other with its nonce is refused
   (409 ``authorization_used``);
4. the payer has not had ``relayer_payer_failures_per_day`` relayed payments fail on the
   chain today (429 ``rate_limited``): a payer contract that passes the simulation and
   reverts when sent costs that many transactions a day, not the owner's whole share;
5. its gas is charged to the owner's share once the owner has an invoice paid on the chain,
   and to the newcomers' one share before (``settlement.budget``);
6. ``settlement.signed_relay`` checks the signature (EIP-1271 under the gas cap), the nonce,
   the method's own checks, the day's budget, and simulates the call with the fee fields the
   send will carry, then sends it. The authorization's row is written with the send, under the
   relayer account lock, where a second send of it is refused: one authorization is carried,
   and answered as a success, once, however often or concurrently it is presented.

``dry_run`` answers a "verify" question through the same steps, with nothing sent and
nothing written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from invoicing.addresses import address_bytes
from invoicing.chain.answers import ContractRevert
from invoicing.chain.gateway import ChainGateway
from invoicing.db import Database
from invoicing.errors import (
    AuthorizationUsed,
    GaslessUnavailable,
    InvalidAuthorization,
    RateLimited,
)
from invoicing.hashing import keccak256
from invoicing.payments.opt_in import is_enabled
from invoicing.services import Services
from invoicing.settlement.budget import DAY_MS, Spender, spender_of
from invoicing.settlement.finality import Final
from invoicing.settlement.relayer import Call
from invoicing.settlement.signed_relay import (
    Accepted,
    NonceTaken,
    SignedPurpose,
    SignedRequest,
    dry_run_signed,
    relay_signed,
)
from invoicing.tables.relay import AuthorizationStatus, RelayedAuthorization
from invoicing.tables.settlement import RelayerTransaction, TxStatus


@dataclass(frozen=True)
class AuthorizationKey:
    """One payer authorization: its token's nonce space (token, payer) and the nonce."""

    chain_id: int
    token: str  # checksummed
    payer: str  # checksummed
    nonce: str  # 0x + 64 hex digits


class PayerPurpose(SignedPurpose, Protocol):
    """What a payment method hands the seam: a signed purpose, the authorization it carries,
    what it moves, and the owner it pays (whose opt-in and share count)."""

    @property
    def method(self) -> str: ...

    @property
    def key(self) -> AuthorizationKey: ...

    @property
    def value(self) -> int: ...

    @property
    def owner_address(self) -> str: ...


@dataclass(frozen=True)
class Relayed:
    """A carried payment: its transaction, and whether this presentation was the one that
    carried it (``first``) or a repeat of it."""

    accepted: Accepted
    first: bool
    status: str = AuthorizationStatus.SUBMITTED  # an AuthorizationStatus value


async def relay_payment(services: Services, chain: ChainGateway, purpose: PayerPurpose) -> Relayed:
    """Carry a payer's payment (steps 1-6 above); nothing is sent when a step refuses it."""
    await _admit(services, purpose)
    earlier = await carried_before(services.db, purpose)
    if earlier is not None:
        return earlier
    carried = _Carried(purpose, await _spender(services, purpose))
    accepted = await relay_signed(services, chain, carried)
    return Relayed(accepted, first=carried.recorded)


async def dry_run(services: Services, chain: ChainGateway, purpose: PayerPurpose) -> None:
    """Whether the payment would be carried now: every step, the simulation included, with
    nothing sent. A payment carried before is refused (409 ``authorization_used``)."""
    await _admit(services, purpose)
    if await carried_before(services.db, purpose) is not None:
        raise AuthorizationUsed("this authorization was carried already")
    await dry_run_signed(services, chain, _Carried(purpose, await _spender(services, purpose)))


async def _admit(services: Services, purpose: PayerPurpose) -> None:
    """Steps 1, 2 and 4."""
    key = purpose.key
    if not await is_enabled(services.db, purpose.owner_address, key.chain_id):
        raise GaslessUnavailable(
            "the payee has not turned on payments the relayer pays for on this chain"
        )
    if purpose.value <= 0:
        raise InvalidAuthorization("value must be more than 0", {"field": "value"})
    now_ms = services.clock.now_ms()
    day_start = now_ms - now_ms % DAY_MS
    limit = services.settings.relayer_payer_failures_per_day
    async with services.db.sessions() as session:
        failed = await session.scalar(
            select(func.count())
            .select_from(RelayedAuthorization)
            .where(
                RelayedAuthorization.chain_id == key.chain_id,
                RelayedAuthorization.payer == key.payer,
                RelayedAuthorization.created_at >= day_start,
                RelayedAuthorization.status == AuthorizationStatus.FAILED,
            )
        )
    if int(failed or 0) >= limit:
        raise RateLimited(
            f"this payer's relayed payments on chain {key.chain_id} failed {limit} times "
            "today; none is carried for it before the next UTC day",
            max(1, -(-(day_start + DAY_MS - now_ms) // 1000)),
        )


async def _spender(services: Services, purpose: PayerPurpose) -> Spender:
    """Step 5: the owner's share once it has an invoice paid on the chain, else the
    newcomers'."""
    async with services.db.sessions() as session:
        return await spender_of(session, purpose.key.chain_id, purpose.owner_address)


async def carried_before(db: Database, purpose: PayerPurpose) -> Relayed | None:
    """Step 3: the same authorization carried before (pending or confirmed), as a repeat;
    409 when another request carried its nonce. A method whose own checks would refuse a
    carried payment (its invoice is paid now) asks this first."""
    async with db.sessions() as session:
        row = await _carrier(session, purpose.key)
    if row is None:
        return None
    if row.request_hash != _request_hash(_call_of(purpose)):
        raise AuthorizationUsed("another authorization with this nonce was carried")
    request = purpose.request
    accepted = Accepted(row.tx_hash, request.chain_id, request.signer_address, request.nonce)
    return Relayed(accepted, first=False, status=row.status)


async def _carrier(session: AsyncSession, key: AuthorizationKey) -> RelayedAuthorization | None:
    """The pending or confirmed row that carries ``key``, if any."""
    return await session.scalar(
        select(RelayedAuthorization)
        .where(
            RelayedAuthorization.chain_id == key.chain_id,
            RelayedAuthorization.token == key.token,
            RelayedAuthorization.payer == key.payer,
            RelayedAuthorization.nonce == key.nonce,
            RelayedAuthorization.status != AuthorizationStatus.FAILED,
        )
        .limit(1)
        .execution_options(populate_existing=True)
    )


def _call_of(purpose: PayerPurpose) -> Call:
    """The call with the request's own signature (as sent: the request hash covers it)."""
    signature = purpose.request.signature
    try:
        raw = bytes.fromhex(signature[2:]) if signature.startswith("0x") else b""
    except ValueError:
        raw = b""
    return purpose.call(purpose.request.deadline, raw)


def _request_hash(call: Call) -> str:
    """As ``settlement.meta`` hashes a request: the target and the calldata."""
    return "0x" + keccak256(address_bytes(call.to) + call.data).hex()


class _Carried:
    """``purpose`` as ``signed_relay`` relays it through the seam: its call spends
    ``spender``'s share, and its send writes the authorization's row (step 6)."""

    def __init__(self, purpose: PayerPurpose, spender: Spender) -> None:
        self.purpose = purpose
        self.spender = spender
        self.recorded = False  # set once this presentation's send is recorded

    @property
    def request(self) -> SignedRequest:
        return self.purpose.request

    def typed_data(self, deadline: int) -> dict[str, Any]:
        return self.purpose.typed_data(deadline)

    def call(self, deadline: int, signature: bytes) -> Call:
        return replace(self.purpose.call(deadline, signature), spender=self.spender)

    async def nonce_taken(self, chain: ChainGateway) -> NonceTaken | None:
        return await self.purpose.nonce_taken(chain)

    def revert_error(self, exc: ContractRevert) -> Exception:
        return self.purpose.revert_error(exc)

    async def before_relay(self, services: Services, chain: ChainGateway) -> None:
        await self.purpose.before_relay(services, chain)

    async def on_hold(self, session: AsyncSession, row: RelayerTransaction) -> None:
        key = self.purpose.key
        carrier = await _carrier(session, key)
        if carrier is not None:  # under the relayer account lock: final
            raise AuthorizationUsed("this authorization was carried already")
        await self.purpose.on_hold(session, row)
        session.add(
            RelayedAuthorization(
                relayer_tx_id=row.id,
                chain_id=key.chain_id,
                token=key.token,
                payer=key.payer,
                nonce=key.nonce,
                method=self.purpose.method,
                owner_key=self.spender.owner_key,
                request_hash=_request_hash(
                    Call(row.purpose, row.to_address, bytes.fromhex(row.data[2:]))
                ),
                tx_hash=row.tx_hash,
                status=AuthorizationStatus.SUBMITTED,
                created_at=row.created_at,
                updated_at=row.created_at,
            )
        )
        self.recorded = True


async def settle_authorization(session: AsyncSession, final: Final[None]) -> None:
    """A final transaction that carried an authorization: confirmed, or failed (reverted or
    dropped; the authorization may then be presented again)."""
    row = final.row
    confirmed = row.status == TxStatus.CONFIRMED
    status = AuthorizationStatus.CONFIRMED if confirmed else AuthorizationStatus.FAILED
    await session.execute(
        update(RelayedAuthorization)
        .where(RelayedAuthorization.relayer_tx_id == row.id)
        .values(status=status, updated_at=final.now_ms)
    )
