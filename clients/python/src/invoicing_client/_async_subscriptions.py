"""The owner's subscriptions (docs/integration/subscriptions.md): a payer signs once, and each
period is charged into that period's own invoice (written for asyncio; the blocking one is
generated, see ``_async_client.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

from invoicing_client import _calls as calls
from invoicing_client._async_resources import AsyncSend
from invoicing_client.models import SubscriptionList, SubscriptionOut


class AsyncSubscriptions:
    def __init__(self, send: AsyncSend) -> None:
        self._send = send

    async def create(
        self,
        chain_id: int,
        token_address: str,
        amount: str | Decimal,
        period_seconds: int,
        *,
        max_periods: int | None = None,
        subscription_id: str | None = None,
        description: str | None = None,
        redirect_url: str | None = None,
        cancel_url: str | None = None,
    ) -> SubscriptionOut:
        """Create a subscription of ``amount`` in the token's units (a decimal string) every
        ``period_seconds``, for ``max_periods`` periods (default 0: no end). The payer
        approves ``authorization.spender`` and signs ``authorization.typed_data`` at ``url``
        (or through ``public.authorize_subscription``). With ``subscription_id`` (your
        reference, unique per owner) a retry is safe: the same body gets the first back."""
        body = {
            "chainId": chain_id,
            "tokenAddress": token_address,
            "amount": calls.decimal_amount(amount),
            "periodSeconds": period_seconds,
            **calls.given(
                maxPeriods=max_periods,
                subscriptionId=subscription_id,
                description=description,
                redirectUrl=redirect_url,
                cancelUrl=cancel_url,
            ),
        }
        call = calls.call("subscriptions.create", body=body, idempotent=subscription_id is not None)
        return await self._send(call, calls.model(SubscriptionOut))

    async def status(self, subscription_id: str) -> SubscriptionOut:
        """One subscription by its ``id`` (the service's), with its payer, next charge
        (``next_charge_at``, ms by the chain's time) and charges."""
        call = calls.call("subscriptions.status", query={"id": subscription_id})
        return await self._send(call, calls.model(SubscriptionOut, "subscription"))

    async def list(self, *, page_size: int = calls.MAX_PAGE_SIZE) -> AsyncIterator[SubscriptionOut]:
        """Every subscription of the owner, newest first, fetching pages as it goes."""
        seen: set[str] = set()
        page = 1
        while True:
            query = {"page": page, "limit": page_size}
            call = calls.call("subscriptions.list", query=query)
            result = await self._send(call, calls.model(SubscriptionList))
            for subscription in result.items:
                # One created while paging shifts the pages by one: never twice.
                if subscription.id not in seen:
                    seen.add(subscription.id)
                    yield subscription
            if not result.items or result.page * result.limit >= result.total:
                return
            page += 1

    async def cancel(self, subscription_id: str) -> SubscriptionOut:
        """Cancel (idempotent): the service charges nothing for it any more. To end it on
        chain as well, sign ``Cancel`` with the owner's wallet (docs: Subscriptions)."""
        call = calls.call("subscriptions.cancel", query={"id": subscription_id})
        return await self._send(call, calls.model(SubscriptionOut, "subscription"))
