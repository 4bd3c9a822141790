"""Answers that are not taken on one RPC URL's word when a chain has several.

Every URL is asked, those set aside after failures too (``JsonRpc.batch_each``), and:

- a receipt counts when two URLs report it alike (same block hash and status); a successful
  one that only one URL reports counts once another URL holds its block under the same hash,
  or when no other URL answers at all (a URL whose receipts lag, or that is down, does not
  hold a mined transaction back); a failed one only when two URLs report it, so one URL
  cannot fail a mined refund or sweep (which would have the owner sign it again);
- a nonce is taken by another transaction only when two URLs each report it mined and hold
  no receipt of ours in the same answer;
- a contract wallet accepts a signature (EIP-1271) only when two URLs answer the magic
  value; one that answers anything else makes it "no";
- the transaction count is the lowest any URL reports;
- the chain id is the first that differs from the configured one, if any URL reports one.

A chain with one URL trusts it as it answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from invoicing.chain.answers import ContractRevert, RpcError, quantity
from invoicing.chain.evm import normalize_receipt
from invoicing.chain.rpc import JsonRpc
from invoicing.errors import ChainUnavailable

# bytes4(keccak256("isValidSignature(bytes32,bytes)")): the EIP-1271 selector and magic value.
ERC1271_SELECTOR = bytes.fromhex("1626ba7e")

Answers = list[list[Any] | None]  # JsonRpc.batch_each: each URL's results, None: no answer


async def ask_every_url(rpc: JsonRpc, requests: Sequence[tuple[str, list[Any]]]) -> Answers:
    """``requests`` in one batch to every URL, resting ones too; ChainUnavailable when none
    answers."""
    answers = await rpc.batch_each(requests, resting=True)
    if not any(answer is not None for answer in answers):
        raise ChainUnavailable("no RPC URL answered")
    return answers


def _status(receipt: dict[str, Any]) -> int | None:
    return _quantity(receipt.get("status"))


def _same(receipt: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(receipt.get(k)).lower() for k in ("transactionHash", "blockHash", "status"))


async def agreed_receipt(rpc: JsonRpc, found: Sequence[tuple[int, Any]]) -> dict[str, Any] | None:
    """The receipt that counts among ``found`` ((URL index, answer) pairs), normalized, or
    None (not yet: no receipt, URLs that disagree, or one URL's word alone)."""
    receipts = [(index, r) for index, r in found if isinstance(r, dict)]
    votes = Counter(_same(receipt) for _, receipt in receipts)
    for _, receipt in receipts:
        if votes[_same(receipt)] >= 2:
            return normalize_receipt(receipt)
    successes = {_same(r): (index, r) for index, r in receipts if _status(r) == 1}
    if len(successes) != 1:
        return None  # none, or a failure (it counts only when two URLs report it): wait
    ((giver, receipt),) = successes.values()
    block = ("eth_getBlockByNumber", [receipt["blockNumber"], False])
    others = [a for i, a in enumerate(await rpc.batch_each([block], resting=True)) if i != giver]
    held = [
        answer
        for answer in others
        if answer and isinstance(answer[0], dict)
        if str(answer[0].get("hash")).lower() == str(receipt.get("blockHash")).lower()
    ]
    down = all(answer is None for answer in others)  # no other URL to ask: it carries on
    return normalize_receipt(receipt) if held or down else None


async def receipt_of(rpc: JsonRpc, tx_hash: str) -> dict[str, Any] | None:
    """The receipt of a mined transaction that counts (the module's rule), or None."""
    if len(rpc.urls) == 1:
        raw = await rpc.call("eth_getTransactionReceipt", [tx_hash])
        return normalize_receipt(raw) if isinstance(raw, dict) else None
    answers = await ask_every_url(rpc, [("eth_getTransactionReceipt", [tx_hash])])
    return await agreed_receipt(rpc, [(i, a[0]) for i, a in enumerate(answers) if a])


async def nonce_verdict(
    rpc: JsonRpc, address: str, nonce: int, hashes: Sequence[str], block: int
) -> tuple[dict[str, Any] | None, bool]:
    """(a receipt of ``hashes`` that counts, or None; whether another transaction took
    ``nonce`` by ``block``): each URL asked its count at ``block`` and the receipts in one
    batch (a URL without that block answers no count)."""
    requests = [("eth_getTransactionCount", [address, hex(block)])]
    requests += [("eth_getTransactionReceipt", [tx_hash]) for tx_hash in hashes]
    answers = [(i, a) for i, a in enumerate(await ask_every_url(rpc, requests)) if a]
    found = [(i, receipt) for i, (_, *receipts) in answers for receipt in receipts]
    if len(rpc.urls) > 1:
        receipt = await agreed_receipt(rpc, found)
    else:
        receipt = next((normalize_receipt(r) for _, r in found if isinstance(r, dict)), None)
    if receipt is not None:
        return receipt, False
    taken = 0
    for _, (count, *receipts) in answers:
        mined = _quantity(count)
        absent = all(r is None for r in receipts)  # an error is no answer
        taken += mined is not None and mined > nonce and absent
    return None, taken >= min(2, len(rpc.urls))


async def lowest_count(rpc: JsonRpc, address: str, block: str) -> int:
    """The lowest transaction count any URL reports (an over-reported one is not believed)."""
    answers = await ask_every_url(rpc, [("eth_getTransactionCount", [address, block])])
    counts = [c for answer in answers if answer and (c := _quantity(answer[0])) is not None]
    if not counts:
        raise ChainUnavailable("no RPC URL reported a transaction count")
    return min(counts)


async def signature_accepted(rpc: JsonRpc, call: dict[str, Any]) -> bool | None:
    """Whether two URLs answer the EIP-1271 magic value to ``call`` (an ``eth_call`` of
    ``isValidSignature``): False when a URL answers anything else (a revert, running out of
    its gas cap, another value), None when fewer than two answered."""
    answers = await ask_every_url(rpc, [("eth_call", [call, "latest"])])
    verdicts = [_accepts(answer[0]) for answer in answers if answer]
    if False in verdicts:
        return False
    return True if verdicts.count(True) >= 2 else None


def _accepts(answer: Any) -> bool | None:
    """An ``isValidSignature`` answer: the magic value (True), "no" (False), or no answer."""
    if isinstance(answer, ContractRevert):
        return False
    if isinstance(answer, RpcError):
        return False if "gas" in answer.message.lower() else None
    if not isinstance(answer, str) or not answer.startswith("0x"):
        return None
    try:
        raw = bytes.fromhex(answer[2:])
    except ValueError:
        return None
    return raw[:4] == ERC1271_SELECTOR and len(raw) == 32


async def reported_chain_id(rpc: JsonRpc, configured: int) -> int:
    """The chain id the URLs report: the first that differs from ``configured``, if any."""
    answers = await ask_every_url(rpc, [("eth_chainId", [])])
    ids = [i for answer in answers if answer and (i := _quantity(answer[0])) is not None]
    if not ids:
        raise ChainUnavailable("no RPC URL reported a chain id")
    return next((i for i in ids if i != configured), configured)


def _quantity(value: Any) -> int | None:
    try:
        return quantity(value)
    except ValueError:
        return None
