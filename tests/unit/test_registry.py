"""The chain and token registry shipped in the package, and chains files merged over it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from invoicing.addresses import address_bytes, checksum_encode
from invoicing.chain.artifacts import factory_bytecode
from invoicing.chain.chains_file import load_chains_file
from invoicing.chain.deploy import deterministic_address, factory_address
from invoicing.registry import registry, registry_text
from invoicing.settings import Settings

FACTORY = "0x" + "fa" * 20
USDC_BASE = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
CHAIN_KEYS = {"chain_id", "name", "native_symbol", "native_decimals", "confirmations", "explorer"}
# The chains docs/operations/chains.md lists, by chain id.
EXPECTED_CHAINS = {1, 8453, 42161, 10, 137, 56, 43114, 11155111, 84532}
# The allow-listed tokens shipped per chain (symbol, decimals), in file order; each one is
# cited in chains.toml. A chain missing here ships no token.
EXPECTED_TOKENS = {
    1: [("USDC", 6), ("USDT", 6), ("DAI", 18)],
    8453: [("USDC", 6)],
    42161: [("USDC", 6)],
    10: [("USDC", 6)],
    137: [("USDC", 6)],
    43114: [("USDC", 6)],
    11155111: [("USDC", 6)],
    84532: [("USDC", 6)],
}


def chains_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "chains.toml"
    path.write_text(text)
    return path


# The shipped registry.


def test_the_registry_has_every_chain_once() -> None:
    raw = tomllib.loads(registry_text())["chain"]
    ids = [entry["chain_id"] for entry in raw]

    assert len(ids) == len(set(ids))
    assert set(ids) == EXPECTED_CHAINS
    assert set(registry()) == EXPECTED_CHAINS


@pytest.mark.parametrize("chain_id", sorted(EXPECTED_CHAINS))
def test_every_entry_has_all_fields(chain_id: int) -> None:
    entry = registry()[chain_id]

    assert CHAIN_KEYS <= set(entry)
    assert entry["name"] and entry["native_symbol"]
    assert entry["native_decimals"] == 18
    assert entry["confirmations"] >= 1
    assert re.fullmatch(r"https://[a-z0-9.-]+[a-z]", entry["explorer"])
    assert entry.get("eip1559") in (None, True, False)
    for token in entry["token"]:
        optional = {"eip3009_name", "eip3009_version", "pegged"}
        assert set(token) - optional == {"address", "symbol", "decimals"}
        assert token["symbol"] in {"USDC", "USDT", "DAI"}
        assert 0 <= token["decimals"] <= 18
        # Only USDC is pegged: Circle's statement of 1:1 redemption is cited in chains.toml.
        assert token.get("pegged") == ("USD" if token["symbol"] == "USDC" else None)


@pytest.mark.parametrize("chain_id", sorted(EXPECTED_CHAINS))
def test_each_chain_ships_exactly_its_expected_tokens(chain_id: int) -> None:
    tokens = registry()[chain_id]["token"]

    assert [(t["symbol"], t["decimals"]) for t in tokens] == EXPECTED_TOKENS.get(chain_id, [])
    assert len({t["address"].lower() for t in tokens}) == len(tokens)


def test_the_ethereum_stablecoins_are_the_issuers_contracts() -> None:
    ethereum = {t["symbol"]: t["address"] for t in registry()[1]["token"]}

    assert ethereum == {
        "USDC": "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
        "USDT": "0xdAC17F958D2ee523a2206206994597C13D831ec7",
        "DAI": "0x6B175474E89094C44Da98b954EedeAC495271d0F",
    }


# USDC's EIP-712 domain (name, version) per chain where the cited sources give it; the
# start-up check compares it with the token's DOMAIN_SEPARATOR() on the chain.
EXPECTED_EIP3009 = {
    8453: ("USD Coin", "2"),
    84532: ("USDC", "2"),
    137: ("USD Coin", "2"),
    42161: ("USD Coin", "2"),
}


def test_eip3009_is_marked_on_the_usdc_whose_domain_is_cited() -> None:
    marked = {
        chain_id: (token["eip3009_name"], token["eip3009_version"])
        for chain_id, entry in registry().items()
        for token in entry["token"]
        if "eip3009_name" in token
    }
    assert marked == EXPECTED_EIP3009
    lines = registry_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("eip3009_name"):
            assert lines[i - 1].startswith("# source: coinbase/x402"), f"line {i + 1}: no source"


def test_a_chains_file_marks_eip3009_with_name_and_version_together(tmp_path: Path) -> None:
    token = 'address = "0x00000000000000000000000000000000000000C1"\nsymbol = "X"\ndecimals = 6\n'
    base = f'[[chain]]\nchain_id = 999\nrpc_urls = ["http://n"]\nfactory = "{FACTORY}"\n'
    both = chains_file(
        tmp_path, base + "[[chain.token]]\n" + token + 'eip3009_name = "X"\neip3009_version = "7"\n'
    )
    (chain,) = load_chains_file(both)
    assert chain.tokens[0].eip3009 is not None
    assert (chain.tokens[0].eip3009.name, chain.tokens[0].eip3009.version) == ("X", "7")
    alone = chains_file(tmp_path, base + "[[chain.token]]\n" + token + 'eip3009_name = "X"\n')
    with pytest.raises(ValueError, match="eip3009_name and eip3009_version go together"):
        load_chains_file(alone)
    (plain,) = load_chains_file(chains_file(tmp_path, base + "[[chain.token]]\n" + token))
    assert plain.tokens[0].eip3009 is None


# The Chainlink feeds shipped per chain (asset, currency, aggregator), each cited in
# chains.toml from Chainlink's own repositories.
EXPECTED_FEEDS = {
    1: [("native", "USD", "0x5f4eC3Df9cbd43714FE2740f5E3616155c5b8419")],
    42161: [("native", "USD", "0x639Fe6ab55C921f74e7fac1ee960C0B6293ba612")],
    11155111: [("native", "USD", "0x694AA1769357215DE4FAC081bf1f309aDC325306")],
}


@pytest.mark.parametrize("chain_id", sorted(EXPECTED_CHAINS))
def test_each_chain_ships_exactly_its_cited_feeds(chain_id: int) -> None:
    feeds = registry()[chain_id]["feed"]

    assert [(f["asset"], f["currency"], f["address"]) for f in feeds] == EXPECTED_FEEDS.get(
        chain_id, []
    )
    for feed in feeds:
        assert feed["address"] == checksum_encode(address_bytes(feed["address"]))


def test_a_chains_file_gets_the_registry_feeds_and_pegs(tmp_path: Path) -> None:
    path = chains_file(
        tmp_path,
        '[[chain]]\nchain_id = 11155111\nrpc_urls = ["http://127.0.0.1:1"]\n',
    )
    (sepolia,) = load_chains_file(path)

    feed = sepolia.feed(None, "USD")
    assert feed is not None and feed.address == "0x694AA1769357215DE4FAC081bf1f309aDC325306"
    assert (feed.heartbeat_s, sepolia.feed(None, "EUR")) == (3600, None)
    assert [t.pegged for t in sepolia.tokens] == ["USD"]


def test_a_feed_for_a_token_off_the_allow_list_is_refused(tmp_path: Path) -> None:
    path = chains_file(
        tmp_path,
        '[[chain]]\nchain_id = 11155111\nrpc_urls = ["http://127.0.0.1:1"]\n'
        '[[chain.feed]]\nasset = "0x00000000000000000000000000000000000000C0"\n'
        'currency = "USD"\naddress = "0x694AA1769357215DE4FAC081bf1f309aDC325306"\n',
    )
    with pytest.raises(ValueError, match="is not an allow-listed token"):
        load_chains_file(path)


def test_every_token_address_is_written_in_its_eip55_form() -> None:
    addresses = [token["address"] for entry in registry().values() for token in entry["token"]]

    assert addresses
    for address in addresses:
        assert address == checksum_encode(address_bytes(address))


def test_every_chain_and_token_table_is_preceded_by_its_source() -> None:
    lines = registry_text().splitlines()
    tables = [
        i
        for i, line in enumerate(lines)
        if line in ("[[chain]]", "[[chain.token]]", "[[chain.feed]]")
    ]

    assert len(tables) > len(EXPECTED_CHAINS)
    for i in tables:
        comment = i - 1
        while lines[comment].startswith("# ") and not lines[comment].startswith("# source:"):
            comment -= 1
        assert lines[comment].startswith("# source: "), f"no source before line {i + 1}"


def test_every_confirmations_value_says_why() -> None:
    lines = registry_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("confirmations ="):
            assert lines[i - 1].startswith("# "), f"line {i + 1}: no reason given"


# Chains files merged over the registry.


def test_a_minimal_chains_file_takes_everything_else_from_the_registry(tmp_path: Path) -> None:
    path = chains_file(
        tmp_path,
        f'[[chain]]\nchain_id = 8453\nrpc_urls = ["https://a.example", "https://b.example"]\n'
        f'factory = "{FACTORY}"\n',
    )

    (base,) = load_chains_file(path)

    assert (base.name, base.native_symbol, base.native_decimals) == ("Base", "ETH", 18)
    assert base.confirmations == 10
    assert base.explorer == "https://basescan.org"
    assert base.rpc_urls == ("https://a.example", "https://b.example")
    assert base.rpc_url == "https://a.example"
    assert [(t.address, t.symbol, t.decimals) for t in base.tokens] == [(USDC_BASE, "USDC", 6)]
    assert base.explorer_address_url(USDC_BASE) == f"https://basescan.org/address/{USDC_BASE}"


def test_without_a_factory_the_chain_uses_the_deterministic_deployment(tmp_path: Path) -> None:
    path = chains_file(tmp_path, '[[chain]]\nchain_id = 8453\nrpc_urls = ["https://a.example"]\n')

    (base,) = load_chains_file(path)

    assert base.factory == factory_address()
    assert base.factory == deterministic_address(factory_bytecode())


def test_the_chains_file_overrides_the_registry(tmp_path: Path) -> None:
    token = "0x" + "7e" * 20
    path = chains_file(
        tmp_path,
        "[[chain]]\nchain_id = 137\n"
        'rpc_url = "https://a.example"\n'
        f'factory = "{FACTORY}"\n'
        'name = "Polygon (ours)"\nconfirmations = 200\nexplorer = "https://x.example/"\n'
        "eip1559 = false\n"
        f'[[chain.token]]\naddress = "{token}"\nsymbol = "XUSD"\ndecimals = 18\n',
    )

    (polygon,) = load_chains_file(path)

    assert (polygon.name, polygon.confirmations) == ("Polygon (ours)", 200)
    assert polygon.native_symbol == "POL"  # not overridden: still the registry's
    assert polygon.explorer == "https://x.example"
    assert polygon.eip1559 is False
    assert [(t.symbol, t.decimals) for t in polygon.tokens] == [("XUSD", 18)]  # replaced


def test_a_chain_the_registry_does_not_know_needs_its_own_values(tmp_path: Path) -> None:
    path = chains_file(
        tmp_path, f'[[chain]]\nchain_id = 999999\nrpc_url = "http://a"\nfactory = "{FACTORY}"\n'
    )

    (chain,) = load_chains_file(path)

    assert (chain.name, chain.confirmations, chain.tokens, chain.explorer) == (
        "chain 999999",
        1,
        (),
        None,
    )


def test_another_registry_file_replaces_the_shipped_one(tmp_path: Path) -> None:
    other = tmp_path / "registry.toml"
    other.write_text('[[chain]]\nchain_id = 8453\nname = "Base (reviewed)"\nconfirmations = 30\n')
    path = chains_file(
        tmp_path, f'[[chain]]\nchain_id = 8453\nrpc_url = "http://a"\nfactory = "{FACTORY}"\n'
    )

    settings = Settings(environment="development", chains_file=path, registry_file=other)

    base = settings.chain_configs()[8453]
    assert (base.name, base.confirmations, base.tokens, base.explorer) == (
        "Base (reviewed)",
        30,
        (),
        None,
    )


@pytest.mark.parametrize(
    "explorer",
    ["javascript:alert(1)", "ftp://x.example", 'https://x.example/"onmouseover="x', ""],
)
def test_an_explorer_that_is_not_a_plain_http_url_is_refused(tmp_path: Path, explorer: str) -> None:
    path = chains_file(
        tmp_path,
        f'[[chain]]\nchain_id = 8453\nrpc_url = "http://a"\nfactory = "{FACTORY}"\n'
        f"explorer = '{explorer}'\n",
    )

    with pytest.raises(ValueError, match="chain 8453: explorer must be an http"):
        load_chains_file(path)


def test_a_registry_listing_a_chain_twice_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "registry.toml"
    other.write_text("[[chain]]\nchain_id = 5\n[[chain]]\nchain_id = 5\n")
    path = chains_file(
        tmp_path, f'[[chain]]\nchain_id = 5\nrpc_url = "http://a"\nfactory = "{FACTORY}"\n'
    )

    with pytest.raises(ValueError, match="chain 5 twice"):
        load_chains_file(path, registry_file=other)
