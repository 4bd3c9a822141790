"""What the subscription routes read from a stranger: the authorization's body with its
``permit``, and a signed cancellation's body. Any JSON value parses or is refused with a 4xx
error (``invalid_request``, or the permit's own ``invalid_authorization``); none raises
anything else."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from invoicing.errors import InvalidAuthorization, InvalidRequest, ServiceError
from invoicing.payments.subscriptions.permit import Permit, check_permit_fields
from invoicing.payments.subscriptions.routes import (
    SubscriptionAuthorizationBody,
    SubscriptionCancellationBody,
)
from invoicing.payments.subscriptions.terms import Terms
from invoicing.web.api.inputs import validate

PAYER = "0x" + "11" * 20
CONTRACT = "0x" + "22" * 20
TERMS = Terms(31337, CONTRACT, "0x" + "33" * 20, "0x" + "44" * 20, 2_500_000, 60, 0, 0, b"\0" * 32)

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=140),
    st.sampled_from(["0x" + "ab" * 65, "0x", "12", "0x" + "11" * 20, PAYER, CONTRACT]),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=8,
)
permit_fields = st.fixed_dictionaries(
    {},
    optional={
        "value": st.one_of(st.from_regex(r"[0-9]{1,80}", fullmatch=True), json_value),
        "deadline": st.one_of(st.integers(min_value=-5, max_value=2**64), json_value),
        "signature": st.one_of(st.from_regex(r"0x[0-9a-fA-F]{0,140}", fullmatch=True), json_value),
        "owner": st.one_of(st.sampled_from([PAYER, CONTRACT]), json_value),
        "spender": st.one_of(st.sampled_from([PAYER, CONTRACT]), json_value),
        "extra": json_value,
    },
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "signature": st.one_of(st.from_regex(r"0x[0-9a-f]{0,140}", fullmatch=True), json_value),
        "payer": json_value,
        "permit": st.one_of(permit_fields, json_value),
    },
)


@settings(max_examples=400, deadline=None)
@given(bodies)
def test_any_authorization_body_parses_or_is_refused_with_a_4xx(body: dict[str, Any]) -> None:
    try:
        parsed = validate(SubscriptionAuthorizationBody, body)
    except InvalidRequest as refused:
        assert refused.status == 400 and refused.details and refused.details["problems"]
        return
    if parsed.permit is None:
        return
    p = parsed.permit
    permit = Permit(int(p.value), p.deadline, p.signature, p.owner, p.spender)
    try:
        check_permit_fields(TERMS, PAYER, permit)
    except InvalidAuthorization as refused:
        assert refused.status == 400 and str(refused.details["field"]).startswith("permit.")
        return
    assert TERMS.amount_raw <= permit.value < 2**256 and len(permit.signature) == 132


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.fixed_dictionaries({}, optional={"signature": json_value, "x": json_value}), json_value
    )
)
def test_any_cancellation_body_parses_or_is_refused_with_a_4xx(body: Any) -> None:
    try:
        parsed = validate(
            SubscriptionCancellationBody, body if isinstance(body, dict) else {"signature": body}
        )
    except ServiceError as refused:
        assert isinstance(refused, InvalidRequest) and refused.status == 400
        return
    assert isinstance(parsed.signature, str) and len(parsed.signature) <= 4098


@pytest.mark.parametrize(
    ("permit", "field"),
    [
        ({"owner": CONTRACT}, "permit.owner"),
        ({"spender": PAYER}, "permit.spender"),
        ({"value": "2499999"}, "permit.value"),
        ({"value": str(2**256)}, "permit.value"),
        ({"signature": "0x" + "ab" * 64}, "permit.signature"),
        ({"signature": "0xzz"}, "permit.signature"),
    ],
)
def test_each_wrong_permit_field_is_named(permit: dict[str, Any], field: str) -> None:
    body = {"value": "2500000", "deadline": 2_000_000_000, "signature": "0x" + "ab" * 65, **permit}
    p = validate(SubscriptionAuthorizationBody, {"signature": "0x", "permit": body}).permit
    assert p is not None
    with pytest.raises(InvalidAuthorization) as refused:
        check_permit_fields(
            TERMS, PAYER, Permit(int(p.value), p.deadline, p.signature, p.owner, p.spender)
        )
    assert refused.value.details == {"field": field, **refused.value.details}
    assert refused.value.details["field"] == field
