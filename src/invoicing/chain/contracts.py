"""The on-chain contracts as the service sees them: artifacts, escrow addresses, calldata.

Artifacts (ABI + bytecode) are compiled by ``scripts/compile.mjs`` and shipped inside the
package, so nothing here needs a compiler. Everything is pure: encoders build calldata for
:meth:`EvmClient.eth_call`/``transact`` and decoders read the answers.

Escrow addresses follow DESIGN.md section 2::

    create2_salt = keccak256(abi.encode(owner, salt))
    address      = keccak256(0xff ++ factory ++ create2_salt ++ keccak256(escrow_init_code))[12:]
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from Crypto.Hash import keccak as keccak_hash
from eth_abi.abi import decode, encode
from eth_abi.exceptions import DecodingError
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

PAYMENT_FACTORY = "PaymentFactory"
ESCROW = "Escrow"
TEST_TOKEN = "TestToken"

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
MAX_FEE_BPS = 500
BPS_DENOMINATOR = 10_000
EIP712_NAME = "PaymentFactory"
EIP712_VERSION = "1"


# --- artifacts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Artifact:
    """One compiled contract: its ABI, creation code and runtime code."""

    name: str
    abi: list[dict[str, Any]]
    bytecode: bytes
    deployed_bytecode: bytes


@functools.cache
def load_artifact(name: str) -> Artifact:
    """Read ``artifacts/<name>.json`` from the installed package."""
    text = resources.files("invoicing.chain").joinpath("artifacts", f"{name}.json").read_text()
    raw = json.loads(text)
    return Artifact(
        name=raw["contractName"],
        abi=raw["abi"],
        bytecode=bytes.fromhex(raw["bytecode"][2:]),
        deployed_bytecode=bytes.fromhex(raw["deployedBytecode"][2:]),
    )


def factory_abi() -> list[dict[str, Any]]:
    return load_artifact(PAYMENT_FACTORY).abi


def factory_bytecode() -> bytes:
    """Creation code of PaymentFactory (no constructor arguments)."""
    return load_artifact(PAYMENT_FACTORY).bytecode


def test_token_bytecode() -> bytes:
    """Creation code of the demo TestToken ("Test USD", TUSD, 6 decimals)."""
    return load_artifact(TEST_TOKEN).bytecode


# --- escrow addresses --------------------------------------------------------------------


def _address_bytes(address: str) -> bytes:
    raw = bytes.fromhex(address[2:] if address.startswith(("0x", "0X")) else address)
    if len(raw) != 20:
        raise ValueError(f"not a 20-byte address: {address!r}")
    return raw


def _salt_bytes(salt: bytes) -> bytes:
    if len(salt) != 32:
        raise ValueError(f"escrow salt must be 32 bytes, got {len(salt)}")
    return salt


@functools.cache
def escrow_init_code_hash() -> bytes:
    """keccak256 of the one fixed Escrow init code (the same for every owner and token)."""
    return keccak(load_artifact(ESCROW).bytecode)


def escrow_create2_salt(owner: str, salt: bytes) -> bytes:
    """The CREATE2 salt the factory uses: keccak256(abi.encode(owner, salt)).

    abi.encode of (address, bytes32) is the address left-padded to 32 bytes, then the salt;
    written out by hand because this runs on every invoice create."""
    return keccak256(bytes(12) + _address_bytes(owner) + _salt_bytes(salt))


def escrow_address(factory: str, owner: str, salt: bytes) -> str:
    """Checksummed escrow address of (owner, salt); equals the factory's predictEscrow."""
    return create2_address(_address_bytes(factory), escrow_init_code_hash(), owner, salt)


def create2_address(factory: bytes, init_code_hash: bytes, owner: str, salt: bytes) -> str:
    """The escrow address from the factory's raw address and the init code hash."""
    create2_salt = escrow_create2_salt(owner, salt)
    digest = keccak256(b"\xff" + factory + create2_salt + init_code_hash)
    return checksum_encode(digest[12:])


def checksum_encode(address: bytes) -> str:
    """EIP-55 checksum of a 20-byte address: a hex digit is upper case where the matching
    nibble of keccak256(lowercase hex) is 8 or more."""
    hex_address = address.hex()
    hashed = keccak256(hex_address.encode()).hex()
    return "0x" + "".join(
        char.upper() if nibble >= "8" else char
        for char, nibble in zip(hex_address, hashed[:40], strict=True)
    )


def keccak256(data: bytes) -> bytes:
    """Keccak-256 (not SHA3-256). safe-pysha3's C function when it is installed (about 1 µs
    a call; several run per API request), else pycryptodome's (about 8 µs)."""
    return _keccak256(data)


def _pycryptodome_keccak256(data: bytes) -> bytes:
    return keccak_hash.new(digest_bits=256, data=data).digest()


try:
    from sha3 import keccak_256 as _pysha3_keccak_256
except ImportError:  # pragma: no cover - the wheel exists for the platforms we ship
    _keccak256 = _pycryptodome_keccak256
else:

    def _keccak256(data: bytes) -> bytes:
        return bytes(_pysha3_keccak_256(data).digest())


# --- calldata ----------------------------------------------------------------------------


def selector(signature: str) -> bytes:
    """The 4-byte function (or error) selector of e.g. ``"transfer(address,uint256)"``."""
    return keccak(text=signature)[:4]


def _calldata(name: str, types: Sequence[str], args: Sequence[Any]) -> bytes:
    return selector(f"{name}({','.join(types)})") + encode(list(types), list(args))


def encode_withdraw(owner: str, token: str, salts: Sequence[bytes]) -> bytes:
    """withdraw(owner, token, salts): token = ZERO_ADDRESS sweeps native coin."""
    salt_list = [_salt_bytes(s) for s in salts]
    return _calldata("withdraw", ["address", "address", "bytes32[]"], [owner, token, salt_list])


def encode_set_fee_meta(
    user: str, fee_bps: int, nonce: int, deadline: int, signature: bytes
) -> bytes:
    return _calldata(
        "setFeeMeta",
        ["address", "uint256", "uint256", "uint256", "bytes"],
        [user, fee_bps, nonce, deadline, signature],
    )


def encode_set_payout_meta(
    user: str, payout: str, nonce: int, deadline: int, signature: bytes
) -> bytes:
    return _calldata(
        "setPayoutMeta",
        ["address", "address", "uint256", "uint256", "bytes"],
        [user, payout, nonce, deadline, signature],
    )


def encode_nonces(owner: str) -> bytes:
    return _calldata("nonces", ["address"], [owner])


def encode_fee_bps_of(owner: str) -> bytes:
    return _calldata("feeBpsOf", ["address"], [owner])


def encode_payout_of(owner: str) -> bytes:
    return _calldata("payoutOf", ["address"], [owner])


def encode_predict_escrow(owner: str, salt: bytes) -> bytes:
    return _calldata("predictEscrow", ["address", "bytes32"], [owner, _salt_bytes(salt)])


def encode_balances_of(token: str, accounts: Sequence[str]) -> bytes:
    """balancesOf(token, accounts): token = ZERO_ADDRESS reads native balances.

    Written out by hand (selector, token word, offset 64, length, one word per account): a
    monitor pass encodes every watched escrow, and eth_abi's per-address validation (an EIP-55
    keccak for each checksummed address) cost seconds per 100k. Addresses must still be 20
    bytes of hex; their checksum case is not verified (they are the service's own escrows)."""
    words = [
        _BALANCES_OF_SELECTOR,
        bytes(12) + _address_bytes(token),
        _BALANCES_OF_OFFSET,
        len(accounts).to_bytes(32, "big"),
    ]
    words.extend([bytes(12) + _address_bytes(account) for account in accounts])
    return b"".join(words)


_BALANCES_OF_SELECTOR = selector("balancesOf(address,address[])")
_BALANCES_OF_OFFSET = (64).to_bytes(32, "big")


def encode_domain_separator() -> bytes:
    return selector("DOMAIN_SEPARATOR()")


def encode_decimals() -> bytes:
    return selector("decimals()")


def encode_symbol() -> bytes:
    return selector("symbol()")


def encode_balance_of(account: str) -> bytes:
    return _calldata("balanceOf", ["address"], [account])


def encode_transfer(to: str, amount: int) -> bytes:
    return _calldata("transfer", ["address", "uint256"], [to, amount])


def encode_mint(to: str, amount: int) -> bytes:
    """TestToken.mint(to, amount): open minting on development chains."""
    return _calldata("mint", ["address", "uint256"], [to, amount])


def decode_uint256(data: bytes) -> int:
    """Answer of nonces, feeBpsOf, balanceOf, decimals and other single-integer views."""
    (value,) = decode(["uint256"], data)
    return int(value)


def decode_address(data: bytes) -> str:
    """Answer of payoutOf and predictEscrow, checksummed."""
    (value,) = decode(["address"], data)
    return str(to_checksum_address(value))


def decode_string(data: bytes) -> str:
    """Answer of symbol() and name()."""
    (value,) = decode(["string"], data)
    return str(value)


def decode_balances_of(data: bytes) -> list[int]:
    """Answer of balancesOf: a ``uint256[]`` (read by hand, like the calldata)."""
    if len(data) < 64:
        raise DecodingError(f"balancesOf answer too short: {len(data)} bytes")
    offset = int.from_bytes(data[:32], "big")
    if offset % 32 or offset + 32 > len(data):
        raise DecodingError(f"balancesOf answer has a bad array offset {offset}")
    start = offset + 32
    end = start + 32 * int.from_bytes(data[offset:start], "big")
    if end > len(data):
        raise DecodingError("balancesOf answer is shorter than its array")
    return [int.from_bytes(data[i : i + 32], "big") for i in range(start, end, 32)]


# --- events ------------------------------------------------------------------------------

WITHDRAWN_TOPIC = keccak(text="Withdrawn(address,address,uint256,uint256,uint256)")
FEE_SET_TOPIC = keccak(text="FeeSet(address,uint256,uint256)")
PAYOUT_SET_TOPIC = keccak(text="PayoutSet(address,address,uint256)")


@dataclass(frozen=True)
class Withdrawn:
    """A factory ``Withdrawn`` event: ``total`` swept of ``token``, ``fee`` of it to payout."""

    owner: str
    token: str
    count: int
    total: int
    fee: int


def _hex_bytes(value: str | bytes) -> bytes:
    if isinstance(value, bytes):
        return value
    return bytes.fromhex(value[2:] if value.startswith("0x") else value)


def decode_withdrawn(log: dict[str, Any]) -> Withdrawn | None:
    """The Withdrawn event in a receipt log, or None when the log is something else."""
    topics = [_hex_bytes(t) for t in log.get("topics", [])]
    if len(topics) != 3 or topics[0] != WITHDRAWN_TOPIC:
        return None
    count, total, fee = decode(["uint256", "uint256", "uint256"], _hex_bytes(log["data"]))
    return Withdrawn(
        owner=str(to_checksum_address(topics[1][12:])),
        token=str(to_checksum_address(topics[2][12:])),
        count=int(count),
        total=int(total),
        fee=int(fee),
    )


# --- EIP-712 owner settings --------------------------------------------------------------

_DOMAIN_FIELDS = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]
SET_FEE_FIELDS = [
    {"name": "user", "type": "address"},
    {"name": "feeBps", "type": "uint256"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]
SET_PAYOUT_FIELDS = [
    {"name": "user", "type": "address"},
    {"name": "payout", "type": "address"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]


def _typed_data(
    primary_type: str,
    fields: list[dict[str, str]],
    chain_id: int,
    factory: str,
    message: dict[str, Any],
) -> dict[str, Any]:
    return {
        "types": {"EIP712Domain": list(_DOMAIN_FIELDS), primary_type: list(fields)},
        "primaryType": primary_type,
        "domain": {
            "name": EIP712_NAME,
            "version": EIP712_VERSION,
            "chainId": chain_id,
            "verifyingContract": str(to_checksum_address(factory)),
        },
        "message": message,
    }


def set_fee_typed_data(
    chain_id: int, factory: str, user: str, fee_bps: int, nonce: int, deadline: int
) -> dict[str, Any]:
    """Full EIP-712 typed data of SetFee, for ``encode_typed_data(full_message=...)``."""
    message = {
        "user": str(to_checksum_address(user)),
        "feeBps": fee_bps,
        "nonce": nonce,
        "deadline": deadline,
    }
    return _typed_data("SetFee", SET_FEE_FIELDS, chain_id, factory, message)


def set_payout_typed_data(
    chain_id: int, factory: str, user: str, payout: str, nonce: int, deadline: int
) -> dict[str, Any]:
    """Full EIP-712 typed data of SetPayout, for ``encode_typed_data(full_message=...)``."""
    message = {
        "user": str(to_checksum_address(user)),
        "payout": str(to_checksum_address(payout)),
        "nonce": nonce,
        "deadline": deadline,
    }
    return _typed_data("SetPayout", SET_PAYOUT_FIELDS, chain_id, factory, message)


# --- revert reasons ----------------------------------------------------------------------


@dataclass(frozen=True)
class RevertReason:
    """A decoded revert: the custom error's name (or Error/Panic) and its arguments."""

    name: str
    args: tuple[Any, ...]


@functools.cache
def _known_errors() -> dict[bytes, tuple[str, list[str]]]:
    errors: dict[bytes, tuple[str, list[str]]] = {
        selector("Error(string)"): ("Error", ["string"]),
        selector("Panic(uint256)"): ("Panic", ["uint256"]),
    }
    for name in (PAYMENT_FACTORY, TEST_TOKEN):
        for entry in load_artifact(name).abi:
            if entry["type"] != "error":
                continue
            types = [item["type"] for item in entry["inputs"]]
            errors[selector(f"{entry['name']}({','.join(types)})")] = (entry["name"], types)
    return errors


def decode_revert(data: bytes) -> RevertReason | None:
    """Name and arguments of a factory (or ERC-20) custom error in revert data, if known."""
    known = _known_errors().get(data[:4])
    if known is None:
        return None
    name, types = known
    try:
        args = decode(types, data[4:])
    except DecodingError:  # malformed revert data is simply not recognised
        return None
    return RevertReason(name, tuple(args))


def revert_name(data: bytes) -> str | None:
    """Just the error name, e.g. ``"InvalidAccountNonce"``; None for unknown revert data."""
    reason = decode_revert(data)
    return reason.name if reason else None
