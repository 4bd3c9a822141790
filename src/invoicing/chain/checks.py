"""Start-up checks: each configured chain is the chain the configuration says it is.

``invoicing serve``, ``worker``, ``withdraw`` and ``dev`` run :func:`verify_chains` before
they start and refuse to run on the first difference, with one line naming the chain and
what differs:

- the node's ``eth_chainId`` is not the configured ``chain_id``;
- the factory address has no code, or its runtime code is not the shipped PaymentFactory
  artifact's (the byte ranges the constructor fills with immutables, listed by the artifact's
  ``immutableReferences``, are left out of the comparison);
- the factory's ``predictEscrow`` for a probe (owner, salt) is not the service's own CREATE2
  derivation (``chain.escrows``);
- an allow-listed token's ``decimals()`` is not its configured decimals.

``/readyz`` repeats the cheap ones (:func:`cheap_problem`: chain id, factory code present).
No line shows an RPC URL (it may carry a provider's API key) or a key.
"""

from __future__ import annotations

from collections.abc import Iterable

from eth_abi.exceptions import DecodingError

from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.artifacts import ERC20, PAYMENT_FACTORY, Artifact, load_artifact
from invoicing.chain.escrows import escrow_address
from invoicing.chain.evm import EvmClient
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.rpc import RpcError
from invoicing.errors import ChainUnavailable
from invoicing.hashing import keccak256
from invoicing.settings import ChainConfig

# Any owner and salt do: the factory and the service must agree on every pair.
PROBE_OWNER = "0x00000000000000000000000000000000000000A1"
PROBE_SALT = keccak256(b"invoicing start-up probe")


class ChainCheckFailed(Exception):
    """A configured chain is not what its configuration says; ``str`` is the one line."""

    def __init__(self, config: ChainConfig, what: str) -> None:
        super().__init__(f"chain {config.chain_id} ({config.name}): {what}")


def same_runtime_code(code: bytes, artifact: Artifact) -> bool:
    """Whether deployed ``code`` is ``artifact``'s runtime code, immutables aside."""
    expected = artifact.deployed_bytecode
    if len(code) != len(expected):
        return False
    deployed, shipped = bytearray(code), bytearray(expected)
    for start, length in artifact.immutable_references:
        deployed[start : start + length] = bytes(length)
        shipped[start : start + length] = bytes(length)
    return deployed == shipped


async def verify_chain(config: ChainConfig, evm: EvmClient) -> None:
    """Raise ChainCheckFailed on the first difference between ``config`` and the chain."""
    try:
        await _verify(config, evm)
    except ChainUnavailable:
        raise ChainCheckFailed(config, "the RPC node does not answer") from None
    except RpcError as exc:
        raise ChainCheckFailed(config, f"the RPC node refused a check (error {exc.code})") from None


async def _verify(config: ChainConfig, evm: EvmClient) -> None:
    node_chain_id = await evm.chain_id()
    if node_chain_id != config.chain_id:
        raise ChainCheckFailed(
            config, f"the RPC node reports chain id {node_chain_id}, configured {config.chain_id}"
        )
    factory = config.factory
    code = await evm.get_code(factory)
    if not code:
        raise ChainCheckFailed(config, f"no contract at the factory address {factory}")
    if not same_runtime_code(code, load_artifact(PAYMENT_FACTORY)):
        raise ChainCheckFailed(
            config, f"the code at factory {factory} is not the shipped PaymentFactory"
        )
    predicted = await _call(evm, factory, PAYMENT_FACTORY, "predictEscrow", PROBE_OWNER, PROBE_SALT)
    derived = escrow_address(factory, PROBE_OWNER, PROBE_SALT)
    if predicted != derived:
        raise ChainCheckFailed(
            config,
            f"factory {factory} predictEscrow gives {predicted}, the service derives {derived}",
        )
    for token in config.tokens:
        label = f"token {token.symbol} {token.address}"
        decimals = await _call(evm, token.address, ERC20, "decimals")
        if decimals is None:
            raise ChainCheckFailed(config, f"{label}: decimals() cannot be read")
        if decimals != token.decimals:
            raise ChainCheckFailed(
                config, f"{label}: decimals() is {decimals}, configured {token.decimals}"
            )


async def _call(evm: EvmClient, to: str, contract: str, name: str, *args: object) -> object:
    """The decoded answer of a view call, or None when it reverts or answers garbage."""
    try:
        raw = await evm.eth_call(to, encode_call(contract, name, *args))
        return decode_result(contract, name, raw)
    except (RpcError, DecodingError, ValueError, OverflowError):
        return None


async def verify_chains(configs: Iterable[ChainConfig], timeout_s: float = 10.0) -> None:
    """Check every chain over its own short-lived connection (the caller's event loop)."""
    for config in configs:
        evm = EvmClient.connect(config.rpc_url, timeout_s=timeout_s)
        try:
            await verify_chain(config, evm)
        finally:
            await evm.aclose()


async def cheap_problem(chain: ChainGateway) -> str | None:
    """What ``/readyz`` reports wrong with a chain (wrong chain id, no factory code), or None.
    An unreachable node raises ChainUnavailable."""
    node_chain_id = await chain.chain_id()
    if node_chain_id != chain.config.chain_id:
        return f"wrong_chain_id (node reports {node_chain_id})"
    if not await chain.has_code(chain.factory):
        return "no_factory_code"
    return None
