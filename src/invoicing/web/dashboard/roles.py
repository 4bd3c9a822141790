"""What a dashboard request does, in the words of the team's roles (``auth.team``): every
request of a member's session is checked here, in ``session.signed_in``, before its page
runs. A state-changing request this table does not name needs ``Ability.SETTINGS`` (an
admin), so a new action is closed to viewers and operators until it is named here."""

from __future__ import annotations

import re

from invoicing.auth.team import Ability

# (methods, path) → ability; the first match decides.
RULES: tuple[tuple[frozenset[str], re.Pattern[str], Ability], ...] = tuple(
    (frozenset(methods.split()), re.compile(path), ability)
    for methods, path, ability in (
        ("GET HEAD POST", r"/dashboard/team(/.*)?", Ability.OWNER),
        ("POST", r"/dashboard/settings/sessions/[^/]+/revoke", Ability.OWNER),
        ("POST", r"/dashboard/logout", Ability.READ),
        ("POST", r"/dashboard/invoices/new", Ability.INVOICES),
        ("POST", r"/dashboard/invoices/[^/]+/(cancel|delete)", Ability.INVOICES),
        ("POST", r"/dashboard/subscriptions/[^/]+/cancel", Ability.INVOICES),
        ("POST", r"/dashboard/webhooks/.+", Ability.WEBHOOKS),
        ("POST", r"/dashboard/events/[^/]+/redeliver", Ability.WEBHOOKS),
        ("GET HEAD", r"/dashboard(/.*)?", Ability.READ),
    )
)


def ability_of(method: str, path: str) -> Ability:
    """What a request to ``path`` with ``method`` does (unnamed changes: ``SETTINGS``)."""
    for methods, pattern, ability in RULES:
        if method in methods and pattern.fullmatch(path):
            return ability
    return Ability.SETTINGS
