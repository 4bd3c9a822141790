"""FakeChain as a miner of the relayer's withdraw transactions, acting like PaymentFactory."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from eth_abi.abi import decode, encode
from eth_account import Account
from eth_account.typed_transactions import TypedTransaction
from hexbytes import HexBytes

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.chain.abi import abi_function
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.events import WITHDRAWN_TOPIC
from invoicing.chain.fake import FakeChain
from invoicing.hashing import keccak256

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
        tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
        data = bytes(tx["data"])
        if data[:4] != _WITHDRAW.selector:
            continue
        owner, token, salts = decode(list(_WITHDRAW.inputs), data[4:])
        tx_hash = "0x" + keccak256(raw).hex()
        sender = str(Account.recover_transaction(raw))
        found[tx_hash] = SentWithdraw(
            tx_hash, sender, normalize_address(owner), normalize_address(token), list(salts)
        )
    return list(found.values())


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
