"""Configuration as an operator writes it: per-chain token allow-lists, secrets that never
show, the rules outside development, the API-key encryption key (HKDF) and its migration."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr, ValidationError

from invoicing.addresses import normalize_address
from invoicing.auth.api_keys import API_KEY
from invoicing.auth.secrets import ServerSecrets, hkdf_sha256
from invoicing.chain.chains_file import load_chains_file
from invoicing.chain.config import ChainConfig, Eip712Domain, TokenConfig
from invoicing.chain.fake import FakeChain
from invoicing.errors import UnsupportedToken
from invoicing.invoices.create import allowed_token_decimals
from invoicing.settings import Settings

RELAYER_KEY = "0x" + "4c" * 32
SECRET = "s3cr3t-" + "q" * 40
METRICS_TOKEN = "metrics-" + "z" * 24
TOKEN = "0x" + "7e" * 20
FACTORY = "0x" + "fa" * 20


def chains_toml(tmp_path: Path, relayer_key: str, tokens: str = "") -> Path:
    path = tmp_path / "chains.toml"
    path.write_text(
        "[[chain]]\n"
        "chain_id = 8453\n"
        'name = "Base"\n'
        'rpc_url = "https://rpc.example"\n'
        f'factory = "{FACTORY}"\n'
        f'relayer_key = "{relayer_key}"\n' + tokens
    )
    return path


# Secrets never show.


def test_settings_and_chain_configs_never_show_their_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAYER_KEY_BASE", RELAYER_KEY)
    settings = Settings(
        environment="production",
        secret=SECRET,
        metrics_token=METRICS_TOKEN,
        chains_file=chains_toml(tmp_path, "env:RELAYER_KEY_BASE"),
    )
    inline = ChainConfig(8453, "Base", "https://rpc.example", FACTORY, relayer_key=RELAYER_KEY)  # type: ignore[arg-type]

    shown = " ".join(
        [repr(settings), str(settings), repr(settings.chain_configs()), repr(inline), str(inline)]
    )

    for secret in (RELAYER_KEY, RELAYER_KEY[2:], SECRET, METRICS_TOKEN):
        assert secret not in shown
    assert "**********" in shown
    assert settings.chain_configs()[8453].relayer_private_key() == RELAYER_KEY
    assert inline.relayer_private_key() == RELAYER_KEY


def test_a_refused_configuration_does_not_show_the_secret() -> None:
    with pytest.raises(ValidationError) as refused:
        Settings(environment="production", secret="short-" + "x" * 10)

    assert "x" * 10 not in str(refused.value)


# Outside development.


@pytest.mark.parametrize(
    ("secret", "reason"),
    [
        ("dev-only-insecure-secret-change-me", "must be set to a real secret"),
        # The example settings file's placeholder, left as it is.
        ("replace-with-the-output-of-openssl-rand-hex-32", "must be set to a real secret"),
        ("a" * 31, "at least 32 bytes"),
    ],
)
def test_outside_development_the_secret_must_be_real_and_32_bytes(secret: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        Settings(environment="production", secret=secret)


ENV_EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "invoicing.env.example"


def example_value(name: str) -> str:
    """The value the example settings file gives ``name``, as shipped."""
    (value,) = re.findall(rf"^{name}=(.*)$", ENV_EXAMPLE.read_text(), re.MULTILINE)
    return value


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("INVOICING_DATABASE_URL", "database_url"),
        ("INVOICING_METRICS_TOKEN", "metrics_token"),
    ],
)
def test_outside_development_the_example_files_placeholders_are_refused(
    name: str, field: str
) -> None:
    placeholder = example_value(name)
    assert "replace-with-" in placeholder  # the file still marks it so

    with pytest.raises(ValidationError) as refused:
        Settings(environment="production", secret=SECRET, **{field: placeholder})

    assert f"{name} still holds the example settings file's placeholder" in str(refused.value)
    assert placeholder not in str(refused.value)
    assert Settings(environment="development", **{field: placeholder})


def test_every_placeholder_left_is_named_at_once_and_real_values_start() -> None:
    left = {
        "database_url": example_value("INVOICING_DATABASE_URL"),
        "metrics_token": example_value("INVOICING_METRICS_TOKEN"),
        "smtp_url": "smtp://mail:replace-with-the-password@mail.example:587?starttls=1",
    }
    with pytest.raises(ValidationError) as refused:
        Settings(environment="production", secret=SECRET, **left)
    assert "INVOICING_DATABASE_URL, INVOICING_METRICS_TOKEN, INVOICING_SMTP_URL still hold" in str(
        refused.value
    )

    # As the deploy guide fills them in: a generated password and token.
    real = Settings(
        environment="production",
        secret=SECRET,
        database_url="postgresql://invoicing:3f9c1d2e8a7b6c5d@127.0.0.1/invoicing",
        metrics_token=METRICS_TOKEN,
    )
    assert real.metrics_token is not None
    assert real.metrics_token.get_secret_value() == METRICS_TOKEN


def test_a_32_byte_secret_is_enough_and_development_takes_any() -> None:
    assert Settings(environment="production", secret="b" * 32).secret.get_secret_value() == "b" * 32
    assert Settings(environment="development", secret="short").secret.get_secret_value() == "short"


def test_an_inline_relayer_key_is_refused_outside_development(tmp_path: Path) -> None:
    path = chains_toml(tmp_path, RELAYER_KEY)

    with pytest.raises(ValidationError) as refused:
        Settings(environment="production", secret=SECRET, chains_file=path)

    assert "inline relayer_key is refused outside development" in str(refused.value)
    assert RELAYER_KEY[2:] not in str(refused.value)
    developing = Settings(environment="development", chains_file=path)
    assert developing.chain_configs()[8453].relayer_private_key() == RELAYER_KEY


def test_a_relayer_key_in_the_inline_chain_list_is_refused_outside_development() -> None:
    chain = ChainConfig(1, "x", "https://rpc.example", FACTORY, relayer_key=SecretStr(RELAYER_KEY))

    with pytest.raises(ValidationError, match="refused outside development"):
        Settings(environment="production", secret=SECRET, chains=[chain])


def test_a_relayer_key_from_a_file_is_accepted(tmp_path: Path) -> None:
    key_file = tmp_path / "relayer"
    key_file.write_text(RELAYER_KEY + "\n")

    settings = Settings(
        environment="production",
        secret=SECRET,
        chains_file=chains_toml(tmp_path, f"file:{key_file}"),
    )

    assert settings.chain_configs()[8453].relayer_private_key() == RELAYER_KEY


# The allow-list.


def test_the_chains_file_lists_each_chains_tokens(tmp_path: Path) -> None:
    path = chains_toml(
        tmp_path,
        "file:/dev/null",
        f'[[chain.token]]\naddress = "{TOKEN}"\nsymbol = "USDC"\ndecimals = 6\n',
    )

    (chain,) = load_chains_file(path)

    assert chain.tokens == (TokenConfig(normalize_address(TOKEN), "USDC", 6),)
    assert chain.tokens[0].address == normalize_address(TOKEN)
    assert chain.token("0x" + TOKEN[2:].upper()) == chain.tokens[0]
    assert chain.token("0x" + "12" * 20) is None


def test_a_bad_token_entry_is_a_clear_error(tmp_path: Path) -> None:
    bad_address = '[[chain.token]]\naddress = "0x1234"\nsymbol = "X"\ndecimals = 6\n'
    no_decimals = f'[[chain.token]]\naddress = "{TOKEN}"\nsymbol = "X"\n'

    with pytest.raises(ValueError, match="chain 8453: token address '0x1234' must be a 0x-"):
        load_chains_file(chains_toml(tmp_path, "file:/dev/null", bad_address))
    with pytest.raises(ValueError, match="chain 8453: missing 'decimals'"):
        load_chains_file(chains_toml(tmp_path, "file:/dev/null", no_decimals))


def test_an_unlisted_token_is_refused() -> None:
    chain = FakeChain()
    chain.add_token(TOKEN, 6, "TUSD", allow=False)  # a contract that answers decimals()

    with pytest.raises(UnsupportedToken) as refused:
        allowed_token_decimals(chain, TOKEN)

    assert refused.value.code == "unsupported_token"
    assert refused.value.details == {"field": "tokenAddress", "chainId": chain.config.chain_id}


def test_decimals_and_symbol_come_from_the_configuration() -> None:
    chain = FakeChain()
    chain.add_token(TOKEN, 6, "TUSD")
    chain.decimals[TOKEN.lower()] = 18  # what the contract would answer now
    chain.symbols[TOKEN.lower()] = "EVIL"

    assert allowed_token_decimals(chain, TOKEN) == 6


async def test_the_symbol_comes_from_the_configuration() -> None:
    chain = FakeChain()
    chain.add_token(TOKEN, 6, "TUSD")
    chain.symbols[TOKEN.lower()] = "EVIL"

    assert await chain.token_symbol(TOKEN) == "TUSD"
    assert await chain.token_symbol(None) == "ETH"
    assert await chain.token_symbol("0x" + "12" * 20) == "TOKEN"


# The API-key encryption key.


def test_hkdf_sha256_matches_rfc_5869_test_cases_1_and_3() -> None:
    # RFC 5869, Appendix A.1 (Test Case 1) and A.3 (Test Case 3: no salt, no info).
    assert hkdf_sha256(
        bytes([0x0B] * 22), bytes(range(0x0D)), bytes(range(0xF0, 0xFA)), 42
    ).hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )
    assert hkdf_sha256(bytes([0x0B] * 22), None, b"", 42).hex() == (
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
    )


def legacy_encrypt(api_key: str, secret: str) -> str:
    """How API keys were encrypted before HKDF: Fernet under sha256(secret)."""
    key = base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest())
    return Fernet(key).encrypt(api_key.encode()).decode()


def test_api_keys_are_encrypted_under_the_hkdf_key() -> None:
    encrypted = API_KEY.seal(SecretStr("sk_new"), ServerSecrets(SecretStr(SECRET)))

    assert API_KEY.unseal(encrypted, ServerSecrets(SecretStr(SECRET))) == SecretStr("sk_new")
    hkdf_key = hkdf_sha256(SECRET.encode(), None, b"invoicing api-key encryption v1", 32)
    assert Fernet(base64.urlsafe_b64encode(hkdf_key)).decrypt(encrypted.encode()) == b"sk_new"
    assert API_KEY.unseal(encrypted, ServerSecrets(SecretStr("another secret"))) is None


def test_keys_stored_under_the_old_derivation_still_decrypt() -> None:
    stored = legacy_encrypt("sk_old", SECRET)

    assert API_KEY.unseal(stored, ServerSecrets(SecretStr(SECRET))) == SecretStr("sk_old")


def test_a_host_stepped_into_a_rotation_reads_the_next_secret_and_seals_under_its_own() -> None:
    old, new = SecretStr(SECRET), SecretStr("next-" + "n" * 40)
    settings = Settings(environment="production", secret=SECRET, next_secret=new)
    stepped_in = ServerSecrets.of(settings)
    switched = ServerSecrets(new, previous=old)
    sealed_by_switched = API_KEY.seal(SecretStr("sk_switched"), switched)

    sealed_by_stepped_in = API_KEY.seal(SecretStr("sk_stepped"), stepped_in)

    assert stepped_in == ServerSecrets(old, next=new)
    assert API_KEY.unseal(sealed_by_switched, stepped_in) == SecretStr("sk_switched")
    # Still sealed under the old secret: a host not yet stepped in reads it too.
    assert API_KEY.unseal(sealed_by_stepped_in, ServerSecrets(old)) == SecretStr("sk_stepped")
    assert API_KEY.unseal(sealed_by_stepped_in, ServerSecrets(new)) is None
    assert new.get_secret_value() not in repr(settings) + str(settings)


def test_the_docs_chains_file_example_parses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs/operations/chains.md").read_text()
    section = page.split("## The chains file\n", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```")[0]
    path = tmp_path / "chains.toml"
    path.write_text(example.replace('"0x…"', f'"{TOKEN}"'))
    monkeypatch.setenv("RELAYER_KEY_BASE", RELAYER_KEY)

    settings = Settings(environment="production", secret=SECRET, chains_file=path)

    (chain,) = settings.chain_configs().values()
    assert chain.relayer_private_key() == RELAYER_KEY
    domain = Eip712Domain("USD Coin", "2")
    assert chain.tokens == (TokenConfig(normalize_address(TOKEN), "USDC", 6, eip3009=domain),)
