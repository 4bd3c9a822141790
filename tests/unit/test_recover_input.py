"""What `invoicing recover` accepts before it touches a chain: the export and the key."""

from __future__ import annotations

import json
import os

import pytest
from eth_account import Account

from invoicing.addresses import normalize_address
from invoicing.chain.escrows import escrow_address
from invoicing.recovery.inputs import BadArgument, RecoveryRefused, load_sender_key, read_export

FACTORY = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
OWNER = Account.create().address
TOKEN = "0x" + "7e" * 20


def line(escrow_salt: bytes, **overrides: object) -> str:
    entry: dict[str, object] = {
        "paymentAddress": escrow_address(FACTORY, OWNER, escrow_salt),
        "salt": "0x" + escrow_salt.hex(),
        "tokenAddress": None,
        "invoiceId": "a",
        "status": "paid",
        "chainId": 31337,
    }
    entry.update(overrides)
    return json.dumps(entry)


def test_a_matching_export_is_read_once_per_escrow_with_blank_lines_skipped() -> None:
    first, second = os.urandom(32), os.urandom(32)

    escrows = read_export(
        [
            line(first),
            "",
            line(second, tokenAddress=TOKEN.upper().replace("0X", "0x")),
            line(first),
        ],
        FACTORY,
        OWNER,
    )

    assert [(e.line, e.salt, e.token_address) for e in escrows] == [
        (1, first, None),
        (3, second, normalize_address(TOKEN)),
    ]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ("not json", "line 2: not a JSON object"),
        ("[1]", "line 2: not a JSON object"),
        (line(os.urandom(32), salt="0x12"), "line 2: salt must be 0x followed by 64 hex digits"),
        (line(os.urandom(32), chainId="1"), "line 2: paymentAddress and chainId are required"),
        (line(os.urandom(32), paymentAddress="0x" + "11" * 20), "line 2: paymentAddress 0x1111"),
        (line(os.urandom(32), tokenAddress=5), "line 2: tokenAddress must be an address or null"),
        (line(os.urandom(32), factory=5), "line 2: factory must be an address"),
        (line(os.urandom(32), factory="0x12"), "line 2: must be a 0x-prefixed 20-byte hex"),
        (line(os.urandom(32), factory=FACTORY, salt="0x12"), "line 2: salt must be 0x"),
    ],
)
def test_one_bad_line_refuses_the_whole_file(bad: str, reason: str) -> None:
    with pytest.raises(RecoveryRefused) as refused:
        read_export([line(os.urandom(32)), bad], FACTORY, OWNER)

    assert str(refused.value).startswith(reason)
    assert str(refused.value).endswith("nothing was sent")


def test_lines_another_factory_made_are_left_out_and_counted() -> None:
    previous = "0x" + "9a" * 20
    mine, theirs, unnamed = os.urandom(32), os.urandom(32), os.urandom(32)
    their_escrow = escrow_address(previous, OWNER, theirs)
    elsewhere: dict[str, int] = {}

    escrows = read_export(
        [
            line(mine, factory=FACTORY.lower()),
            line(theirs, factory=previous, paymentAddress=their_escrow),
            line(unnamed),  # an export from before lines named their factory
        ],
        FACTORY,
        OWNER,
        elsewhere,
    )

    assert [e.salt for e in escrows] == [mine, unnamed]
    assert elsewhere == {normalize_address(previous): 1}


def test_an_export_of_two_chains_is_refused() -> None:
    with pytest.raises(RecoveryRefused, match="mixes chains"):
        read_export([line(os.urandom(32)), line(os.urandom(32), chainId=1)], FACTORY, OWNER)


def test_sender_key_from_env_or_file_and_never_shown(tmp_path: os.PathLike[str]) -> None:
    key = Account.create().key.to_0x_hex()
    path = f"{tmp_path}/key"
    with open(path, "w") as handle:
        handle.write(key + "\n")

    assert load_sender_key("env:K", {"K": key}) == key
    assert load_sender_key(f"file:{path}", {}) == key
    for spec, env in ((key, {}), ("env:K", {"K": key[:-2]}), ("env:", {}), ("file:/nope", {})):
        with pytest.raises(BadArgument) as refused:
            load_sender_key(spec, env)
        assert key[2:12] not in str(refused.value)
