"""In-memory ChainGateway for unit tests.

Balances, token metadata and factory state are set by hand. Sending is recorded: raw
transactions the relayer broadcasts land in ``sent`` (their hashes in ``known``), and a test
sets what the node answers next (receipts, mined counts, fee caps, a simulation revert).
``simulation_errors`` makes a simulation fail only when its calldata holds a given 32-byte
word (an escrow's salt): a revert or a JSON-RPC error raised for one escrow of a batch.
``errors`` makes every call of one method raise (a JSON-RPC error, a timeout…).

It answers as a node does where the interface says what a node answers
(``tests/integration/test_gateway_contract.py`` runs one set of checks on it and on
``EvmGateway`` over anvil): balances read at a block are those of that block (the books are
kept as they stood when ``block`` moved on), every block up to the head has a timestamp, and
an account's native balance is the one ``balances`` reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from invoicing.addresses import address_bytes, normalize_address
from invoicing.chain.answers import ContractRevert, RpcError
from invoicing.chain.config import ChainConfig, TokenConfig
from invoicing.chain.escrows import create2_address
from invoicing.chain.evm import BlockRef
from invoicing.chain.feeds import FeedRound
from invoicing.chain.gateway import ChainGateway, NonceUse, configured_symbol
from invoicing.chain.transfers import Transfer
from invoicing.errors import ChainUnavailable
from invoicing.hashing import keccak256

FAKE_FACTORY = "0x" + "fa" * 20
# Timestamps of blocks not set by hand: the genesis at this time, one block every 12 s.
GENESIS_TIME_S = 1_700_000_000
BLOCK_TIME_S = 12


class FakeChain:
    def __init__(
        self, chain_id: int = 31337, confirmations: int = 1, relayer_key: str | None = None
    ) -> None:
        self.config = ChainConfig(
            chain_id=chain_id,
            name="Fake chain",
            rpc_url="fake://",
            factory=FAKE_FACTORY,
            confirmations=confirmations,
            relayer_key=None if relayer_key is None else SecretStr(relayer_key),
        )
        self.factory = normalize_address(FAKE_FACTORY)
        self._block = 1
        # The books as they stood at the end of each past block (see ``block``).
        self._history: dict[int, tuple[dict[str, int], dict[str, dict[str, int]]]] = {}
        self.node_chain_id = chain_id  # what eth_chainId answers
        self.native: dict[str, int] = {}
        self.tokens: dict[str, dict[str, int]] = {}
        self.decimals: dict[str, int] = {}
        self.symbols: dict[str, str] = {}
        self.nonces: dict[str, int] = {}
        # Escrows a previous factory made (payment address → factory, lower case), and the
        # owners' nonces there ((factory, owner) → nonce).
        self.escrow_factories: dict[str, str] = {}
        self.previous_nonces: dict[tuple[str, str], int] = {}
        self.fees: dict[str, tuple[int, str | None]] = {}
        self.refund_delegates: dict[str, str] = {}  # owner key -> delegate (checksummed)
        self.contracts: set[str] = {FAKE_FACTORY}  # addresses with code, lower case
        # (wallet lower case, digest, signature) an EIP-1271 wallet accepts.
        self.wallet_signatures: set[tuple[str, bytes, bytes]] = set()
        # EIP-3009 nonces used or canceled: (token, authorizer) lower case, nonce.
        self.used_authorizations: set[tuple[str, str, bytes]] = set()
        # ERC-20 allowances: (token, holder, spender) lower case → amount.
        self.allowances: dict[tuple[str, str, str], int] = {}
        # Subscriptions: (subscription id, period) charged, and subscription ids cancelled.
        self.charged_periods: set[tuple[bytes, int]] = set()
        self.cancelled_subscriptions: set[bytes] = set()
        # EIP-2612 nonces: (token, owner) lower case → nonce; any other has no permit.
        self.permit_nonces: dict[tuple[str, str], int] = {}
        self.unreadable_tokens: set[str] = set()  # tokens whose balances read as None, lower
        self.available = True
        self.balance_calls = 0
        # Price feeds by lower-case address: (decimals, round id, answer, startedAt,
        # updatedAt, answeredInRound), set by hand (``set_feed``).
        self.feed_rounds: dict[str, tuple[int, int, int, int, int, int]] = {}
        self.feed_reads = 0
        # Sending: what the node holds and will answer.
        self.sent: list[bytes] = []
        self.known: set[str] = set()
        self.receipts: dict[str, dict[str, Any]] = {}
        self.mined_counts: dict[str, int] = {}  # "latest" transaction count, lower case
        self.pending_counts: dict[str, int] = {}  # "pending" count; the mined one if unset
        self.max_fee_per_gas = 2 * 10**9
        self.max_priority_fee_per_gas = 10**9
        self.eip1559_fees = True  # False: a legacy-fee chain (type-0 transactions)
        self.gas_estimate = 50_000
        self.simulated: list[tuple[str, bytes]] = []  # (to, data) of each gas estimate
        self.gas_caps: list[int | None] = []  # the gas cap of each estimate
        self.simulated_fees: list[dict[str, int] | None] = []  # the fee fields of each estimate
        self.revert_data: bytes | None = None  # set: every simulation reverts with it
        self.send_error: RpcError | None = None  # set: the node refuses every send
        # A simulation whose calldata holds one of these words raises its exception.
        self.simulation_errors: dict[bytes, Exception] = {}
        # Method name → the exception every call of it raises.
        self.errors: dict[str, Exception] = {}
        self.block_times: dict[int, int] = {}  # block → its timestamp (unix s), if not the default
        # Transfers into escrows (``record_transfer``): (token or None, the transfer).
        self.transfers: list[tuple[str | None, Transfer]] = []
        self.block_hashes: dict[int, str] = {}  # block → its hash, if not the default
        self.transactions: dict[str, dict[str, Any]] = {}  # hash → eth_getTransactionByHash

    @property
    def block(self) -> int:
        """The head. Moving it on keeps the books as they stood, for reads at past blocks."""
        return self._block

    @block.setter
    def block(self, number: int) -> None:
        if number > self._block:
            tokens = {token: dict(book) for token, book in self.tokens.items()}
            self._history[self._block] = (dict(self.native), tokens)
        self._block = number

    def add_token(
        self, token: str, decimals: int, symbol: str = "TKN", *, allow: bool = True
    ) -> None:
        """A token on the chain; ``allow`` also puts it on the chain's allow-list."""
        self.decimals[token.lower()] = decimals
        self.symbols[token.lower()] = symbol
        self.tokens[token.lower()] = {}
        if allow:
            listed = (*self.config.tokens, TokenConfig(token, symbol, decimals))
            self.config = dataclasses.replace(self.config, tokens=listed)

    def pay(self, address: str, amount: int, token: str | None = None) -> None:
        book = self.native if token is None else self.tokens[token.lower()]
        book[address.lower()] = book.get(address.lower(), 0) + amount

    def record_transfer(
        self, to: str, sender: str, amount: int, token: str | None = None, source: str = "tx"
    ) -> Transfer:
        """A transfer mined in the head block: paid into ``to``, listed for transfer reads."""
        self.pay(to, amount, token)
        number = self.block
        tx_hash = "0x" + keccak256(f"{len(self.transfers)}:{to}".encode()).hex()
        transfer = Transfer(
            normalize_address(to), tx_hash, source, normalize_address(sender), amount, number,
            self._hash_of(number),
        )  # fmt: skip
        self.transfers.append((None if token is None else token.lower(), transfer))
        return transfer

    def _hash_of(self, block: int) -> str:
        return self.block_hashes.get(block, "0x" + block.to_bytes(32, "big").hex())

    def _check(self, method: str) -> None:
        if not self.available:
            raise ChainUnavailable("fake chain is down")
        error = self.errors.get(method)
        if error is not None:
            raise error

    async def block_number(self) -> int:
        self._check("block_number")
        return self.block

    async def block_timestamp(self, block: int) -> int:
        self._check("block_timestamp")
        if block > self.block:
            raise ChainUnavailable(f"block {block} not available")
        return self.block_times.get(block, GENESIS_TIME_S + block * BLOCK_TIME_S)

    async def chain_id(self) -> int:
        self._check("chain_id")
        return self.node_chain_id

    async def balances(
        self, token: str | None, addresses: list[str], block: BlockRef = "latest"
    ) -> list[int | None]:
        self._check("balances")
        self.balance_calls += 1
        if token is not None and token.lower() in self.unreadable_tokens:
            return [None] * len(addresses)
        native, tokens = self._books_at(block)
        book = native if token is None else tokens.get(token.lower(), {})
        return [book.get(a.lower(), 0) for a in addresses]

    async def read_escrows(
        self, groups: Sequence[tuple[str | None, Sequence[str]]], block: int
    ) -> list[list[int | None]]:
        """One call for every group (the EscrowReader), counted in ``balance_calls``."""
        self._check("balances")
        self.balance_calls += 1
        native, tokens = self._books_at(block)
        values: list[list[int | None]] = []
        for token, addresses in groups:
            if token is not None and token.lower() in self.unreadable_tokens:
                values.append([None] * len(addresses))
                continue
            book = native if token is None else tokens.get(token.lower(), {})
            values.append([book.get(a.lower(), 0) for a in addresses])
        return values

    async def read_escrows_at_head(
        self, groups: Sequence[tuple[str | None, Sequence[str]]]
    ) -> tuple[int, list[list[int | None]]]:
        """``read_escrows`` at the head: one call, no head read."""
        block = self.block
        return block, await self.read_escrows(groups, block)

    def _books_at(self, block: BlockRef) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """The native and token books at ``block``: the last kept at or before it, or today's."""
        if not isinstance(block, int) or block >= self.block:
            return self.native, self.tokens
        kept = [number for number in self._history if number <= block]
        return self._history[max(kept)] if kept else ({}, {})

    async def token_symbol(self, token: str | None) -> str:
        return configured_symbol(self.config, token)

    def escrow_address(self, owner: str, salt: bytes) -> str:
        return create2_address(address_bytes(FAKE_FACTORY), keccak256(b"fake-escrow"), owner, salt)

    def factory_of(self, owner: str, salt: bytes, payment_address: str) -> str:
        return self.escrow_factories.get(payment_address.lower(), self.factory)

    async def factory_nonce(self, owner: str, factory: str | None = None) -> int:
        self._check("factory_nonce")
        if factory is not None and factory.lower() != self.factory.lower():
            return self.previous_nonces.get((factory.lower(), owner.lower()), 0)
        return self.nonces.get(owner.lower(), 0)

    async def fee_settings(self, owner: str, factory: str | None = None) -> tuple[int, str | None]:
        self._check("fee_settings")
        if factory is not None and factory.lower() != self.factory.lower():
            return (0, None)  # a previous factory's settings are not kept here
        return self.fees.get(owner.lower(), (0, None))

    async def refund_delegate(self, owner: str, factory: str | None = None) -> str | None:
        self._check("refund_delegate")
        if factory is not None and factory.lower() != self.factory.lower():
            return None
        return self.refund_delegates.get(owner.lower())

    def set_feed(
        self,
        address: str,
        answer: int,
        updated_at: int,
        *,
        decimals: int = 8,
        round_id: int = 1,
        started_at: int | None = None,
        answered_in_round: int | None = None,
    ) -> None:
        """What the aggregator at ``address`` answers from now on (a complete round unless
        ``started_at`` or ``answered_in_round`` say otherwise)."""
        started = updated_at if started_at is None else started_at
        answered = round_id if answered_in_round is None else answered_in_round
        self.feed_rounds[address.lower()] = (
            decimals, round_id, answer, started, updated_at, answered
        )  # fmt: skip

    async def feed_round(self, address: str) -> FeedRound:
        self._check("feed_round")
        self.feed_reads += 1
        found = self.feed_rounds.get(address.lower())
        if found is None:
            raise ChainUnavailable(f"price feed {address} could not be read")
        return FeedRound(normalize_address(address), self._block, *found)

    async def has_code(self, address: str) -> bool:
        self._check("has_code")
        return address.lower() in self.contracts

    async def is_valid_signature(
        self, wallet: str, digest: bytes, signature: bytes, gas_cap: int
    ) -> bool:
        self._check("is_valid_signature")
        return (wallet.lower(), digest, signature) in self.wallet_signatures

    async def authorization_state(self, token: str, authorizer: str, nonce: bytes) -> bool:
        self._check("authorization_state")
        return (token.lower(), authorizer.lower(), nonce) in self.used_authorizations

    async def allowance(self, token: str, holder: str, spender: str) -> int:
        self._check("allowance")
        return self.allowances.get((token.lower(), holder.lower(), spender.lower()), 0)

    async def permit_nonce(self, token: str, owner: str) -> int | None:
        self._check("permit_nonce")
        return self.permit_nonces.get((token.lower(), owner.lower()))

    async def subscription_state(
        self, contract: str, subscription: bytes, period: int
    ) -> tuple[bool, bool]:
        self._check("subscription_state")
        charged = (subscription, period) in self.charged_periods
        return charged, subscription in self.cancelled_subscriptions

    async def eip1559(self) -> bool:
        self._check("eip1559")
        return self.eip1559_fees

    async def fee_caps(self) -> tuple[int, int]:
        self._check("fee_caps")
        return self.max_fee_per_gas, self.max_priority_fee_per_gas

    async def estimate_gas(
        self,
        sender: str,
        to: str,
        data: bytes,
        value: int = 0,
        gas_cap: int | None = None,
        fees: dict[str, int] | None = None,
    ) -> int:
        self._check("estimate_gas")
        self.simulated.append((to, data))
        self.gas_caps.append(gas_cap)
        self.simulated_fees.append(fees)
        for word, error in self.simulation_errors.items():
            if word in data:
                raise error
        if self.revert_data is not None:
            raise ContractRevert(3, "execution reverted", self.revert_data)
        if gas_cap is not None and self.gas_estimate > gas_cap:
            # What geth and anvil answer when the call runs out of the gas it was given.
            raise RpcError(-32003, f"gas required exceeds allowance: {gas_cap}")
        return self.gas_estimate

    async def native_balance(self, address: str) -> int:
        self._check("native_balance")
        return self.native.get(address.lower(), 0)

    async def transaction_count(self, address: str, block: BlockRef = "pending") -> int:
        self._check("transaction_count")
        mined = self.mined_counts.get(address.lower(), 0)
        return self.pending_counts.get(address.lower(), mined) if block == "pending" else mined

    async def nonce_use(
        self, address: str, nonce: int, hashes: Sequence[str], block: int
    ) -> NonceUse:
        self._check("nonce_use")  # the mined counts set by hand hold at every block
        receipt = next((self.receipts[h] for h in hashes if h in self.receipts), None)
        taken = receipt is None and self.mined_counts.get(address.lower(), 0) > nonce
        return NonceUse(receipt, taken=taken)

    async def send_raw_transaction(self, raw: bytes) -> str:
        self._check("send_raw_transaction")
        if self.send_error is not None:
            raise self.send_error
        self.sent.append(raw)
        tx_hash = "0x" + keccak256(raw).hex()  # a typed transaction's hash
        self.known.add(tx_hash)
        return tx_hash

    async def receipt(self, tx_hash: str) -> dict[str, Any] | None:
        self._check("receipt")
        return self.receipts.get(tx_hash)

    async def is_known_transaction(self, tx_hash: str) -> bool:
        self._check("is_known_transaction")
        return tx_hash in self.known

    async def token_transfers(
        self, token: str, escrows: Sequence[str], from_block: int, to_block: int
    ) -> list[Transfer]:
        self._check("token_transfers")
        return [
            t for asset, t in self.transfers
            if asset == token.lower() and t.to in escrows
            and from_block <= t.block_number <= to_block
            and t.block_hash == self._hash_of(t.block_number)
        ]  # fmt: skip

    async def native_transfers(self, escrows: Sequence[str], block: int) -> list[Transfer]:
        self._check("native_transfers")
        return [
            t for asset, t in self.transfers
            if asset is None and t.to in escrows and t.block_number == block
            and t.block_hash == self._hash_of(block)
        ]  # fmt: skip

    async def block_hash(self, block: int) -> str | None:
        self._check("block_hash")
        return self._hash_of(block) if block <= self.block else None

    async def transaction(self, tx_hash: str) -> dict[str, Any] | None:
        self._check("transaction")
        return self.transactions.get(tx_hash)

    async def aclose(self) -> None:
        """Nothing to close: no connection."""


if TYPE_CHECKING:  # mypy holds the fake to the interface
    _fake_is_a_gateway: ChainGateway = FakeChain()
