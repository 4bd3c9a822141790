"""``invoicing recover`` on the chain: check the factory, read the balances, sweep in batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from eth_account import Account

from invoicing.addresses import ZERO_ADDRESS, normalize_address
from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.answers import ContractRevert, RpcError
from invoicing.chain.artifacts import PAYMENT_FACTORY
from invoicing.chain.calldata import decode_balances_of, encode_balances_of, encode_withdraw
from invoicing.chain.events import decode_withdrawn
from invoicing.chain.evm import EvmClient
from invoicing.chain.reverts import revert_name
from invoicing.errors import ChainUnavailable
from invoicing.recovery.inputs import ExportedEscrow, RecoveryOptions, RecoveryRefused, read_export
from invoicing.settlement.gas import TX_GAS_CAP, gas_limit
from invoicing.settlement.withdrawals import fails_in_execution

Echo = Callable[[str], None]

# Escrows per balancesOf call (the factory answers fewer when its gas runs low; the rest
# are read in the next call).
READ_CHUNK = 500
RECEIPT_TIMEOUT_S = 300.0


@dataclass
class Summary:
    """What the run swept (from the factory's Withdrawn events) and what it could not."""

    swept: set[str] = field(default_factory=set)
    transactions: int = 0
    gas_used: int = 0
    total_raw: dict[str, int] = field(default_factory=dict)
    fee_raw: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


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
                summary.problems.append(
                    f"{escrow.payment_address}: {_asset(token)} balance unreadable"
                )
        if held:
            amounts = [b or 0 for _, b in held]
            sweeps.append(Sweep(token, [e for e, _ in held], amounts))
            echo(f"{_asset(token)}: {len(held)} escrow(s) hold {sum(amounts)} raw")
    return sweeps


def _asset(token: str) -> str:
    return "native" if token == ZERO_ADDRESS else f"token {token}"


@dataclass
class Sender:
    """What sends the batches: the node and its chain, the factory, the owner, the key (its
    address pays the gas; a dry run without a key estimates as the owner) and its nonce."""

    evm: EvmClient
    chain_id: int
    factory: str
    owner: str
    key: str | None
    dry_run: bool
    gas_cap: int
    address: str = ""
    nonce: int = 0

    def __post_init__(self) -> None:
        self.address = str(Account.from_key(self.key).address) if self.key else self.owner


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
        if not fails_in_execution(exc):
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
        "chainId": sender.chain_id,
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


def _failure_reason(exc: RpcError) -> str:
    if isinstance(exc, ContractRevert):
        return revert_name(exc.revert_data) or "reverted"
    return exc.message[:120]


async def recover(options: RecoveryOptions, echo: Echo) -> Summary:
    """Check the export against the factory, read the balances and sweep what is held."""
    elsewhere: dict[str, int] = {}
    with options.export_file.open() as lines:
        escrows = read_export(lines, options.factory, options.owner, elsewhere)
    summary = Summary()
    for factory, count in sorted(elsewhere.items()):
        summary.problems.append(
            f"{count} escrow(s) of the export were made by factory {factory}: "
            f"run again with --factory {factory}"
        )
    evm = EvmClient.connect(options.rpc_url, timeout_s=30.0)
    try:
        await check_chain(evm, options.factory, options.owner, escrows)
        sweeps = await plan_sweeps(evm, options.factory, escrows, summary, echo)
        block = await evm.get_block("latest")
        sender = Sender(
            evm,
            await evm.chain_id(),
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
