"""Fee checks on FakeChain: deadline normalization, signature recovery, check order."""

from __future__ import annotations

from collections.abc import Awaitable

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from invoicing.chain.chains import ChainRegistry
from invoicing.chain.eip712 import set_fee_typed_data
from invoicing.chain.fake import FAKE_FACTORY, FakeChain
from invoicing.clock import FakeClock
from invoicing.db import Database
from invoicing.errors import (
    DeadlineExpired,
    FeeTooHigh,
    InvalidOwnerSignature,
    NonceMismatch,
)
from invoicing.fees.service import MetaRequest, OwnerSetting, submit_meta
from invoicing.services import Services
from invoicing.settings import Settings
from invoicing.settlement.relayer import RelayerUnavailable
from invoicing.settlement.signed_relay import (
    check_signature,
    normalize_deadline,
    parse_signature,
    recover_signer,
)

OWNER = Account.create()
NOW_MS = 1_760_000_000_000
DEADLINE = NOW_MS // 1000 + 600
SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def sign(fee_bps: int, nonce: int, deadline: int, account: object = OWNER) -> bytes:
    typed = set_fee_typed_data(31337, FAKE_FACTORY, OWNER.address, fee_bps, nonce, deadline)
    return bytes(Account.sign_message(encode_typed_data(full_message=typed), account.key).signature)  # type: ignore[attr-defined]


def request(
    fee_bps: int = 100, nonce: int = 0, deadline: int = DEADLINE, signature: bytes | None = None
) -> MetaRequest:
    sig = signature if signature is not None else sign(fee_bps, nonce, deadline)
    return MetaRequest(OWNER.address, 31337, nonce, deadline, "0x" + sig.hex(), fee_bps=fee_bps)


@pytest.fixture
def chain() -> FakeChain:
    return FakeChain()


@pytest.fixture
def services(chain: FakeChain) -> Services:
    settings = Settings(environment="development", database_url="sqlite:///:memory:")
    return Services(
        settings=settings,
        db=Database("sqlite:///:memory:"),
        chains=ChainRegistry({31337: chain}),
        clock=FakeClock(NOW_MS),
    )


def test_deadlines_over_10_to_the_12_are_milliseconds() -> None:
    assert normalize_deadline(1_760_000_600) == 1_760_000_600
    assert normalize_deadline(1_760_000_600_123) == 1_760_000_600
    assert normalize_deadline(10**12) == 10**12
    assert normalize_deadline(10**12 + 1) == 10**9


def test_recover_signer_accepts_low_s_and_rejects_high_s_and_bad_v() -> None:
    typed = set_fee_typed_data(31337, FAKE_FACTORY, OWNER.address, 1, 0, DEADLINE)
    signature = sign(1, 0, DEADLINE)
    s = int.from_bytes(signature[32:64], "big")
    flipped = signature[:32] + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - signature[64]])
    zero_v = signature[:64] + bytes([signature[64] - 27])

    assert recover_signer(typed, signature) == OWNER.address
    assert recover_signer(typed, flipped) is None
    assert recover_signer(typed, zero_v) is None
    assert recover_signer(typed, signature[:64]) is None
    assert recover_signer(typed, b"\x00" * 65) is None


@pytest.mark.parametrize(
    ("meta", "error"),
    [
        # fee first, even when everything else is wrong too
        (request(fee_bps=501, nonce=7, deadline=1, signature=b"\x01"), FeeTooHigh),
        (request(deadline=NOW_MS // 1000, signature=b"\x01"), DeadlineExpired),
        (request(signature=sign(100, 0, DEADLINE, Account.create())), InvalidOwnerSignature),
        (request(nonce=1), NonceMismatch),
    ],
)
async def test_checks_run_in_order_and_stop_before_the_chain(
    services: Services, chain: FakeChain, meta: MetaRequest, error: type[Exception]
) -> None:
    with pytest.raises(error) as raised:
        await submit_meta(services, meta)
    if isinstance(raised.value, NonceMismatch):
        assert raised.value.details == {"expected": "0"}
    assert (chain.simulated, chain.sent) == ([], [])


def contract_wallet_request(nonce: int = 0) -> MetaRequest:
    """A SetFee signed by an EIP-1271 wallet: a signature no EOA recovers to (not 65 bytes)."""
    return request(nonce=nonce, signature=b"\x01" * 100)


async def test_a_contract_owner_passes_the_signature_check_for_the_factory_to_verify(
    chain: FakeChain,
) -> None:
    def check(meta: MetaRequest) -> Awaitable[None]:
        purpose = OwnerSetting(meta.signed, FAKE_FACTORY, meta)
        return check_signature(chain, purpose, DEADLINE, parse_signature(meta.signature))

    meta = contract_wallet_request()
    with pytest.raises(InvalidOwnerSignature):
        await check(meta)

    chain.contracts.add(OWNER.address.lower())

    await check(meta)  # the simulation asks the wallet itself
    with pytest.raises(InvalidOwnerSignature):  # 65 bytes: an ECDSA signature, and wrong
        await check(request(signature=b"\x01" * 65))


async def test_a_contract_owner_still_needs_the_factory_nonce(
    services: Services, chain: FakeChain
) -> None:
    chain.contracts.add(OWNER.address.lower())
    chain.nonces[OWNER.address.lower()] = 3

    with pytest.raises(NonceMismatch) as raised:  # (a stale nonce is looked up in the DB)
        await submit_meta(services, contract_wallet_request(nonce=4))
    # Every check passed; this fake chain has no relayer key, so nothing is simulated or sent.
    with pytest.raises(RelayerUnavailable):
        await submit_meta(services, contract_wallet_request(nonce=3))

    assert raised.value.details == {"expected": "3"}
    assert (chain.simulated, chain.sent) == ([], [])
