"""Recover an owner's funds without this service: ``invoicing recover``.

Needs nothing but a JSON-RPC URL, the factory address, the owner, the escrow export
(``invoices.export``: one ``{"paymentAddress","salt","tokenAddress",…}`` a line) and a key
that pays the gas. No database, no configuration. Every line must derive its
paymentAddress from (owner, salt) at that factory, or the file is refused and nothing is sent.
Balances are read in batches with the factory's ``balancesOf`` (native coin and every token
the file names), then every escrow holding funds is swept with the permissionless
``withdraw(owner, token, salts)``: native coin first, then each token, in batches estimated
under the per-transaction gas cap (a batch that does not fit or fails is split in halves).
The factory pays the owner (and the owner's payout address its fee share, if one is set).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eth_account import Account

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.calldata import decode_balances_of, encode_balances_of, encode_withdraw
from invoicing.chain.escrows import escrow_address
from invoicing.chain.events import decode_withdrawn
from invoicing.chain.evm import EvmClient
from invoicing.chain.reverts import revert_name
from invoicing.chain.rpc import ContractRevert, RpcError
from invoicing.errors import ChainUnavailable
from invoicing.settlement.relayer import TX_GAS_CAP, gas_limit

Echo = Callable[[str], None]

DEFAULT_BATCH_SIZE = 200
MAX_BATCH_SIZE = 2000
# Escrows per balancesOf call (the factory answers fewer when its gas runs low; the rest
# are read in the next call).
READ_CHUNK = 500
RECEIPT_TIMEOUT_S = 300.0
_SALT = re.compile(r"0x[0-9a-fA-F]{64}")


class BadArgument(ValueError):
    """A command-line argument is missing or malformed."""


class RecoveryRefused(Exception):
    """The export, the factory or the chain is not what the arguments say; nothing was sent."""


@dataclass(frozen=True)
class ExportedEscrow:
    """One line of the export, checked against the factory's derivation."""

    line: int
    payment_address: str
    salt: bytes
    token_address: str | None
    chain_id: int


@dataclass(frozen=True)
class RecoveryOptions:
    rpc_url: str
    factory: str
    owner: str
    export_file: Path
    sender_key: str | None
    dry_run: bool
    batch_size: int


@dataclass
class Summary:
    """What the run swept (from the factory's Withdrawn events) and what it could not."""

    swept: set[str] = field(default_factory=set)
    transactions: int = 0
    gas_used: int = 0
    total_raw: dict[str, int] = field(default_factory=dict)
    fee_raw: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def parse_options(
    *,
    rpc_url: str | None,
    factory: str | None,
    owner: str | None,
    export_file: str | None,
    sender_key: str | None,
    dry_run: bool,
    batch_size: str | None,
    environ: Mapping[str, str],
) -> RecoveryOptions:
    """The command's arguments, checked; the sender key is read from ``env:VAR`` or
    ``file:PATH`` (never echoed). Raises BadArgument with a one-line reason."""
    for name, value in (("--rpc-url", rpc_url), ("--factory", factory), ("--owner", owner)):
        if not value:
            raise BadArgument(f"{name} is required")
    if not export_file:
        raise BadArgument("--from is required (the escrow export file)")
    if not rpc_url or not rpc_url.startswith(("http://", "https://")):
        raise BadArgument("--rpc-url must be an http(s) URL")
    path = Path(export_file)
    if not path.is_file():
        raise BadArgument(f"--from {export_file}: no such file")
    key = None
    if sender_key:
        key = load_sender_key(sender_key, environ)
    elif not dry_run:
        raise BadArgument("--sender-key is required (env:VAR or file:PATH) unless --dry-run")
    return RecoveryOptions(
        rpc_url=rpc_url,
        factory=_address("--factory", factory),
        owner=_address("--owner", owner),
        export_file=path,
        sender_key=key,
        dry_run=dry_run,
        batch_size=_batch_size(batch_size),
    )


def _address(name: str, value: str | None) -> str:
    try:
        return normalize_address(value or "")
    except ValueError as exc:
        raise BadArgument(f"{name} {exc}") from None


def _batch_size(value: str | None) -> int:
    if value is None:
        return DEFAULT_BATCH_SIZE
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_BATCH_SIZE:
        raise BadArgument(f"--batch-size must be a whole number from 1 to {MAX_BATCH_SIZE}")
    return int(value)


def load_sender_key(spec: str, environ: Mapping[str, str]) -> str:
    """The private key named by ``env:VAR`` or ``file:PATH``; messages never show it."""
    kind, _, where = spec.partition(":")
    if kind == "env" and where:
        key = environ.get(where, "").strip()
        if not key:
            raise BadArgument(f"--sender-key: environment variable {where} is not set")
    elif kind == "file" and where:
        try:
            key = Path(where).read_text().strip()
        except OSError as exc:
            raise BadArgument(f"--sender-key: cannot read {where}: {exc.strerror}") from None
    else:
        raise BadArgument("--sender-key must be env:VAR or file:PATH")
    try:
        Account.from_key(key)
    except Exception:  # noqa: BLE001 - eth-account raises several types; none may echo the key
        raise BadArgument(f"--sender-key {spec} is not a valid private key") from None
    return key


def read_export(lines: Iterable[str], factory: str, owner: str) -> list[ExportedEscrow]:
    """The export's escrows (duplicates once). Refuses the whole file when a line is not an
    escrow of ``owner`` at ``factory``: a file that does not match is not trusted."""
    found: dict[str, ExportedEscrow] = {}
    refused: list[str] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            escrow = _exported_escrow(number, text, factory, owner)
        except ValueError as exc:
            refused.append(f"line {number}: {exc}")
            continue
        found.setdefault(escrow.payment_address, escrow)
    if refused:
        more = f" (and {len(refused) - 1} more line(s))" if len(refused) > 1 else ""
        raise RecoveryRefused(f"{refused[0]}{more}; nothing was sent")
    chains = {escrow.chain_id for escrow in found.values()}
    if len(chains) > 1:
        raise RecoveryRefused(f"the export mixes chains {sorted(chains)}; nothing was sent")
    return list(found.values())


def _exported_escrow(number: int, text: str, factory: str, owner: str) -> ExportedEscrow:
    try:
        entry = json.loads(text)
    except ValueError:
        raise ValueError("not a JSON object") from None
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    salt, address, token, chain_id = (
        entry.get(k) for k in ("salt", "paymentAddress", "tokenAddress", "chainId")
    )
    if not isinstance(salt, str) or not _SALT.fullmatch(salt):
        raise ValueError("salt must be 0x followed by 64 hex digits")
    if not isinstance(address, str) or not isinstance(chain_id, int) or isinstance(chain_id, bool):
        raise ValueError("paymentAddress and chainId are required")
    if token is not None and not isinstance(token, str):
        raise ValueError("tokenAddress must be an address or null")
    payment_address = normalize_address(address)
    derived = escrow_address(factory, owner, bytes.fromhex(salt[2:]))
    if derived != payment_address:
        raise ValueError(
            f"paymentAddress {payment_address} is not the escrow of owner {owner} and this "
            f"salt at factory {factory} (that would be {derived}); refusing the file"
        )
    return ExportedEscrow(
        number,
        payment_address,
        bytes.fromhex(salt[2:]),
        normalize_address(token) if token else None,
        chain_id,
    )


async def check_chain(
    evm: EvmClient, factory: str, owner: str, escrows: Sequence[ExportedEscrow]
) -> None:
    """Refuse a node on another chain, or a factory that does not derive these escrows."""
    chain_id = await evm.chain_id()
    if escrows and escrows[0].chain_id != chain_id:
        raise RecoveryRefused(
            f"the export is for chain {escrows[0].chain_id}, the RPC node serves chain {chain_id}"
        )
    if not await evm.get_code(factory):
        raise RecoveryRefused(f"no contract at factory {factory} on chain {chain_id}")
    if escrows:
        first = escrows[0]
        data = encode_call(PAYMENT_FACTORY, "predictEscrow", owner, first.salt)
        predicted = decode_result(
            PAYMENT_FACTORY, "predictEscrow", await evm.eth_call(factory, data)
        )
        if predicted != first.payment_address:
            raise RecoveryRefused(
                f"factory {factory} predicts {predicted} for line {first.line}, not "
                f"{first.payment_address}: another factory (or version) made these escrows"
            )


async def read_balances(
    evm: EvmClient, factory: str, token: str, addresses: Sequence[str], block: int
) -> list[int | None]:
    """Balances of ``token`` (ZERO_ADDRESS = native) at ``block``, None where unreadable."""
    values: list[int | None] = []
    while len(values) < len(addresses):
        chunk = addresses[len(values) : len(values) + READ_CHUNK]
        answer = decode_balances_of(
            await evm.eth_call(factory, encode_balances_of(token, chunk), block)
        )
        if not answer:
            raise RecoveryRefused(f"balancesOf of {token} read no balance (the node's gas cap?)")
        values.extend(answer[: len(chunk)])
    return values


@dataclass(frozen=True)
class Sweep:
    """Escrows holding ``token`` (ZERO_ADDRESS = native) and what they held when read."""

    token: str
    escrows: list[ExportedEscrow]
    amounts: list[int]


async def plan_sweeps(
    evm: EvmClient, factory: str, escrows: Sequence[ExportedEscrow], summary: Summary, echo: Echo
) -> list[Sweep]:
    """One Sweep per asset held, native first; unreadable balances are reported."""
    tokens = [ZERO_ADDRESS, *sorted({e.token_address for e in escrows if e.token_address})]
    addresses = [e.payment_address for e in escrows]
    block = await evm.block_number()
    echo(f"reading {len(escrows)} escrow(s) in {len(tokens)} asset(s) at block {block}")
    sweeps = []
    for token in tokens:
        balances = await read_balances(evm, factory, token, addresses, block)
        held = [(e, b) for e, b in zip(escrows, balances, strict=True) if b]
        for escrow, balance in zip(escrows, balances, strict=True):
            if balance is None:
                summary.problems.append(f"{escrow.payment_address}: {token} balance unreadable")
        if held:
            amounts = [b or 0 for _, b in held]
            sweeps.append(Sweep(token, [e for e, _ in held], amounts))
            echo(f"{_asset(token)}: {len(held)} escrow(s) hold {sum(amounts)} raw")
    return sweeps


def _asset(token: str) -> str:
    return "native" if token == ZERO_ADDRESS else f"token {token}"


@dataclass
class Sender:
    """What sends the batches: the node, the factory, the owner, the key and its nonce."""

    evm: EvmClient
    factory: str
    owner: str
    key: str | None
    dry_run: bool
    gas_cap: int
    nonce: int = 0

    @property
    def address(self) -> str:
        return str(Account.from_key(self.key).address) if self.key else self.owner


async def sweep(sender: Sender, plan: Sweep, batch_size: int, summary: Summary, echo: Echo) -> None:
    """Sweep one asset's escrows in batches of at most ``batch_size``."""
    for start in range(0, len(plan.escrows), batch_size):
        await _sweep_batch(
            sender,
            plan.token,
            plan.escrows[start : start + batch_size],
            plan.amounts[start : start + batch_size],
            summary,
            echo,
        )


async def _sweep_batch(
    sender: Sender,
    token: str,
    escrows: list[ExportedEscrow],
    amounts: list[int],
    summary: Summary,
    echo: Echo,
) -> None:
    """Estimate, then send (or print, on a dry run) one withdraw. A batch that does not fit
    under the gas cap or fails is split in halves; a single escrow that fails is reported."""
    data = encode_withdraw(sender.owner, token, [e.salt for e in escrows])
    try:
        estimate = await sender.evm.estimate_gas(
            sender.address, sender.factory, data, 0, sender.gas_cap
        )
        reason = None if estimate <= sender.gas_cap else f"needs {estimate} gas"
    except RpcError as exc:
        if not _fails_in_execution(exc):
            raise
        reason = _failure_reason(exc)
    if reason is not None:
        if len(escrows) == 1 or reason == "NativeTransferFailed":
            for escrow in escrows:
                summary.problems.append(f"{escrow.payment_address}: {_asset(token)}: {reason}")
            echo(f"{_asset(token)}: {len(escrows)} escrow(s) not swept: {reason}")
            return
        half = len(escrows) // 2
        await _sweep_batch(sender, token, escrows[:half], amounts[:half], summary, echo)
        await _sweep_batch(sender, token, escrows[half:], amounts[half:], summary, echo)
        return
    held = sum(amounts)
    if sender.dry_run:
        echo(
            f"would sweep {_asset(token)} from {len(escrows)} escrow(s): {held} raw, "
            f"~{estimate} gas"
        )
        summary.swept.update(e.payment_address for e in escrows)
        summary.total_raw[token] = summary.total_raw.get(token, 0) + held
        summary.gas_used += estimate
        return
    await _send(sender, token, escrows, data, gas_limit(estimate, sender.gas_cap), summary, echo)


async def _send(
    sender: Sender,
    token: str,
    escrows: list[ExportedEscrow],
    data: bytes,
    gas: int,
    summary: Summary,
    echo: Echo,
) -> None:
    assert sender.key is not None
    max_fee, tip = await sender.evm.fee_caps()
    tx = {
        "type": 2,
        "chainId": await sender.evm.chain_id(),
        "nonce": sender.nonce,
        "to": sender.factory,
        "value": 0,
        "data": data,
        "gas": gas,
        "maxFeePerGas": max_fee,
        "maxPriorityFeePerGas": min(tip, max_fee),
    }
    tx_hash, raw = sender.evm.sign_transaction(sender.key, tx)
    await sender.evm.send_raw_transaction(raw)
    sender.nonce += 1
    receipt = await sender.evm.wait_for_receipt(tx_hash, timeout_s=RECEIPT_TIMEOUT_S, poll_s=0.5)
    summary.transactions += 1
    summary.gas_used += int(receipt["gasUsed"])
    if receipt.get("status") != 1:
        for escrow in escrows:
            summary.problems.append(
                f"{escrow.payment_address}: {_asset(token)}: tx {tx_hash} reverted"
            )
        echo(f"{_asset(token)}: {len(escrows)} escrow(s): tx {tx_hash} reverted")
        return
    moved: dict[str, int] = {}
    for log in receipt.get("logs", []):
        event = decode_withdrawn(log)
        if event is None or normalize_address(log["address"]) != sender.factory:
            continue
        moved[event.token] = moved.get(event.token, 0) + event.total
        summary.total_raw[event.token] = summary.total_raw.get(event.token, 0) + event.total
        summary.fee_raw[event.token] = summary.fee_raw.get(event.token, 0) + event.fee
    summary.swept.update(e.payment_address for e in escrows)
    parts = ", ".join(f"{_asset(t)} {amount} raw" for t, amount in moved.items()) or "nothing"
    echo(f"swept {len(escrows)} escrow(s): {parts}; tx {tx_hash}, gas {receipt['gasUsed']}")


def _fails_in_execution(exc: RpcError) -> bool:
    message = exc.message.lower()
    return isinstance(exc, ContractRevert) or "out of gas" in message or "gas required" in message


def _failure_reason(exc: RpcError) -> str:
    if isinstance(exc, ContractRevert):
        return revert_name(exc.revert_data) or "reverted"
    return exc.message[:120]


async def recover(options: RecoveryOptions, echo: Echo) -> Summary:
    """Check the export against the factory, read the balances and sweep what is held."""
    with options.export_file.open() as lines:
        escrows = read_export(lines, options.factory, options.owner)
    summary = Summary()
    evm = EvmClient.connect(options.rpc_url, timeout_s=30.0)
    try:
        await check_chain(evm, options.factory, options.owner, escrows)
        sweeps = await plan_sweeps(evm, options.factory, escrows, summary, echo)
        block = await evm.get_block("latest")
        sender = Sender(
            evm,
            options.factory,
            options.owner,
            options.sender_key,
            options.dry_run,
            min(TX_GAS_CAP, int(str(block.get("gasLimit", hex(TX_GAS_CAP))), 16)),
        )
        if not options.dry_run:
            sender.nonce = await evm.get_transaction_count(sender.address, "pending")
            echo(f"sending from {sender.address}")
        for plan in sweeps:
            try:
                await sweep(sender, plan, options.batch_size, summary, echo)
            except (RpcError, ChainUnavailable) as exc:
                # Nothing after this is sent: the summary says what was and what was not.
                summary.problems.append(f"stopped at {_asset(plan.token)}: {exc}")
                break
    finally:
        await evm.aclose()
    return summary


def summary_lines(summary: Summary, dry_run: bool) -> list[str]:
    """The final report: escrows swept, amounts per asset (raw units), gas, problems."""
    if dry_run:
        first = f"would sweep {len(summary.swept)} escrow(s); estimated gas {summary.gas_used}"
    else:
        first = (
            f"swept {len(summary.swept)} escrow(s) in {summary.transactions} transaction(s); "
            f"gas used {summary.gas_used}"
        )
    lines = [first]
    for token, total in sorted(summary.total_raw.items()):
        fee = summary.fee_raw.get(token, 0)
        fee_note = f" ({fee} raw of it to the payout address as fee)" if fee else ""
        lines.append(f"  {_asset(token)}: {total} raw{fee_note}")
    lines.extend(f"  not swept: {problem}" for problem in summary.problems)
    return lines
