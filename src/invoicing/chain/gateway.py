"""``EvmGateway``: the chain's roles (``chain.roles``: escrow reads, contract state, the
relayer's sends) over JSON-RPC and the deployed PaymentFactory. ``ChainGateway`` and
``NonceUse`` are imported from here by the rest of the package.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eth_abi.abi import encode

from invoicing.addresses import ZERO_ADDRESS, address_bytes, normalize_address
from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.answers import ContractRevert, RpcError
from invoicing.chain.artifacts import ERC20, PAYMENT_FACTORY, SUBSCRIPTIONS
from invoicing.chain.calldata import decode_balances_of, encode_balances_of
from invoicing.chain.config import ChainConfig
from invoicing.chain.eip3009 import encode_authorization_state
from invoicing.chain.escrows import create2_address
from invoicing.chain.evm import BlockRef, EvmClient
from invoicing.chain.feeds import FeedRound, read_feed_round
from invoicing.chain.quorum import (
    ERC1271_SELECTOR,
    lowest_count,
    nonce_verdict,
    receipt_of,
    reported_chain_id,
    signature_accepted,
)
from invoicing.chain.reader import find_reader, read_groups, read_groups_at_head
from invoicing.chain.reader_codec import Group, ReaderVersion
from invoicing.chain.roles import ChainGateway, NonceUse
from invoicing.chain.transfers import Transfer, TransferReader
from invoicing.chain.versions import escrow_factory
from invoicing.errors import ChainUnavailable
from invoicing.hashing import keccak256

__all__ = ["ChainGateway", "EvmGateway", "NonceUse"]

PERMIT_NONCES_SELECTOR = keccak256(b"nonces(address)")[:4]  # EIP-2612


class EvmGateway:
    """ChainGateway over JSON-RPC and the deployed PaymentFactory."""

    def __init__(self, config: ChainConfig, evm: EvmClient, init_code_hash: bytes) -> None:
        self.config = config
        self.evm = evm
        self.factory = normalize_address(config.factory)
        self._factory_bytes = address_bytes(self.factory)
        self._init_code_hash = init_code_hash
        self.highest_block = 0  # the highest head any URL reported to this gateway
        # The EscrowReader version the chain holds (None: none), once asked.
        self._reader: ReaderVersion | None = None
        self._reader_asked = False
        self._transfers = TransferReader(evm)

    async def aclose(self) -> None:
        await self.evm.aclose()

    async def block_number(self) -> int:
        # Never backwards: a lagging URL's lower head is replaced by the highest one seen, so
        # reads are pinned there (a URL without that block answers "header not found": the
        # next URL is tried, or the pass is retried). A stale URL never shows an older balance.
        head = await self.evm.block_number()
        self.highest_block = max(self.highest_block, head)
        return self.highest_block

    async def block_timestamp(self, block: int) -> int:
        timestamp = (await self.evm.get_block(block))["timestamp"]
        return int(timestamp, 16) if isinstance(timestamp, str) else int(timestamp)

    async def chain_id(self) -> int:
        if len(self.evm.rpc.urls) == 1:
            return await self.evm.chain_id()
        return await reported_chain_id(self.evm.rpc, self.config.chain_id)

    async def balances(
        self, token: str | None, addresses: list[str], block: BlockRef = "latest"
    ) -> list[int | None]:
        values: list[int | None] = []
        # The factory answers fewer values than asked for when the call's gas ran low (a
        # token using its whole stipend for every account, or a node with a low eth_call gas
        # cap): the rest is read in further calls at the same block.
        while len(values) < len(addresses):
            data = encode_balances_of(token or ZERO_ADDRESS, addresses[len(values) :])
            try:
                raw = await self.evm.eth_call(self.factory, data, block)
            except RpcError as exc:
                raise ChainUnavailable(
                    f"balance read failed on chain {self.config.chain_id}"
                ) from exc
            part = decode_balances_of(raw)
            if not part or len(values) + len(part) > len(addresses):
                raise ChainUnavailable(
                    f"balancesOf on chain {self.config.chain_id} answered {len(part)} values "
                    f"for {len(addresses) - len(values)} addresses"
                )
            values.extend(part)
        return values

    async def _escrow_reader(self) -> ReaderVersion | None:  # asked of the chain once
        if not self._reader_asked:
            self._reader = await find_reader(self.evm, self.config.chain_id)
            self._reader_asked = True
        return self._reader

    async def read_escrows(self, groups: Sequence[Group], block: int) -> list[list[int | None]]:
        if reader := await self._escrow_reader():
            return await read_groups(self.evm, reader, groups, block, self.config.chain_id)
        return [await self.balances(token, list(accounts), block) for token, accounts in groups]

    async def read_escrows_at_head(
        self, groups: Sequence[Group]
    ) -> tuple[int, list[list[int | None]]]:
        if not (reader := await self._escrow_reader()):
            block = await self.block_number()
            return block, await self.read_escrows(groups, block)
        block, values = await read_groups_at_head(
            self.evm, reader, groups, self.config.chain_id, floor=self.highest_block
        )
        if block > self.evm.rpc.best_head and len(self.evm.rpc.urls) > 1:
            # The answering URL's newest block: read at it only once two URLs report it.
            read_head = await self.block_number()
            if block > read_head:
                block, values = read_head, await self.read_escrows(groups, read_head)
        self.highest_block = max(self.highest_block, block)
        return block, values

    async def token_symbol(self, token: str | None) -> str:
        return configured_symbol(self.config, token)

    def escrow_address(self, owner: str, salt: bytes) -> str:
        return create2_address(self._factory_bytes, self._init_code_hash, owner, salt)

    def factory_of(self, owner: str, salt: bytes, payment_address: str) -> str:
        if not self.config.previous_factories:
            return self.factory
        return escrow_factory(self.config.factories, owner, salt, payment_address)

    async def _factory_view(self, name: str, owner: str, factory: str | None = None) -> object:
        data = encode_call(PAYMENT_FACTORY, name, owner)
        try:
            raw = await self.evm.eth_call(factory or self.factory, data)
        except RpcError as exc:
            raise ChainUnavailable(f"factory read failed on chain {self.config.chain_id}") from exc
        return decode_result(PAYMENT_FACTORY, name, raw)

    async def factory_nonce(self, owner: str, factory: str | None = None) -> int:
        nonce = await self._factory_view("nonces", owner, factory)
        assert isinstance(nonce, int)
        return nonce

    async def fee_settings(self, owner: str, factory: str | None = None) -> tuple[int, str | None]:
        # Both reads in one JSON-RPC batch, at the same block.
        to = factory or self.factory
        calls = [
            {"to": to, "data": "0x" + encode_call(PAYMENT_FACTORY, n, owner).hex()}
            for n in ("feeBpsOf", "payoutOf")
        ]
        try:
            raw_fee, raw_payout = await self.evm.rpc.batch(
                [("eth_call", [call, "latest"]) for call in calls]
            )
        except RpcError as exc:
            raise ChainUnavailable(f"factory read failed on chain {self.config.chain_id}") from exc
        fee = decode_result(PAYMENT_FACTORY, "feeBpsOf", bytes.fromhex(str(raw_fee)[2:]))
        payout = decode_result(PAYMENT_FACTORY, "payoutOf", bytes.fromhex(str(raw_payout)[2:]))
        assert isinstance(fee, int) and isinstance(payout, str)  # payout checksummed
        return fee, None if payout == ZERO_ADDRESS else payout

    async def refund_delegate(self, owner: str, factory: str | None = None) -> str | None:
        # Delegates came with version 3; an older factory has no such view.
        if factory is not None and factory.lower() != self.factory.lower():
            return None
        delegate = await self._factory_view("refundDelegateOf", owner, factory)
        assert isinstance(delegate, str)  # checksummed
        return None if delegate == ZERO_ADDRESS else delegate

    async def feed_round(self, address: str) -> FeedRound:
        block = await self.block_number()
        return await read_feed_round(self.evm, self.config.chain_id, address, block)

    async def has_code(self, address: str) -> bool:
        return bool(await self.evm.get_code(address))

    async def is_valid_signature(
        self, wallet: str, digest: bytes, signature: bytes, gas_cap: int
    ) -> bool:
        chain_id = self.config.chain_id
        data = ERC1271_SELECTOR + encode(["bytes32", "bytes"], [digest, signature])
        if len(self.evm.rpc.urls) > 1:
            call = {"to": wallet, "data": "0x" + data.hex(), "gas": hex(gas_cap)}
            accepted = await signature_accepted(self.evm.rpc, call)
            if accepted is None:
                raise ChainUnavailable(f"signature check unconfirmed on chain {chain_id}")
            return accepted
        try:
            answer = await self.evm.eth_call(wallet, data, gas=gas_cap)
        except ContractRevert:
            return False
        except RpcError as exc:
            if "gas" in exc.message.lower():  # ran out of its cap: not a valid signature
                return False
            raise ChainUnavailable(f"signature check failed on chain {chain_id}") from exc
        return answer[:4] == ERC1271_SELECTOR and len(answer) == 32

    async def authorization_state(self, token: str, authorizer: str, nonce: bytes) -> bool:
        try:
            raw = await self.evm.eth_call(token, encode_authorization_state(authorizer, nonce))
        except RpcError as exc:
            raise ChainUnavailable(f"token read failed on chain {self.config.chain_id}") from exc
        return int.from_bytes(raw[:32] or b"\0", "big") != 0

    async def allowance(self, token: str, holder: str, spender: str) -> int:
        data = encode_call(ERC20, "allowance", holder, spender)
        try:
            raw = await self.evm.eth_call(token, data)
        except RpcError as exc:
            raise ChainUnavailable(f"token read failed on chain {self.config.chain_id}") from exc
        return int.from_bytes(raw[:32] or b"\0", "big")

    async def permit_nonce(self, token: str, owner: str) -> int | None:
        data = PERMIT_NONCES_SELECTOR + encode(["address"], [owner])
        try:
            raw = await self.evm.eth_call(token, data)
        except ContractRevert:
            return None
        except RpcError as exc:
            raise ChainUnavailable(f"token read failed on chain {self.config.chain_id}") from exc
        return int.from_bytes(raw[:32], "big") if len(raw) == 32 else None

    async def subscription_state(
        self, contract: str, subscription: bytes, period: int
    ) -> tuple[bool, bool]:
        calls = [
            encode_call(SUBSCRIPTIONS, "isCharged", subscription, period),
            encode_call(SUBSCRIPTIONS, "cancelled", subscription),
        ]
        try:
            charged, cancelled = [await self.evm.eth_call(contract, data) for data in calls]
        except RpcError as exc:
            raise ChainUnavailable(
                f"subscription read failed on chain {self.config.chain_id}"
            ) from exc
        return any(charged[:32]), any(cancelled[:32])

    async def eip1559(self) -> bool:
        return await self.evm.eip1559()

    async def fee_caps(self) -> tuple[int, int]:
        return await self.evm.fee_caps()

    async def estimate_gas(
        self,
        sender: str,
        to: str,
        data: bytes,
        value: int = 0,
        gas_cap: int | None = None,
        fees: dict[str, int] | None = None,
    ) -> int:
        return await self.evm.estimate_gas(sender, to, data, value, gas_cap, fees)

    async def native_balance(self, address: str) -> int:
        try:
            return await self.evm.get_balance(address)
        except RpcError as exc:
            raise ChainUnavailable(f"balance read failed on chain {self.config.chain_id}") from exc

    async def transaction_count(self, address: str, block: BlockRef = "pending") -> int:
        if len(self.evm.rpc.urls) == 1:
            return await self.evm.get_transaction_count(address, block)
        at = block if isinstance(block, str) else hex(block)
        return await lowest_count(self.evm.rpc, address, at)

    async def nonce_use(
        self, address: str, nonce: int, hashes: Sequence[str], block: int
    ) -> NonceUse:
        receipt, taken = await nonce_verdict(self.evm.rpc, address, nonce, hashes, block)
        return NonceUse(receipt, taken)

    async def send_raw_transaction(self, raw: bytes) -> str:
        return await self.evm.send_raw_transaction(raw)

    async def receipt(self, tx_hash: str) -> dict[str, Any] | None:
        return await receipt_of(self.evm.rpc, tx_hash)

    async def is_known_transaction(self, tx_hash: str) -> bool:
        return await self.evm.call_rpc("eth_getTransactionByHash", [tx_hash]) is not None

    async def token_transfers(
        self, token: str, escrows: Sequence[str], from_block: int, to_block: int
    ) -> list[Transfer]:
        try:
            return await self._transfers.token_transfers(token, escrows, from_block, to_block)
        except RpcError as exc:
            raise ChainUnavailable(
                f"transfer logs unreadable on chain {self.config.chain_id}"
            ) from exc

    async def native_transfers(self, escrows: Sequence[str], block: int) -> list[Transfer]:
        try:
            return await self._transfers.native_transfers(escrows, block)
        except RpcError as exc:
            raise ChainUnavailable(
                f"block {block} unreadable on chain {self.config.chain_id}"
            ) from exc

    async def block_hash(self, block: int) -> str | None:
        try:
            return await self._transfers.block_hash(block)
        except RpcError as exc:
            raise ChainUnavailable(
                f"block {block} unreadable on chain {self.config.chain_id}"
            ) from exc

    async def transaction(self, tx_hash: str) -> dict[str, Any] | None:
        try:
            found = await self.evm.call_rpc("eth_getTransactionByHash", [tx_hash])
        except RpcError as exc:
            raise ChainUnavailable(
                f"transaction unreadable on chain {self.config.chain_id}"
            ) from exc
        return found if isinstance(found, dict) else None


def configured_symbol(config: ChainConfig, token: str | None) -> str:
    """The symbol the configuration gives (``TOKEN`` for a token no longer on the list)."""
    if token is None:
        return config.native_symbol
    listed = config.token(token)
    return "TOKEN" if listed is None else listed.symbol
