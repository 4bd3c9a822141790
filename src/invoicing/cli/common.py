"""What every command shares: logging set up, settings read, chains checked, refusals printed
as one line on stderr (no traceback)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from invoicing import logs
from invoicing.auth.api_keys import API_KEY_COLUMN
from invoicing.auth.secrets import SealedColumn, ServerSecrets, unreadable_stored
from invoicing.chain.checks import ChainCheckFailed, verify_chains
from invoicing.db import Database
from invoicing.notifications.signing import WEBHOOK_SECRET_COLUMN
from invoicing.settings import Settings

# Every column of owner secrets sealed under INVOICING_SECRET.
SEALED_COLUMNS: tuple[SealedColumn, ...] = (API_KEY_COLUMN, WEBHOOK_SECRET_COLUMN)

# ``--env-file`` of the operator commands: the file ``invoicing dev`` writes (its ready line's
# ``env_file``), or any file of ``INVOICING_*=value`` lines.
EnvFileOption = Annotated[
    Path | None,
    typer.Option(
        exists=True,
        dir_okay=False,
        help="read INVOICING_* settings from this file; they win over the environment's "
        "(`invoicing dev` names its own: env_file)",
    ),
]


class _EnvFileFirst(Settings):
    """Settings whose env file, named on the command line, wins over the environment: a
    command pointed at a file must not reach another database because the shell happens to
    export one."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, dotenv_settings, env_settings, file_secret_settings


def configure_logging() -> None:
    """Logging as INVOICING_LOG_FORMAT / INVOICING_LOG_LEVEL say (invoicing.logs)."""
    try:
        options = logs.LogSettings()
    except ValidationError as exc:
        typer.echo(f"invalid configuration: INVOICING_LOG_*: {_problems(exc)}", err=True)
        raise typer.Exit(2) from None
    logs.configure(options)


def load_settings(env_file: Path | None = None) -> Settings:
    """Settings from the environment (and ``env_file`` first, when given); a bad
    configuration exits with its reason, no traceback."""
    try:
        if env_file is None:
            return Settings()
        # pydantic-settings' own argument, which mypy's view of the model's fields leaves out.
        return _EnvFileFirst(_env_file=env_file)  # type: ignore[call-arg]
    except ValidationError as exc:
        hint = "" if env_file is not None else f" ({NO_ENV_FILE_HINT})"
        typer.echo(f"invalid configuration: {_problems(exc)}{hint}", err=True)
        raise typer.Exit(2) from None


# What a command read without --env-file says when the environment does not configure it:
# the usual cause is a service started by `invoicing dev`, whose settings are in its file.
NO_ENV_FILE_HINT = (
    "no --env-file given: set the INVOICING_* variables of the service "
    "(docs/operations/configuration.md), or, for a service started by `invoicing dev`, pass "
    'the env file its ready line names: --env-file "<env_file>"'
)


def _problems(exc: ValidationError) -> str:
    return "; ".join(str(error["msg"]) for error in exc.errors())


async def verify_chains_or_refuse(settings: Settings) -> None:
    """Refuse to start (exit 1, one line on stderr) when a configured chain is not what the
    configuration says (chain.checks)."""
    try:
        await verify_chains(settings.chain_configs().values(), policy=settings.rpc_policy())
    except ChainCheckFailed as exc:
        refuse(exc)


async def verify_secrets_or_refuse(settings: Settings) -> None:
    """Refuse to start (exit 1, one line on stderr) when stored API keys or webhook secrets
    open under none of INVOICING_SECRET, INVOICING_PREVIOUS_SECRET and INVOICING_NEXT_SECRET:
    webhooks would go out without their API key or signature."""
    unreadable = await unreadable_secrets(settings.database_url, settings)
    if unreadable:
        counts = " and ".join(f"{count} {noun}(s)" for noun, count in unreadable.items())
        refuse(
            f"{counts} stored in the database do not decrypt under INVOICING_SECRET "
            "(nor INVOICING_PREVIOUS_SECRET or INVOICING_NEXT_SECRET): it changed. Set the "
            "secret they were sealed under back, or as INVOICING_PREVIOUS_SECRET; if it is "
            "lost, `invoicing secrets forget-unreadable` revokes them "
            "(docs/operations/configuration.md#rotating-invoicing_secret)"
        )


async def unreadable_secrets(database_url: str, settings: Settings) -> dict[str, int]:
    """Active stored secrets that open under none of the configured secrets, by kind."""
    db = Database(database_url)
    try:
        async with db.sessions() as session:
            counts = {
                sealed.kind.noun: await unreadable_stored(
                    session, sealed, ServerSecrets.of(settings)
                )
                for sealed in SEALED_COLUMNS
            }
    finally:
        await db.dispose()
    return {noun: count for noun, count in counts.items() if count}


def refuse(reason: Exception | str) -> NoReturn:
    typer.echo(f"refusing to start: {reason}", err=True)
    raise typer.Exit(1) from None
