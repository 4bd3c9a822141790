"""Comparing deployed code with the shipped artifact, immutables aside; the metrics token."""

from __future__ import annotations

from invoicing.chain.artifacts import ESCROW, PAYMENT_FACTORY, load_artifact
from invoicing.chain.versions import same_runtime_code
from invoicing.web.health import bearer_matches


def test_the_shipped_factory_lists_its_immutables() -> None:
    # EIP712 keeps its cached chain id, domain separator, own address, name and version
    # hashes and short strings as immutables: without these ranges no deployment matches.
    factory = load_artifact(PAYMENT_FACTORY)

    assert factory.immutable_references
    assert all(length == 32 for _start, length in factory.immutable_references)


def test_code_matches_whatever_the_constructor_filled_in() -> None:
    factory = load_artifact(PAYMENT_FACTORY)
    code = bytearray(factory.deployed_bytecode)
    for start, length in factory.immutable_references:
        code[start : start + length] = b"\x5a" * length

    assert same_runtime_code(bytes(code), factory)


def test_code_that_differs_outside_the_immutables_does_not_match() -> None:
    factory = load_artifact(PAYMENT_FACTORY)
    filled = {
        i for start, length in factory.immutable_references for i in range(start, start + length)
    }
    position = next(i for i in range(len(factory.deployed_bytecode) // 2, 10**6) if i not in filled)
    code = bytearray(factory.deployed_bytecode)
    code[position] ^= 0x01

    assert not same_runtime_code(bytes(code), factory)
    assert not same_runtime_code(factory.deployed_bytecode + b"\x00", factory)
    assert not same_runtime_code(load_artifact(ESCROW).deployed_bytecode, factory)


def test_metrics_token_must_be_presented_as_a_bearer_token() -> None:
    assert bearer_matches("Bearer tok-123", "tok-123")
    assert bearer_matches("bearer tok-123", "tok-123")
    for header in ("", "tok-123", "Bearer tok-12", "Bearer tok-1234", "Basic tok-123", "Bearer"):
        assert not bearer_matches(header, "tok-123")
