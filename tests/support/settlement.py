"""FakeChain as a miner of the relayer's withdraw transactions, acting like PaymentFactory."""

from __future__ import annotations

import functools
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from eth_abi.abi import decode, encode
from eth_account import Account
from eth_account.typed_transactions import TypedTransaction
from hexbytes import HexBytes

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.chain.abi import abi_function
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.events import WITHDRAWN_TOPIC
from invoicing.chain.fake import FakeChain
from invoicing.clock import FakeClock
from invoicing.hashing import keccak256
from invoicing.monitor.check import recheck_invoice
from invoicing.services import Services
from invoicing.settlement.budget import Limits
from invoicing.settlement.relayer import Relayer
from invoicing.settlement.tracking import track_pending
from invoicing.tables.invoices import Invoice
from invoicing.tables.settlement import RelayerTransaction
from tests.support.monitoring import TOKEN, fake_services, new_invoice, reload

_WITHDRAW = abi_function(PAYMENT_FACTORY, "withdraw")


@dataclass(frozen=True)
class SentWithdraw:
    tx_hash: str
    sender: str
    owner: str
    token: str  # ZERO_ADDRESS for native coin
    salts: list[bytes]


def sent_withdraws(fake: FakeChain) -> list[SentWithdraw]:
    """The withdraw transactions sent to ``fake`` (each signed version once), in order."""
    found: dict[str, SentWithdraw] = {}
    for raw in fake.sent:
        sent = _decoded(raw)
        if sent is not None:
            found[sent.tx_hash] = sent
    return list(found.values())


@functools.cache
def _decoded(raw: bytes) -> SentWithdraw | None:
    """``raw`` as a withdraw, or None for another call. A signed transaction never changes:
    each is decoded (and its sender recovered) once, however often a test reads the sent list
    (a day's thousand sweeps read it after each interval)."""
    tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
    data = bytes(tx["data"])
    if data[:4] != _WITHDRAW.selector:
        return None
    owner, token, salts = decode(list(_WITHDRAW.inputs), data[4:])
    return SentWithdraw(
        "0x" + keccak256(raw).hex(),
        str(Account.recover_transaction(raw)),
        normalize_address(owner),
        normalize_address(token),
        list(salts),
    )


def mine_withdraws(fake: FakeChain, blocked: Collection[str] = ()) -> list[SentWithdraw]:
    """Mine every sent withdraw that has no receipt yet, in one new block: each escrow's whole
    balance of the token goes to the owner, except escrows in ``blocked`` (a token that
    blocks them), and the receipt carries the factory's ``Withdrawn`` event."""
    blocked_keys = {address.lower() for address in blocked}
    fake.block += 1
    mined = []
    for sent in sent_withdraws(fake):
        if sent.tx_hash in fake.receipts:
            continue
        token = None if sent.token == ZERO_ADDRESS else sent.token
        book = fake.native if token is None else fake.tokens[token.lower()]
        total = 0
        for salt in sent.salts:
            escrow = fake.escrow_address(sent.owner, salt).lower()
            if escrow in blocked_keys:
                continue
            total += book.pop(escrow, 0)
        book[sent.owner.lower()] = book.get(sent.owner.lower(), 0) + total
        fake.receipts[sent.tx_hash] = {
            "status": 1,
            "blockNumber": fake.block,
            "transactionHash": sent.tx_hash,
            "gasUsed": 50_000,
            "logs": [withdrawn_log(fake.factory, sent.owner, sent.token, len(sent.salts), total)],
        }
        key = sent.sender.lower()
        fake.mined_counts[key] = fake.mined_counts.get(key, 0) + 1
        mined.append(sent)
    return mined


def withdrawn_log(
    factory: str, owner: str, token: str, count: int, total: int
) -> dict[str, object]:
    """A receipt log of ``Withdrawn(owner, token, count, total, fee = 0)``."""
    return {
        "address": factory,
        "topics": [
            "0x" + WITHDRAWN_TOPIC.hex(),
            "0x" + bytes(12).hex() + owner[2:].lower(),
            "0x" + bytes(12).hex() + token[2:].lower(),
        ],
        "data": "0x" + encode(["uint256", "uint256", "uint256"], [count, total, 0]).hex(),
    }


def new_chain() -> FakeChain:
    """A FakeChain with its own relayer key and chain id, accepting the test token."""
    key = "0x" + bytes(Account.create().key).hex()
    chain = FakeChain(chain_id=random.randrange(10**6, 10**9), relayer_key=key)
    chain.add_token(TOKEN, 6, "TUSD")
    return chain


@dataclass
class SettlementWorld:
    """Services on a FakeChain with a real database, its fake clock and its relayer."""

    services: Services
    fake: FakeChain
    clock: FakeClock
    relayer: Relayer

    @property
    def chain_id(self) -> int:
        return self.fake.config.chain_id

    async def paid(self, owner: str, amount: str, token: str | None = None) -> Invoice:
        invoice = await new_invoice(
            self.services, self.fake, amount=amount, token=token, owner_address=owner
        )
        self.fake.pay(invoice.payment_address, int(invoice.required_raw), token)
        assert (await recheck_invoice(self.services, invoice)).status == "paid"
        return await reload(self.services, invoice)

    async def settle(self, blocked: tuple[str, ...] = ()) -> list[RelayerTransaction]:
        """Mine what was sent and follow it to the end."""
        mine_withdraws(self.fake, blocked)
        return await track_pending(self.services, self.fake, self.relayer)


World = TypeVar("World", bound=SettlementWorld)


@asynccontextmanager
async def worlds(
    database_url: str, kind: type[World], **defaults: Any
) -> AsyncIterator[Callable[..., Awaitable[World]]]:
    """Makes worlds of ``kind`` (settings: ``defaults`` then the call's); disposes them."""
    built: list[Services] = []

    async def make(**settings: Any) -> World:
        services = fake_services(database_url, fake := new_chain(), **{**defaults, **settings})
        built.append(services)
        clock = services.clock
        assert isinstance(clock, FakeClock)
        return kind(
            services, fake, clock, Relayer(fake, services.db, clock, Limits.of(services.settings))
        )

    try:
        yield make
    finally:
        for services in built:
            await services.db.dispose()
