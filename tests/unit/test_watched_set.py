"""What a worker holds of its watched escrows (``monitor.watched``), the reads it sends of them
(``PackedAccounts``, ``chain.rpc_body``) and the answers it decodes: each the same as the plain
form it replaces."""

from __future__ import annotations

import json

import pytest
from eth_abi.abi import encode
from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.chain.calldata import UNREADABLE, PackedAccounts
from invoicing.chain.reader_codec import decode_read_v1, encode_read, encode_read_v1
from invoicing.chain.rpc_body import SPLICE_MIN, HexData, decode_answer, encode_request
from invoicing.monitor.watched import AssetSet, ShardSet, address_key

raw_addresses = st.binary(min_size=20, max_size=20)
PARENT = bytes(range(32))


def packed_of(raws: list[bytes]) -> PackedAccounts:
    return PackedAccounts(b"".join(raws))


@given(st.lists(raw_addresses, max_size=40), st.integers(-45, 45), st.integers(-45, 45))
def test_packed_accounts_read_and_slice_like_the_list_of_addresses(
    raws: list[bytes], start: int, stop: int
) -> None:
    listed = ["0x" + raw.hex() for raw in raws]
    held = packed_of(raws)

    assert len(held) == len(listed)
    assert list(held) == listed
    assert list(held[start:stop]) == listed[start:stop]
    assert held.words() == b"".join(bytes(12) + raw for raw in raws)
    assert encode_read([(None, held)]) == encode_read([(None, listed)])
    assert encode_read_v1([(None, held)]) == encode_read_v1([(None, listed)])


@settings(deadline=None)  # large examples; a loaded machine is slow
@given(
    st.integers(0, 2**64),
    st.lists(
        st.one_of(st.just(0), st.just(0), st.just(0), st.integers(1, 2**256 - 1)),
        min_size=200,
        max_size=700,
    ),
)
def test_long_answers_of_mostly_zeros_read_as_the_abi_encoding(
    block: int, values: list[int]
) -> None:
    answer = decode_read_v1(
        encode(["uint256", "bytes32", "uint256[]"], [block, PARENT, values]), len(values)
    )

    assert answer.values == [None if value == UNREADABLE else value for value in values]


@settings(deadline=None)  # large examples; a loaded machine is slow
@given(
    st.dictionaries(raw_addresses, st.integers(-1, 2**40), max_size=60),
    st.lists(
        st.tuples(st.booleans(), raw_addresses, st.integers(-1, 2**40)),
        max_size=120,
    ),
)
def test_an_asset_set_holds_what_a_dict_would_through_puts_and_drops(
    loaded: dict[bytes, int], moves: list[tuple[bool, bytes, int]]
) -> None:
    """Chunks of 4 (split at 8): every insert, update and removal crosses chunk bounds."""
    held = AssetSet.of(None, ["0x" + a.hex() for a in loaded], list(loaded.values()), chunk=4)
    model = dict(loaded)
    for put, word, expiry in moves:
        if put:
            held.put(word, expiry)
            model[word] = expiry
        else:
            assert held.drop(word) == (word in model)
            model.pop(word, None)

    pairs = [
        (bytes(chunk.packed[20 * i : 20 * i + 20]), chunk.expires[i])
        for chunk in held.chunks
        for i in range(len(chunk))
    ]
    assert pairs == sorted(model.items())  # sorted by address, each once
    assert all(0 < len(chunk) < 8 for chunk in held.chunks)
    assert len(held) == len(model)
    assert all(held.expiry(word) == expiry for word, expiry in model.items())


def test_a_shard_set_hands_its_escrows_over_packed() -> None:
    shard = ShardSet()
    shard.put(None, "0x" + "AB" * 20, 7)
    shard.put("0x" + "7e" * 20, "0x" + "01" * 20, -1)
    shard.put(None, "0x" + "ab" * 20, 9)  # the same escrow: its expiry replaced

    pieces = [(token, list(accounts), list(expires)) for token, accounts, expires in shard.pieces()]

    assert pieces == [
        (None, ["0x" + "ab" * 20], [9]),
        ("0x" + "7e" * 20, ["0x" + "01" * 20], [-1]),
    ]
    shard.drop(None, "0x" + "ab" * 20)
    assert len(shard) == 1 and address_key("0x" + "01" * 20) in shard.assets["0x" + "7e" * 20]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@given(json_values, st.lists(st.binary(min_size=0, max_size=3000), max_size=3))
def test_a_request_with_spliced_calldata_is_the_json_dumps_would_write(
    other: object, calldata: list[bytes]
) -> None:
    datas = [HexData("0x" + data.hex()) for data in calldata]
    body = {"jsonrpc": "2.0", "id": 7, "params": [{"data": d} for d in datas], "x": other}

    written = encode_request(body)

    assert written == json.dumps(body, separators=(",", ":")).encode()
    assert json.loads(written) == body


def test_a_string_that_looks_like_the_splice_mark_is_written_as_it_is() -> None:
    data = HexData("0x" + "ab" * SPLICE_MIN)
    body = {"params": [{"data": data}, "\x00calldata\x00"]}

    assert encode_request(body) == json.dumps(body, separators=(",", ":")).encode()


@settings(deadline=None)  # large examples; a loaded machine is slow
@given(st.lists(st.binary(min_size=SPLICE_MIN // 2, max_size=SPLICE_MIN), min_size=1, max_size=3))
def test_long_calldata_is_spliced_into_the_json_dumps_would_write(calldata: list[bytes]) -> None:
    body = {
        "id": 1,
        "params": [{"to": "0x" + "11" * 20, "data": HexData("0x" + d.hex())} for d in calldata],
    }

    assert encode_request(body) == json.dumps(body, separators=(",", ":")).encode()


answer_pieces = st.text(alphabet=st.sampled_from('0x1aF"\\\n\x7f\u00e9 }{:,'), max_size=12)


@given(st.integers(0, 10**20), answer_pieces, answer_pieces)
def test_an_answer_reads_as_json_loads_reads_it(id_: int, result: str, tail: str) -> None:
    """Written as a node would (compact), or cut by hand anywhere: the same value as
    ``json.loads``, or the same refusal."""
    written = json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}, separators=(",", ":"))
    raw = f'{{"jsonrpc":"2.0","id":{id_},"result":"{result}"}}{tail}'
    for content in (written.encode(), raw.encode(), written.encode()[:-1] + tail.encode()):
        try:
            expected = json.loads(content)
        except ValueError:
            with pytest.raises(ValueError):
                decode_answer(content)
            continue
        assert decode_answer(content) == expected


def test_a_long_hex_answer_reads_as_json_loads_reads_it() -> None:
    content = b'{"jsonrpc":"2.0","id":12,"result":"0x' + b"00ab" * 100_000 + b'"}'

    assert decode_answer(content) == json.loads(content)
