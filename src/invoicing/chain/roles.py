"""What the domain needs from a chain, by role (``ChainGateway`` is all three):

- ``EscrowReads``: the head and escrow balances at one block (the monitor, status lookups);
- ``ContractState``: the factory's and tokens' state a signed request depends on;
- ``TransactionSender``: what the relayer needs to send and follow its transactions;
- ``TransferReads``: transfers into escrows, the payments of record.

Signing is not here: the relayer holds its key. ``chain.gateway.EvmGateway`` answers over
JSON-RPC; ``chain.fake.FakeChain`` ships beside it for unit tests, and
``tests/integration/test_gateway_contract.py`` holds the two to the same answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from invoicing.chain.config import ChainConfig
from invoicing.chain.evm import BlockRef
from invoicing.chain.feeds import FeedRound
from invoicing.chain.reader_codec import Group
from invoicing.chain.transfers import Transfer


@dataclass(frozen=True)
class NonceUse:
    """What became of a relayer nonce whose transactions the preferred URL has no receipt for
    (``ChainGateway.nonce_use``)."""

    receipt: dict[str, Any] | None  # one of its transactions' receipt that counts
    # No URL holds a receipt of them, and two URLs (the only one, on a chain with one) report
    # the nonce mined by the block asked about in the same answer as they report no receipt:
    # another transaction took the nonce.
    taken: bool


class EscrowReads(Protocol):
    """The chain as the monitor and the status lookups read it: the head, escrow balances at
    one block, and where an owner's escrows are."""

    config: ChainConfig
    factory: str  # the PaymentFactory's checksummed address

    async def block_number(self) -> int:
        """The head reads happen at, never lower than one this gateway answered before (a
        lagging RPC URL cannot take reads back to an older block; with several URLs, a block
        two of them report: ``chain.heads``)."""
        ...

    async def block_timestamp(self, block: int) -> int:
        """The timestamp (unix seconds) of a block at or below the head."""
        ...

    async def chain_id(self) -> int:
        """The id the node reports (``eth_chainId``); with several URLs, every URL is asked
        and the first id that differs from the configured one is answered."""
        ...

    async def balances(
        self, token: str | None, addresses: list[str], block: BlockRef = "latest"
    ) -> list[int | None]:
        """Balances of many addresses in one call, all read at one block; None where a token
        balance is unreadable (the token's balanceOf failed or misbehaved: see the factory's
        ``balancesOf``), which callers treat as unknown for that address alone."""
        ...

    async def read_escrows(self, groups: Sequence[Group], block: int) -> list[list[int | None]]:
        """``balances`` of (token, addresses) groups, a list each, at ``block`` in as few calls
        as the gas of an ``eth_call`` allows (``chain.reader``)."""
        ...

    async def read_escrows_at_head(
        self, groups: Sequence[Group]
    ) -> tuple[int, list[list[int | None]]]:
        """The head (never lower than one answered before) and ``read_escrows`` there: one
        call when the reader answers every value at once (its answer names the block)."""
        ...

    async def token_symbol(self, token: str | None) -> str:
        """The configured symbol (native or allow-listed token); never calls the token."""
        ...

    def escrow_address(self, owner: str, salt: bytes) -> str:
        """The escrow of (owner, salt) at the current factory: where new invoices are paid."""
        ...

    def factory_of(self, owner: str, salt: bytes, payment_address: str) -> str:
        """The factory (current or previous, ``chain.versions``) that made the escrow at
        ``payment_address`` for (owner, salt): the one that sweeps and refunds it."""
        ...


class ContractState(Protocol):
    """The factory's and tokens' state an owner's or a payer's signed request depends on."""

    async def factory_nonce(self, owner: str, factory: str | None = None) -> int:
        """The owner's ``nonces(owner)`` at ``factory`` (None: the current factory)."""
        ...

    async def fee_settings(self, owner: str, factory: str | None = None) -> tuple[int, str | None]:
        """(feeBps, payout address or None) of an owner, read from ``factory`` (None: the
        current factory)."""
        ...

    async def refund_delegate(self, owner: str, factory: str | None = None) -> str | None:
        """The address whose Refund signatures ``factory`` (None: the current factory) accepts
        for the owner's escrows besides the owner's (``refundDelegateOf``); None when there is
        none, or the factory is a version without delegates."""
        ...

    async def feed_round(self, address: str) -> FeedRound:
        """A Chainlink aggregator's latest round (``latestRoundData`` and ``decimals``, both
        at the head): ChainUnavailable when it cannot be read."""
        ...

    async def has_code(self, address: str) -> bool:
        """Whether a contract (an EIP-1271 wallet, say) is deployed at ``address``."""
        ...

    async def authorization_state(self, token: str, authorizer: str, nonce: bytes) -> bool:
        """EIP-3009 ``authorizationState``: whether the authorizer used or canceled the
        nonce (at the latest block)."""
        ...

    async def allowance(self, token: str, holder: str, spender: str) -> int:
        """ERC-20 ``allowance(holder, spender)`` at the latest block."""
        ...

    async def permit_nonce(self, token: str, owner: str) -> int | None:
        """EIP-2612 ``nonces(owner)`` of ``token`` at the latest block; None when the token
        answers no such function (it has no permit)."""
        ...

    async def subscription_state(
        self, contract: str, subscription: bytes, period: int
    ) -> tuple[bool, bool]:
        """The Subscriptions contract's (period charged, subscription cancelled) for the
        subscription id at the latest block (``payments.subscriptions``)."""
        ...

    async def is_valid_signature(
        self, wallet: str, digest: bytes, signature: bytes, gas_cap: int
    ) -> bool:
        """Whether the contract wallet at ``wallet`` accepts ``signature`` over ``digest``
        (EIP-1271 ``isValidSignature``), asked by an ``eth_call`` of at most ``gas_cap`` gas:
        a revert, an answer other than the magic value, or running out of gas is "no". With
        several URLs, "yes" needs two URLs' magic value (``chain.quorum``)."""
        ...


class TransactionSender(Protocol):
    """What the relayer needs to send and follow its transactions. The node's refusals come
    through as RpcError (ContractRevert for a revert); an unreachable node is
    ChainUnavailable."""

    async def eip1559(self) -> bool:
        """Whether transactions are EIP-1559 (type 2); False: legacy type 0 with gasPrice."""
        ...

    async def fee_caps(self) -> tuple[int, int]:
        """(maxFeePerGas, maxPriorityFeePerGas) for an EIP-1559 transaction now; on a
        legacy-fee chain both are the gas price."""
        ...

    async def estimate_gas(
        self,
        sender: str,
        to: str,
        data: bytes,
        value: int = 0,
        gas_cap: int | None = None,
        fees: dict[str, int] | None = None,
    ) -> int:
        """Gas of the call from ``sender`` on the latest state; it runs the call, so a revert
        raises ContractRevert with its data. With ``gas_cap`` the call gets at most that much
        gas: one that needs more reverts or fails with an RpcError. With ``fees``
        (``evm.fee_fields``) it runs at the gas price the transaction will pay."""
        ...

    async def native_balance(self, address: str) -> int:
        """The native coin balance of an account (the relayer's, say), in wei."""
        ...

    async def transaction_count(self, address: str, block: BlockRef = "pending") -> int:
        """Transactions sent from ``address`` (mined ones only at ``"latest"``); over several
        URLs the lowest count any reports, set-aside URLs asked too (an over-reported count is
        not believed)."""
        ...

    async def nonce_use(
        self, address: str, nonce: int, hashes: Sequence[str], block: int
    ) -> NonceUse:
        """Whether a transaction of ``hashes`` (one nonce's signed versions) was mined after
        all, or another transaction took ``nonce`` by ``block`` (the account's count at that
        block is past it): asked of every URL (set-aside ones too), each in one batch, so
        one URL that lags, hides or forges receipts cannot declare the nonce taken
        (``chain.quorum``). ChainUnavailable when no URL answers."""
        ...

    async def send_raw_transaction(self, raw: bytes) -> str:
        """Broadcast a signed transaction; returns its hash."""
        ...

    async def receipt(self, tx_hash: str) -> dict[str, Any] | None:
        """The receipt of a mined transaction (quantities as ints), or None; with several
        URLs, only one that counts (``chain.quorum``: a failure only when two URLs report
        it)."""
        ...

    async def is_known_transaction(self, tx_hash: str) -> bool:
        """Whether the node holds the transaction (pending or mined)."""
        ...


class TransferReads(Protocol):
    """Transfers into escrows, for the payments of record (``chain.transfers``)."""

    async def token_transfers(
        self, token: str, escrows: Sequence[str], from_block: int, to_block: int
    ) -> list[Transfer]:
        """ERC-20 ``Transfer`` logs of ``token`` to ``escrows`` in the blocks from
        ``from_block`` to ``to_block`` (both included)."""
        ...

    async def native_transfers(self, escrows: Sequence[str], block: int) -> list[Transfer]:
        """Native coin sent to ``escrows`` in ``block``: by transactions, and by contracts
        during them where the node offers traces."""
        ...

    async def block_hash(self, block: int) -> str | None:
        """The hash of the block at height ``block`` now (None: the node has none there)."""
        ...

    async def transaction(self, tx_hash: str) -> dict[str, Any] | None:
        """``eth_getTransactionByHash`` as the node answers it (None: unknown to it)."""
        ...


class ChainGateway(EscrowReads, ContractState, TransactionSender, TransferReads, Protocol):
    """Every role of one chain, as the registry hands it out (``EvmGateway``; the fake is
    ``chain.fake.FakeChain``)."""

    async def aclose(self) -> None:
        """Close the connections to the node (the registry closes every gateway)."""
        ...
