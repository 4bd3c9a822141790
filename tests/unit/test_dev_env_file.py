"""The settings file `invoicing dev` writes (``dev.env``) gives the operator commands, through
``--env-file``, the settings the dev service runs with, whatever the shell exports."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from invoicing.chain.anvil import DEV_PRIVATE_KEYS
from invoicing.chain.config import ChainConfig, TokenConfig
from invoicing.cli.common import load_settings
from invoicing.cli.dev import env_file_text
from invoicing.settings import Settings

CHAIN = ChainConfig(
    chain_id=31337,
    name="Anvil (local)",
    rpc_url="http://127.0.0.1:8545",
    factory="0x369721316637c68E416FfD7506f030Ad204FCD23",
    relayer_key=SecretStr(DEV_PRIVATE_KEYS[0]),
    tokens=(TokenConfig("0xA6565348c3269F253E501B4842Fc10304E9fC4E5", "TUSD", 6),),
)


@pytest.mark.parametrize(
    "url",
    ["sqlite+aiosqlite:////tmp/invoicing-dev-x/dev.db", "sqlite+aiosqlite:////tmp/it's/dev.db"],
    ids=["plain", "with-a-quote"],
)
def test_the_env_file_gives_the_dev_settings_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    fields = {
        "environment": "development",
        "database_url": url,
        "base_url": "http://127.0.0.1:8100",
        "payment_page_url": "http://127.0.0.1:8100",
        "webhook_allow_private": True,
        "chains": [CHAIN],
    }
    env_file = tmp_path / "dev.env"
    env_file.write_text(env_file_text(fields))
    monkeypatch.setenv("INVOICING_DATABASE_URL", "postgresql://elsewhere/production")
    monkeypatch.setenv("INVOICING_ENVIRONMENT", "production")

    read = load_settings(env_file)

    dev = Settings(**fields)
    assert (read.environment, read.database_url) == ("development", url)
    assert (read.base_url, read.payment_page_url) == ("http://127.0.0.1:8100",) * 2
    assert read.webhook_allow_private is True
    assert read.chain_configs() == dev.chain_configs()
    assert read.chain_configs()[31337].relayer_private_key() == DEV_PRIVATE_KEYS[0]
