"""The commands that need only a chain's JSON-RPC node, not the service's database or
configuration: ``deploy`` puts the PaymentFactory on a chain, ``recover`` sweeps escrows to
their owner through it (docs/operations/recovery.md)."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Annotated, NoReturn

import typer

from invoicing.chain.answers import RpcError
from invoicing.chain.deploy import (
    DeploymentFailed,
    deploy_factory,
    deploy_reader,
    deploy_subscriptions,
)
from invoicing.chain.evm import EvmClient
from invoicing.errors import ChainUnavailable
from invoicing.recovery.inputs import BadArgument, RecoveryRefused, load_sender_key, parse_options
from invoicing.recovery.sweep import recover as run_recovery
from invoicing.recovery.sweep import summary_lines

RpcUrlOption = Annotated[str | None, typer.Option(help="the chain's JSON-RPC URL")]
SenderKeyHelp = "who pays the gas: env:VAR or file:PATH"


def deploy(
    rpc_url: RpcUrlOption = None,
    deployer_key: Annotated[str | None, typer.Option(help=SenderKeyHelp)] = None,
) -> None:
    """Deploy PaymentFactory, then the EscrowReader and Subscriptions, through the
    deterministic deployment proxy (the same addresses on every chain); prints {"chainId",
    "factory", "txHash", "reader", "readerTxHash", "subscriptions", "subscriptionsTxHash"}
    (a tx hash is null if the contract was there)."""
    try:
        if not rpc_url or not rpc_url.startswith(("http://", "https://")):
            raise BadArgument("--rpc-url is required and must be an http(s) URL")
        if not deployer_key:
            raise BadArgument("--deployer-key is required (env:VAR or file:PATH)")
        key = load_sender_key(deployer_key, os.environ, flag="--deployer-key")
    except BadArgument as exc:
        _fail(exc, status=2)

    async def main() -> dict[str, object]:
        evm = EvmClient.connect(rpc_url)
        try:
            factory = await deploy_factory(evm, key)
            reader = await deploy_reader(evm, key)
            subscriptions = await deploy_subscriptions(evm, key)
            return {
                **factory.as_json(),
                "reader": reader.address,
                "readerTxHash": reader.tx_hash,
                "subscriptions": subscriptions.address,
                "subscriptionsTxHash": subscriptions.tx_hash,
            }
        finally:
            await evm.aclose()

    try:
        typer.echo(json.dumps(asyncio.run(main())))
    except DeploymentFailed as exc:
        _fail(exc)
    except ChainUnavailable:
        _fail("the RPC node does not answer")
    except RpcError as exc:
        reason = " ".join(f"{exc.code}: {exc.message}".split())
        _fail(f"the RPC node refused a request (error {reason})")


def recover(
    rpc_url: RpcUrlOption = None,
    factory: Annotated[str | None, typer.Option(help="the PaymentFactory address")] = None,
    owner: Annotated[str | None, typer.Option(help="the owner wallet")] = None,
    export_file: Annotated[
        str | None, typer.Option("--from", help="the escrow export (NDJSON)")
    ] = None,
    sender_key: Annotated[str | None, typer.Option(help=SenderKeyHelp)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print, send nothing")] = False,
    batch_size: Annotated[str | None, typer.Option(help="escrows per transaction")] = None,
) -> None:
    """Sweep every escrow of an export to its owner through the factory, without this
    service's database or configuration."""
    try:
        options = parse_options(
            rpc_url=rpc_url,
            factory=factory,
            owner=owner,
            export_file=export_file,
            sender_key=sender_key,
            dry_run=dry_run,
            batch_size=batch_size,
            environ=os.environ,
        )
    except BadArgument as exc:
        _fail(exc, status=2)
    try:
        summary = asyncio.run(run_recovery(options, typer.echo))
    except (RecoveryRefused, ChainUnavailable, RpcError) as exc:
        _fail(exc)
    for line in summary_lines(summary, options.dry_run):
        typer.echo(line)
    raise typer.Exit(1 if summary.problems else 0)


def _fail(reason: Exception | str, status: int = 1) -> NoReturn:
    typer.echo(f"error: {reason}", err=True)
    raise typer.Exit(status) from None
