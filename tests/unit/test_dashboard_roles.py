"""What each dashboard request is, in the team's roles (web/dashboard/roles.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from invoicing.auth.team import Ability, Role, may
from invoicing.web.dashboard.roles import ability_of


@pytest.mark.parametrize(
    ("method", "path", "ability"),
    [
        ("GET", "/dashboard", Ability.READ),
        ("GET", "/dashboard/invoices/abc", Ability.READ),
        ("GET", "/dashboard/team", Ability.OWNER),
        ("POST", "/dashboard/team", Ability.OWNER),
        ("POST", "/dashboard/team/0xabc/remove", Ability.OWNER),
        ("POST", "/dashboard/settings/sessions/s1/revoke", Ability.OWNER),
        ("POST", "/dashboard/logout", Ability.READ),
        ("POST", "/dashboard/invoices/new", Ability.INVOICES),
        ("POST", "/dashboard/invoices/abc/cancel", Ability.INVOICES),
        ("POST", "/dashboard/webhooks/endpoints", Ability.WEBHOOKS),
        ("POST", "/dashboard/events/e1/redeliver", Ability.WEBHOOKS),
        ("POST", "/dashboard/api-keys", Ability.SETTINGS),
        ("POST", "/dashboard/invoices/abc/refund", Ability.SETTINGS),
        ("POST", "/dashboard/settings/fee/prepare", Ability.SETTINGS),
        ("POST", "/dashboard/something-new", Ability.SETTINGS),
        ("DELETE", "/dashboard/invoices", Ability.SETTINGS),
    ],
)
def test_what_a_request_does(method: str, path: str, ability: Ability) -> None:
    assert ability_of(method, path) == ability


def test_what_each_role_may() -> None:
    assert [a for a in Ability if may(Role.VIEWER, a)] == [Ability.READ]
    assert [a for a in Ability if may(Role.OPERATOR, a)] == [
        Ability.READ,
        Ability.INVOICES,
        Ability.WEBHOOKS,
    ]
    assert not may(Role.ADMIN, Ability.OWNER)
    assert all(may(None, a) for a in Ability)


@given(st.sampled_from(["POST", "PUT", "PATCH", "DELETE"]), st.text(max_size=80))
def test_no_change_but_logout_is_a_read(method: str, tail: str) -> None:
    path = "/dashboard/" + tail
    assert ability_of(method, path) != Ability.READ or path == "/dashboard/logout"
