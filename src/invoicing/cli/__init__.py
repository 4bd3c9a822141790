"""The ``invoicing`` command, one module per kind of command:

- ``dev``: the whole service on local anvil chains, in one process (:mod:`.dev`);
- ``serve``, ``worker``, ``migrate``: the service's processes (:mod:`.serve`);
- ``withdraw``, ``parked``, ``api-keys create``, ``escrows export``, ``dashboard-link``: the
  operator's commands on the service's database (:mod:`.operator`);
- ``secrets reencrypt``, ``secrets forget-unreadable``: stored owner secrets across a
  rotation of INVOICING_SECRET (:mod:`.rotation`);
- ``deploy``, ``recover``: the commands that need only a chain's node (:mod:`.factory`).

:mod:`.common` holds what they share (logging, settings, one-line refusals).
"""

from __future__ import annotations

import typer

from invoicing.cli import dev, factory, operator, rotation, serve

app = typer.Typer(help="Self-hostable crypto invoicing for EVM chains.", no_args_is_help=True)
api_keys_app = typer.Typer(help="Manage API keys as an operator.", no_args_is_help=True)
app.add_typer(api_keys_app, name="api-keys")
escrows_app = typer.Typer(help="Export owners' escrows as an operator.", no_args_is_help=True)
app.add_typer(escrows_app, name="escrows")
secrets_app = typer.Typer(
    help="Stored API keys and webhook secrets across a rotation of INVOICING_SECRET.",
    no_args_is_help=True,
)
app.add_typer(secrets_app, name="secrets")

for command in (
    dev.dev,
    factory.deploy,
    serve.serve,
    serve.worker,
    serve.migrate,
    operator.withdraw,
    operator.parked,
    factory.recover,
    operator.dashboard_link,
):
    app.command()(command)
api_keys_app.command("create")(operator.api_keys_create)
escrows_app.command("export")(operator.escrows_export)
secrets_app.command("reencrypt")(rotation.reencrypt)
secrets_app.command("forget-unreadable")(rotation.forget_unreadable)
