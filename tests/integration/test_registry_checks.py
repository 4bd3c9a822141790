"""Start-up checks on chains configured through the registry: a chains file with only the
chain id, its RPC URLs and the factory, everything else from a registry entry, checked
against a real anvil."""

from __future__ import annotations

from pathlib import Path

import pytest

from invoicing.chain.anvil import AnvilProcess
from invoicing.chain.checks import ChainCheckFailed, verify_chains
from invoicing.chain.deploy import DevDeployment
from invoicing.settings import Settings


def registry_file(tmp_path: Path, dev: DevDeployment, decimals: int, extra: str = "") -> Path:
    path = tmp_path / "registry.toml"
    path.write_text(
        "# source: the test's own anvil\n"
        f'[[chain]]\nchain_id = {dev.chain_id}\nname = "Anvil (registry)"\n'
        'native_symbol = "ETH"\nnative_decimals = 18\nconfirmations = 2\n'
        'explorer = "https://explorer.example"\n'
        "# source: deployed by the test\n"
        f'[[chain.token]]\naddress = "{dev.token}"\nsymbol = "TUSD"\ndecimals = {decimals}\n'
        + extra
    )
    return path


def minimal_chains_file(tmp_path: Path, anvil: AnvilProcess, factory: str, extra: str = "") -> Path:
    path = tmp_path / "chains.toml"
    path.write_text(
        f'[[chain]]\nchain_id = 31337\nrpc_urls = ["{anvil.url}"]\nfactory = "{factory}"\n' + extra
    )
    return path


def settings(chains: Path, registry: Path) -> Settings:
    return Settings(environment="development", chains_file=chains, registry_file=registry)


async def test_a_registry_derived_chain_passes_the_start_up_checks(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment
) -> None:
    configs = settings(
        minimal_chains_file(tmp_path, anvil, dev.factory), registry_file(tmp_path, dev, 6)
    ).chain_configs()

    chain = configs[31337]
    assert (chain.name, chain.confirmations, chain.explorer) == (
        "Anvil (registry)",
        2,
        "https://explorer.example",
    )
    assert [(t.address, t.decimals) for t in chain.tokens] == [(dev.token, 6)]
    await verify_chains(configs.values())  # does not raise


async def test_wrong_decimals_in_the_registry_stop_the_start(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment
) -> None:
    configs = settings(
        minimal_chains_file(tmp_path, anvil, dev.factory), registry_file(tmp_path, dev, 18)
    ).chain_configs()

    with pytest.raises(ChainCheckFailed) as failed:
        await verify_chains(configs.values())

    assert str(failed.value) == (
        f"chain 31337 (Anvil (registry)): token TUSD {dev.token}: decimals() is 6, configured 18"
    )


async def test_the_chains_file_corrects_a_wrong_registry_entry(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment
) -> None:
    tokens = f'[[chain.token]]\naddress = "{dev.token}"\nsymbol = "TUSD"\ndecimals = 6\n'
    configs = settings(
        minimal_chains_file(tmp_path, anvil, dev.factory, tokens),
        registry_file(tmp_path, dev, 18),
    ).chain_configs()

    assert [t.decimals for t in configs[31337].tokens] == [6]
    await verify_chains(configs.values())  # does not raise


async def test_a_registry_derived_chain_without_the_factory_code_stops_the_start(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment
) -> None:
    no_code = "0x" + "fa" * 20
    configs = settings(
        minimal_chains_file(tmp_path, anvil, no_code), registry_file(tmp_path, dev, 6)
    ).chain_configs()

    with pytest.raises(ChainCheckFailed, match="no contract at the factory address"):
        await verify_chains(configs.values())


async def test_an_eip3009_domain_is_checked_against_the_tokens_domain_separator(
    tmp_path: Path, anvil: AnvilProcess, dev: DevDeployment
) -> None:
    chains = minimal_chains_file(tmp_path, anvil, dev.factory)
    right = 'eip3009_name = "Test USD"\neip3009_version = "1"\n'
    configs = settings(chains, registry_file(tmp_path, dev, 6, right)).chain_configs()
    await verify_chains(configs.values())  # does not raise

    wrong = 'eip3009_name = "Test USD"\neip3009_version = "2"\n'
    (tmp_path / "wrong").mkdir()  # registries are cached by path
    configs = settings(chains, registry_file(tmp_path / "wrong", dev, 6, wrong)).chain_configs()
    with pytest.raises(ChainCheckFailed) as failed:
        await verify_chains(configs.values())
    assert str(failed.value) == (
        f"chain 31337 (Anvil (registry)): token TUSD {dev.token}: DOMAIN_SEPARATOR() is not "
        "the one of EIP-712 name 'Test USD' version '2' (eip3009_name, eip3009_version)"
    )
