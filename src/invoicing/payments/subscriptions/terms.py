"""What a payer signs and the Subscriptions contract checks (contracts/Subscriptions.sol):
the EIP-712 ``Subscription`` and ``Cancel`` messages, the contract's id of a payer's
subscription, each period's escrow salt, and the calls the relayer sends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi.abi import encode

from invoicing.addresses import normalize_address
from invoicing.chain.abi import encode_call
from invoicing.chain.artifacts import SUBSCRIPTIONS
from invoicing.chain.eip712 import DOMAIN_FIELDS
from invoicing.hashing import keccak256

EIP712_NAME = "Subscriptions"
EIP712_VERSION = "1"
SUBSCRIPTION_FIELDS = [
    {"name": "owner", "type": "address"},
    {"name": "token", "type": "address"},
    {"name": "amount", "type": "uint256"},
    {"name": "periodSeconds", "type": "uint256"},
    {"name": "start", "type": "uint256"},
    {"name": "maxPeriods", "type": "uint256"},
    {"name": "salt", "type": "bytes32"},
]
CANCEL_FIELDS = [{"name": "subscription", "type": "bytes32"}]
_DOMAIN_TYPEHASH = keccak256(
    b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
)
_SUBSCRIPTION_TYPEHASH = keccak256(
    b"Subscription(address owner,address token,uint256 amount,uint256 periodSeconds,"
    b"uint256 start,uint256 maxPeriods,bytes32 salt)"
)
_CANCEL_TYPEHASH = keccak256(b"Cancel(bytes32 subscription)")


@dataclass(frozen=True)
class Terms:
    """One ``Subscription`` message, on the contract at ``contract`` of ``chain_id``."""

    chain_id: int
    contract: str
    owner: str
    token: str
    amount_raw: int
    period_seconds: int
    start_s: int
    max_periods: int
    salt: bytes

    def as_tuple(self) -> tuple[Any, ...]:
        """The struct as the contract's functions take it."""
        return (
            self.owner,
            self.token,
            self.amount_raw,
            self.period_seconds,
            self.start_s,
            self.max_periods,
            self.salt,
        )

    def typed_data(self, *, wire: bool = False) -> dict[str, Any]:
        """The EIP-712 document (``eth_signTypedData_v4``); ``wire``: the integers as decimal
        strings, as a wallet takes them without losing precision."""

        def number(value: int) -> int | str:
            return str(value) if wire else value

        return _document(
            "Subscription",
            SUBSCRIPTION_FIELDS,
            self,
            {
                "owner": self.owner,
                "token": self.token,
                "amount": number(self.amount_raw),
                "periodSeconds": number(self.period_seconds),
                "start": number(self.start_s),
                "maxPeriods": number(self.max_periods),
                "salt": "0x" + self.salt.hex(),
            },
        )

    def cancel_typed_data(self, payer: str) -> dict[str, Any]:
        """The ``Cancel`` document the payer or the owner signs to cancel on chain."""
        return _document(
            "Cancel", CANCEL_FIELDS, self, {"subscription": "0x" + self.id_of(payer).hex()}
        )

    def digest(self) -> bytes:
        """The EIP-712 hash the payer signs (``subscriptionHash``)."""
        struct = keccak256(
            encode(
                ["bytes32", "address", "address", "uint256", "uint256", "uint256", "uint256"]
                + ["bytes32"],
                [_SUBSCRIPTION_TYPEHASH, *self.as_tuple()],
            )
        )
        return keccak256(b"\x19\x01" + self._domain_separator() + struct)

    def id_of(self, payer: str) -> bytes:
        """The contract's id of ``payer``'s subscription (``subscriptionId``)."""
        return keccak256(encode(["bytes32", "address"], [self.digest(), payer]))

    def cancel_digest(self, payer: str) -> bytes:
        struct = keccak256(encode(["bytes32", "bytes32"], [_CANCEL_TYPEHASH, self.id_of(payer)]))
        return keccak256(b"\x19\x01" + self._domain_separator() + struct)

    def due_at(self, period: int) -> int:
        """The chain time from which ``period`` may be charged."""
        return self.start_s + period * self.period_seconds

    def _domain_separator(self) -> bytes:
        return keccak256(
            encode(
                ["bytes32", "bytes32", "bytes32", "uint256", "address"],
                [
                    _DOMAIN_TYPEHASH,
                    keccak256(EIP712_NAME.encode()),
                    keccak256(EIP712_VERSION.encode()),
                    self.chain_id,
                    self.contract,
                ],
            )
        )


def period_salt(subscription_id: bytes, period: int) -> bytes:
    """The salt of period ``period``'s invoice escrow (``periodSalt``)."""
    return keccak256(encode(["bytes32", "uint256"], [subscription_id, period]))


def encode_charge(terms: Terms, payer: str, signature: bytes, period: int) -> bytes:
    return encode_call(SUBSCRIPTIONS, "charge", terms.as_tuple(), payer, signature, period)


def encode_cancel_with_signature(terms: Terms, payer: str, signer: str, signature: bytes) -> bytes:
    return encode_call(
        SUBSCRIPTIONS, "cancelWithSignature", terms.as_tuple(), payer, signer, signature
    )


def _document(
    primary: str, fields: list[dict[str, str]], terms: Terms, message: dict[str, Any]
) -> dict[str, Any]:
    return {
        "types": {"EIP712Domain": list(DOMAIN_FIELDS), primary: list(fields)},
        "primaryType": primary,
        "domain": {
            "name": EIP712_NAME,
            "version": EIP712_VERSION,
            "chainId": terms.chain_id,
            "verifyingContract": normalize_address(terms.contract),
        },
        "message": message,
    }
