"""Typed EVM calls on top of :class:`JsonRpc`: reads, eth_call and signed sends (EIP-1559
type 2, or type 0 with ``gasPrice`` on a chain without EIP-1559)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from eth_account import Account

from invoicing.chain.answers import RpcError
from invoicing.chain.rpc import JsonRpc, RpcPolicy
from invoicing.chain.rpc_body import HexData
from invoicing.errors import ChainUnavailable

BlockRef = int | str


def _block(block: BlockRef) -> str:
    return hex(block) if isinstance(block, int) else block


def _int(value: Any) -> int:
    return int(value, 16) if isinstance(value, str) else int(value)


def normalize_receipt(raw: dict[str, Any]) -> dict[str, Any]:
    """Receipt with hex quantities turned into ints (status, gasUsed, blockNumber…)."""
    receipt = dict(raw)
    for key in ("status", "gasUsed", "blockNumber", "effectiveGasPrice", "cumulativeGasUsed"):
        if receipt.get(key) is not None:
            receipt[key] = _int(receipt[key])
    return receipt


def fee_fields(eip1559: bool, max_fee: int, tip: int) -> dict[str, int]:
    """The type and fee fields of a transaction: EIP-1559 caps, or a legacy (type 0)
    ``gasPrice`` of ``max_fee`` on a chain without EIP-1559 (eth_account signs a dict with
    no ``type`` as type 0, with the EIP-155 chain id)."""
    if not eip1559:
        return {"gasPrice": max_fee}
    return {"type": 2, "maxFeePerGas": max_fee, "maxPriorityFeePerGas": min(tip, max_fee)}


class EvmClient:
    """The service's view of one chain's JSON-RPC endpoint."""

    def __init__(self, rpc: JsonRpc, eip1559: bool | None = None) -> None:
        self.rpc = rpc
        self._eip1559 = eip1559  # None: not known yet (read from the latest block once)

    @classmethod
    def connect(
        cls,
        urls: str | Sequence[str],
        *,
        timeout_s: float | None = None,
        policy: RpcPolicy | None = None,
        eip1559: bool | None = None,
        chain_id: int | None = None,
        confirmations: int = 1,
    ) -> EvmClient:
        """A client of one chain over its URLs (failover in that order, see ``chain.rpc``);
        with ``chain_id`` its requests are counted in the service's metrics; a URL's lead is
        bounded by the chain's ``confirmations`` (``chain.heads``)."""
        rpc = JsonRpc(
            urls, timeout_s=timeout_s, policy=policy, chain_id=chain_id, confirmations=confirmations
        )
        return cls(rpc, eip1559)

    async def aclose(self) -> None:
        await self.rpc.aclose()

    async def call_rpc(self, method: str, params: list[Any] | None = None) -> Any:
        """Passthrough for node-specific methods (anvil_mine, evm_snapshot…)."""
        return await self.rpc.call(method, params or [])

    async def chain_id(self) -> int:
        return _int(await self.rpc.call("eth_chainId"))

    async def block_number(self) -> int:
        """The head: the highest any URL reports (see ``JsonRpc.head``)."""
        return await self.rpc.head()

    async def get_block(self, block: BlockRef = "latest") -> dict[str, Any]:
        result = await self.rpc.call("eth_getBlockByNumber", [_block(block), False])
        if not isinstance(result, dict):
            raise ChainUnavailable(f"block {block} not available")
        return result

    async def get_balance(self, address: str, block: BlockRef = "latest") -> int:
        return _int(await self.rpc.call("eth_getBalance", [address, _block(block)]))

    async def get_code(self, address: str, block: BlockRef = "latest") -> bytes:
        code = await self.rpc.call("eth_getCode", [address, _block(block)])
        return bytes.fromhex(str(code)[2:])

    async def get_transaction_count(self, address: str, block: BlockRef = "pending") -> int:
        return _int(await self.rpc.call("eth_getTransactionCount", [address, _block(block)]))

    async def eth_call(
        self,
        to: str,
        data: bytes,
        block: BlockRef = "latest",
        from_: str | None = None,
        value: int = 0,
        gas: int | None = None,
    ) -> bytes:
        """Run a call (with at most ``gas`` when given); raises ContractRevert with the revert
        data when it reverts."""
        return bytes.fromhex(await self.eth_call_text(to, data, block, from_, value, gas))

    async def eth_call_text(
        self,
        to: str,
        data: bytes | HexData,
        block: BlockRef = "latest",
        from_: str | None = None,
        value: int = 0,
        gas: int | None = None,
    ) -> str:
        """``eth_call``'s answer as the node sent it: its hex text without ``0x`` (a long
        answer decoded where needed, ``calldata.decode_balance_text``). ``data`` may be hex
        text already (``0x...``)."""
        hex_data = data if isinstance(data, HexData) else HexData("0x" + data.hex())
        tx: dict[str, Any] = {"to": to, "data": hex_data}
        if from_ is not None:
            tx["from"] = from_
        if value:
            tx["value"] = hex(value)
        if gas is not None:
            tx["gas"] = hex(gas)
        result = str(await self.rpc.call("eth_call", [tx, _block(block)]))
        return result[2:] if result.startswith("0x") else result

    async def estimate_gas(
        self,
        from_: str,
        to: str | None,
        data: bytes,
        value: int = 0,
        gas: int | None = None,
        fees: dict[str, int] | None = None,
    ) -> int:
        """Gas the call needs; with ``gas`` the node runs it with at most that much, so a call
        that needs more fails (revert or "gas required exceeds allowance") instead. With
        ``fees`` (``fee_fields``) it runs at the gas price the transaction will pay, so a
        contract that reads ``tx.gasprice`` sees what it will see when sent."""
        tx: dict[str, Any] = {"from": from_, "data": "0x" + data.hex(), "value": hex(value)}
        if to is not None:
            tx["to"] = to
        if gas is not None:
            tx["gas"] = hex(gas)
        for field, amount in (fees or {}).items():
            tx[field] = hex(amount)
        return _int(await self.rpc.call("eth_estimateGas", [tx]))

    async def eip1559(self) -> bool:
        """Whether the chain takes EIP-1559 (type-2) transactions: as configured, else
        whether its latest block has a ``baseFeePerGas`` (read once)."""
        if self._eip1559 is None:
            block = await self.get_block("latest")
            self._eip1559 = block.get("baseFeePerGas") is not None
        return self._eip1559

    async def fee_caps(self) -> tuple[int, int]:
        """(maxFeePerGas, maxPriorityFeePerGas) for a transaction now. On a legacy-fee chain
        both are the node's ``eth_gasPrice`` (the price a type-0 transaction offers)."""
        if not await self.eip1559():
            price = _int(await self.rpc.call("eth_gasPrice"))
            return price, price
        block, tip = await self.rpc.batch(
            [("eth_getBlockByNumber", ["latest", False]), ("eth_maxPriorityFeePerGas", [])],
            return_errors=True,
        )
        if not isinstance(block, dict):
            raise ChainUnavailable("latest block not available")
        base_fee = _int(block.get("baseFeePerGas") or "0x0")
        # Nodes without eth_maxPriorityFeePerGas get a fixed 1 gwei tip.
        tip_wei = 10**9 if isinstance(tip, RpcError) or tip is None else _int(tip)
        return 2 * base_fee + tip_wei, tip_wei

    async def send_raw_transaction(self, raw: bytes) -> str:
        return str(await self.rpc.call("eth_sendRawTransaction", ["0x" + raw.hex()]))

    async def get_receipt(self, tx_hash: str) -> dict[str, Any] | None:
        raw = await self.rpc.call("eth_getTransactionReceipt", [tx_hash])
        return normalize_receipt(raw) if isinstance(raw, dict) else None

    async def wait_for_receipt(
        self, tx_hash: str, timeout_s: float = 30.0, poll_s: float = 0.05
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            receipt = await self.get_receipt(tx_hash)
            if receipt is not None:
                return receipt
            if time.monotonic() > deadline:
                raise ChainUnavailable(f"no receipt for {tx_hash} within {timeout_s} s")
            await asyncio.sleep(poll_s)

    def sign_transaction(self, private_key: str, tx: dict[str, Any]) -> tuple[str, bytes]:
        """Sign a transaction dict (type 2 or type 0); returns (hash, raw bytes)."""
        signed = Account.sign_transaction(tx, private_key)
        return "0x" + bytes(signed.hash).hex(), bytes(signed.raw_transaction)

    async def transact(
        self,
        private_key: str,
        to: str | None,
        data: bytes = b"",
        value: int = 0,
        gas: int | None = None,
        wait: bool = True,
    ) -> dict[str, Any]:
        """Sign, send and (by default) wait for a transaction; returns its receipt.

        For scripts, tests and dev deployment; the relayer tracks its own transactions.
        """
        sender = Account.from_key(private_key).address
        chain_id = await self.chain_id()
        nonce = await self.get_transaction_count(sender)
        if gas is None:
            gas = int(await self.estimate_gas(sender, to, data, value) * 1.2) + 10_000
        max_fee, tip = await self.fee_caps()
        tx = fee_fields(await self.eip1559(), max_fee, tip) | {
            "chainId": chain_id,
            "nonce": nonce,
            "value": value,
            "data": data,
            "gas": gas,
        }
        if to is not None:
            tx["to"] = to
        tx_hash, raw = self.sign_transaction(private_key, tx)
        await self.send_raw_transaction(raw)
        if not wait:
            return {"transactionHash": tx_hash}
        return await self.wait_for_receipt(tx_hash)
