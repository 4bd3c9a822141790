"""Contract wallets sign in to the dashboard by EIP-1271, checked on the message's chain by
an ``eth_call`` capped at the relayer's meta gas limit: a wallet that vouches for its owner's
key signs in; one whose ``isValidSignature`` burns gas past the cap does not, and the node
is not made to run it uncapped."""

from __future__ import annotations

import httpx
from eth_abi.abi import encode
from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import func, select

from invoicing.chain.artifacts import load_artifact
from invoicing.chain.deploy import DevDeployment, deploy_contract
from invoicing.chain.evm import EvmClient
from invoicing.tables.auth import DashboardSession
from tests.conftest import MakeServices, RunningApp
from tests.support.dashboard import dashboard_app, personal_sign


async def funded_deployer(evm: EvmClient) -> str:
    deployer = Account.create()
    await evm.call_rpc("anvil_setBalance", [deployer.address, hex(10**20)])
    return str(deployer.key.to_0x_hex())


async def sign_in_as_wallet(
    app: RunningApp, wallet: str, signer: LocalAccount, chain_id: int
) -> httpx.Response:
    answer = await app.http.post(
        "/dashboard/login/message", json={"address": wallet, "chainId": chain_id}
    )
    message = answer.json()["message"]
    return await app.http.post(
        "/dashboard/login", json={"message": message, "signature": personal_sign(signer, message)}
    )


async def sessions_of(app: RunningApp, owner: str) -> int:
    async with app.services.db.sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(DashboardSession)
            .where(DashboardSession.owner_key == owner.lower())
        )
    return int(count or 0)


async def test_a_contract_wallet_signs_in_by_eip1271(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    signer, stranger = Account.create(), Account.create()
    code = load_artifact("MockERC1271Wallet").bytecode + encode(["address"], [signer.address])
    wallet = await deploy_contract(evm, await funded_deployer(evm), code)
    async with dashboard_app(make_services) as app:
        refused = await sign_in_as_wallet(app, wallet, stranger, dev.chain_id)
        assert refused.status_code == 401
        assert await sessions_of(app, wallet) == 0

        answer = await sign_in_as_wallet(app, wallet, signer, dev.chain_id)

        assert answer.status_code == 200, answer.text
        page = await app.http.get("/dashboard")
        assert wallet in page.text
        assert await sessions_of(app, wallet) == 1


async def test_a_wallet_that_burns_gas_past_the_cap_is_refused(
    make_services: MakeServices, evm: EvmClient, dev: DevDeployment
) -> None:
    signer = Account.create()
    code = load_artifact("GasBurnerWallet").bytecode
    wallet = await deploy_contract(evm, await funded_deployer(evm), code)
    async with dashboard_app(make_services) as app:
        gateway = app.services.chains.get(dev.chain_id)
        digest = b"\x11" * 32
        # Uncapped it would say yes (after millions of gas); under the cap it is a no.
        assert await gateway.is_valid_signature(wallet, digest, b"\x00" * 65, 30_000_000)
        assert not await gateway.is_valid_signature(wallet, digest, b"\x00" * 65, 200_000)

        answer = await sign_in_as_wallet(app, wallet, signer, dev.chain_id)

        assert answer.status_code == 401
        assert answer.json()["error"]["message"] == "the signature is not by the message's address"
        assert await sessions_of(app, wallet) == 0
