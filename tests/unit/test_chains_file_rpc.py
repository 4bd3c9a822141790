"""The chains file's ``rpc_urls`` list and ``eip1559`` flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from invoicing.chain.chains_file import load_chains_file
from invoicing.chain.config import ChainConfig

FACTORY = "0x" + "11" * 20


def load(tmp_path: Path, body: str) -> list[ChainConfig]:
    path = tmp_path / "chains.toml"
    path.write_text(f'[[chain]]\nchain_id = 8453\nfactory = "{FACTORY}"\n{body}')
    return load_chains_file(path)


def test_rpc_urls_are_kept_in_order_and_rpc_url_is_the_first(tmp_path: Path) -> None:
    (chain,) = load(tmp_path, 'rpc_urls = ["https://a.example", "https://b.example"]\n')
    assert chain.rpc_url == "https://a.example"
    assert chain.rpc_urls == ("https://a.example", "https://b.example")
    assert chain.eip1559 is None  # detected from the chain


def test_a_single_rpc_url_still_works_and_comes_first_when_both_are_given(
    tmp_path: Path,
) -> None:
    (single,) = load(tmp_path, 'rpc_url = "https://a.example"\neip1559 = false\n')
    assert (single.rpc_urls, single.eip1559) == (("https://a.example",), False)
    (both,) = load(
        tmp_path,
        'rpc_url = "https://a.example"\nrpc_urls = ["https://b.example", "https://a.example"]\n',
    )
    assert both.rpc_urls == ("https://a.example", "https://b.example")
    assert ChainConfig(1, "x", "https://c.example", FACTORY).rpc_urls == ("https://c.example",)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('rpc_urls = "https://a.example"\n', "rpc_urls must be a list of URLs"),
        ("rpc_urls = []\n", "missing 'rpc_urls'"),
        ("", "missing 'rpc_urls'"),
        ('rpc_urls = ["https://a.example"]\neip1559 = "yes"\n', "eip1559 must be true or false"),
    ],
)
def test_bad_rpc_entries_are_refused_naming_the_chain(
    tmp_path: Path, body: str, reason: str
) -> None:
    with pytest.raises(ValueError) as refused:
        load(tmp_path, body)
    assert str(refused.value).endswith(f"chain 8453: {reason}")
