"""Start-up checks: each configured chain is the chain the configuration says it is.

``invoicing serve``, ``worker``, ``withdraw`` and ``dev`` run :func:`verify_chains` before
they start and refuse to run on the first difference, with one line naming the chain and
what differs:

- the node's ``eth_chainId`` is not the configured ``chain_id``, on any of the chain's URLs
  (each is asked; a backup URL on another chain refuses the start, and one that does not
  answer is named in a warning);
- the factory address has no code, or its runtime code is not a known PaymentFactory
  version's artifact (``chain.versions``: the current version or a previous one; the byte
  ranges the constructor fills with immutables, listed by the artifact's
  ``immutableReferences``, are left out of the comparison);
- a previous factory (``previous_factories``) has code that is not a known version's (one
  with no code made no escrow: it is passed over);
- a factory's ``predictEscrow`` for a probe (owner, salt) is not the service's own CREATE2
  derivation (``chain.escrows``);
- an allow-listed token's ``decimals()`` is not its configured decimals;
- a token marked with EIP-3009 answers a ``DOMAIN_SEPARATOR()`` other than the one its
  configured EIP-712 name and version give on this chain (``chain.eip3009``);
- a price feed's ``decimals()`` cannot be read, its ``description()`` is not the pair it is
  configured for (``ETH / USD``: the asset's symbol, " / ", the currency, as Chainlink names
  its feeds), or its latest round is not positive, incomplete or older than its heartbeat
  (``chain.feeds.feed_problem``).

``/readyz`` repeats the cheap ones (:func:`cheap_problem`: chain id, factory code present).
No line shows an RPC URL's path, query or user part (they may carry a provider's API key) or a
key: URLs are named by position and redacted host.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from eth_abi.exceptions import DecodingError

from invoicing.chain.abi import decode_result, encode_call
from invoicing.chain.answers import RpcError, quantity
from invoicing.chain.artifacts import ERC20, PAYMENT_FACTORY
from invoicing.chain.config import ChainConfig, TokenConfig
from invoicing.chain.eip3009 import DOMAIN_SEPARATOR_SELECTOR, domain_separator
from invoicing.chain.escrows import escrow_address
from invoicing.chain.evm import EvmClient
from invoicing.chain.feeds import FEED_CHECK_CALLS, feed_problem
from invoicing.chain.gateway import ChainGateway
from invoicing.chain.rpc import RpcPolicy
from invoicing.chain.versions import factory_version
from invoicing.errors import ChainUnavailable
from invoicing.hashing import keccak256

log = logging.getLogger(__name__)

# Any owner and salt do: the factory and the service must agree on every pair.
PROBE_OWNER = "0x00000000000000000000000000000000000000A1"
PROBE_SALT = keccak256(b"invoicing start-up probe")


class ChainCheckFailed(Exception):
    """A configured chain is not what its configuration says; ``str`` is the one line."""

    def __init__(self, config: ChainConfig, what: str) -> None:
        super().__init__(f"chain {config.chain_id} ({config.name}): {what}")


async def verify_chain(config: ChainConfig, evm: EvmClient) -> None:
    """Raise ChainCheckFailed on the first difference between ``config`` and the chain."""
    try:
        await _verify(config, evm)
    except ChainUnavailable:
        raise ChainCheckFailed(config, "the RPC node does not answer") from None
    except RpcError as exc:
        raise ChainCheckFailed(config, f"the RPC node refused a check (error {exc.code})") from None


async def _verify(config: ChainConfig, evm: EvmClient) -> None:
    factories = config.factories
    signing = [t for t in config.tokens if t.eip3009 is not None]
    probe = "0x" + encode_call(PAYMENT_FACTORY, "predictEscrow", PROBE_OWNER, PROBE_SALT).hex()
    # Every read in one JSON-RPC batch: one round trip however many tokens are listed.
    answers = await evm.rpc.batch(
        [
            ("eth_chainId", []),
            *(("eth_getCode", [factory, "latest"]) for factory in factories),
            *(("eth_call", [{"to": f, "data": probe}, "latest"]) for f in factories),
            *(
                ("eth_call", [{"to": t.address, "data": _DECIMALS}, "latest"])
                for t in config.tokens
            ),
            *(
                ("eth_call", [{"to": t.address, "data": _DOMAIN_SEPARATOR}, "latest"])
                for t in signing
            ),
            *(
                ("eth_call", [{"to": feed.address, "data": data}, "latest"])
                for feed in config.feeds
                for data in FEED_CHECK_CALLS
            ),
        ],
        return_errors=True,
    )
    node_chain_id = answers[0]
    codes = answers[1 : 1 + len(factories)]
    predictions = answers[1 + len(factories) : 1 + 2 * len(factories)]
    token_answers = answers[1 + 2 * len(factories) :]
    decimals_raw = token_answers[: len(config.tokens)]
    separators_raw = token_answers[len(config.tokens) : len(config.tokens) + len(signing)]
    feeds_raw = token_answers[len(config.tokens) + len(signing) :]
    for answer in (node_chain_id, *codes):
        if isinstance(answer, RpcError):
            raise answer
    node_chain_id = int(node_chain_id, 16)
    if node_chain_id != config.chain_id:
        raise ChainCheckFailed(
            config, f"the RPC node reports chain id {node_chain_id}, configured {config.chain_id}"
        )
    if len(evm.rpc.urls) > 1:
        await _verify_every_url(config, evm)
    for number, (factory, code, predicted_raw) in enumerate(
        zip(factories, codes, predictions, strict=True)
    ):
        _verify_factory(config, factory, bytes.fromhex(str(code)[2:]), predicted_raw, number)
    for token, raw in zip(config.tokens, decimals_raw, strict=True):
        label = f"token {token.symbol} {token.address}"
        decimals = _decoded(raw, ERC20, "decimals")
        if decimals is None:
            raise ChainCheckFailed(config, f"{label}: decimals() cannot be read")
        if decimals != token.decimals:
            raise ChainCheckFailed(
                config, f"{label}: decimals() is {decimals}, configured {token.decimals}"
            )
    for token, raw in zip(signing, separators_raw, strict=True):
        _check_domain(config, token, raw)
    calls = len(FEED_CHECK_CALLS)
    for index, feed in enumerate(config.feeds):
        answers_of_feed = feeds_raw[calls * index : calls * (index + 1)]
        problem = feed_problem(config, feed, answers_of_feed, int(time.time()))
        if problem is not None:
            raise ChainCheckFailed(config, problem)


def _verify_factory(
    config: ChainConfig, factory: str, code: bytes, predicted_raw: object, number: int
) -> None:
    """The current factory (``number`` 0) or a previous one is a known version that
    derives escrows as the service does; a previous one without code is passed over."""
    which = "factory" if number == 0 else "previous factory"
    if not code:
        if number == 0:
            raise ChainCheckFailed(config, f"no contract at the factory address {factory}")
        return
    if factory_version(code) is None:
        raise ChainCheckFailed(
            config, f"the code at {which} {factory} is not a known PaymentFactory version"
        )
    predicted = _decoded(predicted_raw, PAYMENT_FACTORY, "predictEscrow")
    derived = escrow_address(factory, PROBE_OWNER, PROBE_SALT)
    if predicted != derived:
        raise ChainCheckFailed(
            config,
            f"{which} {factory} predictEscrow gives {predicted}, the service derives {derived}",
        )


def _check_domain(config: ChainConfig, token: TokenConfig, raw: object) -> None:
    """The token's DOMAIN_SEPARATOR() is the one its configured EIP-712 domain gives."""
    assert token.eip3009 is not None
    label = f"token {token.symbol} {token.address}"
    expected = domain_separator(token.eip3009, config.chain_id, token.address)
    found = bytes.fromhex(raw[2:]) if isinstance(raw, str) and len(raw) == 66 else None
    if found != expected:
        raise ChainCheckFailed(
            config,
            f"{label}: DOMAIN_SEPARATOR() is not the one of EIP-712 name "
            f"{token.eip3009.name!r} version {token.eip3009.version!r} (eip3009_name, "
            f"eip3009_version)",
        )


async def _verify_every_url(config: ChainConfig, evm: EvmClient) -> None:
    """Every URL of the chain reports the configured chain id (named by position: a URL may
    carry a provider's key)."""
    answers = await evm.rpc.batch_each([("eth_chainId", [])])
    for number, answer in enumerate(answers, 1):
        try:
            node_chain_id = None if answer is None else quantity(answer[0])
        except ValueError:
            node_chain_id = None
        if node_chain_id is None:
            log.warning(
                "chain %s (%s): %s did not report its chain id at start-up",
                config.chain_id,
                config.name,
                evm.rpc.url_name(number - 1),
            )
        elif node_chain_id != config.chain_id:
            raise ChainCheckFailed(
                config,
                f"{evm.rpc.url_name(number - 1)} reports chain id {node_chain_id}, "
                f"configured {config.chain_id}",
            )


_DECIMALS = "0x" + encode_call(ERC20, "decimals").hex()
_DOMAIN_SEPARATOR = "0x" + DOMAIN_SEPARATOR_SELECTOR.hex()


def _decoded(raw: object, contract: str, name: str) -> object:
    """The decoded answer of a view call, or None when it reverted or answered garbage."""
    if isinstance(raw, RpcError) or not isinstance(raw, str):
        return None
    try:
        return decode_result(contract, name, bytes.fromhex(raw[2:]))
    except (DecodingError, ValueError, OverflowError):
        return None


async def verify_chains(
    configs: Iterable[ChainConfig],
    timeout_s: float | None = None,
    policy: RpcPolicy | None = None,
) -> None:
    """Check every chain over its own short-lived connection (the caller's event loop)."""
    for config in configs:
        evm = EvmClient.connect(config.rpc_urls, timeout_s=timeout_s, policy=policy)
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
