"""Endpoint keys, hosts, failure streaks and the per-host and per-owner caps (pure functions)."""

from __future__ import annotations

import hashlib
from collections import Counter

from invoicing.notifications.claims import FAST_HOSTS, Caps, ClaimedEvent, InFlight
from invoicing.notifications.client import Delivery
from invoicing.notifications.endpoints import endpoint_host, endpoint_key, tally
from invoicing.settings import Settings

A_OWNER, B_OWNER = "0x" + "aa" * 20, "0x" + "bb" * 20


def test_health_is_kept_per_owner_and_url() -> None:
    url = "https://shop.example/hooks/paid?x=1"

    key = endpoint_key(A_OWNER, url)
    assert key == hashlib.sha256(f"{A_OWNER} {url}".encode()).hexdigest()
    assert key == endpoint_key(A_OWNER.upper().replace("0X", "0x"), url)
    assert key != endpoint_key(A_OWNER, "https://shop.example/hooks/paid?x=2")
    assert key != endpoint_key(B_OWNER, url)  # another owner's deliveries to the same URL


def test_the_host_is_host_and_port_with_the_schemes_default() -> None:
    assert endpoint_host("https://Shop.Example/a") == "shop.example:443"
    assert endpoint_host("http://shop.example/a") == "shop.example:80"
    assert endpoint_host("http://127.0.0.1:9000/a") == "127.0.0.1:9000"
    assert endpoint_host("http://[::1]:9000/a") == "::1:9000"
    assert endpoint_host("http://shop.example:99999/a") == "shop.example:80"  # bad port


def test_tally_counts_only_the_failures_after_the_last_success() -> None:
    a, b, c = "https://a.example/", "https://b.example/", "https://c.example/"
    outcomes = [(a, False), (a, True), (a, False), (b, False), (b, False), (c, False), (c, True)]

    succeeded, failures = tally([(url + "#key", url, ok) for url, ok in outcomes])

    assert succeeded == {a + "#key", c + "#key"}
    assert failures == {a + "#key": 1, b + "#key": 2}


def flying(hosts: dict[str, int], owners: dict[str, int] | None = None) -> InFlight:
    """A's attempts in flight, by host (and the owners' counts)."""
    return InFlight(Counter({(A_OWNER, h): n for h, n in hosts.items()}), Counter(owners or {}))


def test_the_host_cap_leaves_out_only_what_would_exceed_it() -> None:
    rows = [("e1", "a:443"), ("e2", "a:443"), ("e3", "b:443"), ("e4", "a:443"), ("e1", "a:443")]
    owned = [(event_id, host, A_OWNER) for event_id, host in rows]
    caps = Caps(per_host=3, per_owner=100, reserved=0)

    assert caps.within(owned, flying({"a:443": 1}), 10) == ["e1", "e2", "e3"]
    assert caps.within(owned, flying({}), 10) == ["e1", "e2", "e3", "e4"]
    assert caps.within(owned, flying({"b:443": 3}), 10) == ["e1", "e2", "e4"]
    assert caps.within(owned, flying({}), 2) == ["e1", "e2"]  # the free slots
    assert caps.full(flying({"a:443": 3, "b:443": 2}), 10) == ([(A_OWNER, "a:443")], [])


def test_one_owner_at_a_hosts_cap_leaves_that_host_to_the_other_owners() -> None:
    # A's deliveries to a host many owners use (a hosted receiver) fill A's cap there;
    # B's deliveries to the same host are still claimed, up to B's own cap.
    rows = [(f"a{i}", "hooks.shared:443", A_OWNER) for i in range(3)]
    rows += [(f"b{i}", "hooks.shared:443", B_OWNER) for i in range(4)]
    caps = Caps(per_host=3, per_owner=100, reserved=0)
    a_full = flying({"hooks.shared:443": 3}, {A_OWNER: 3})

    assert caps.within(rows, a_full, 10) == ["b0", "b1", "b2"]
    assert caps.full(a_full, 10) == ([(A_OWNER, "hooks.shared:443")], [])
    assert caps.within(rows, flying({}), 10) == ["a0", "a1", "a2", "b0", "b1", "b2"]


def test_an_owner_takes_its_share_and_beyond_it_only_spare_slots() -> None:
    rows = [(f"e{i}", f"h{i}:443", A_OWNER if i < 6 else B_OWNER) for i in range(9)]
    caps = Caps(per_host=100, per_owner=2, reserved=3)  # a worker of 6 slots

    # 6 free: A takes its 2, then spare ones while 3 stay free; B its share of what is left.
    assert caps.within(rows, flying({}), 6) == ["e0", "e1", "e2", "e6", "e7"]
    # A already holds 3 (3 free): nothing more for A, B takes its share.
    assert caps.within(rows, flying({}, {A_OWNER: 3}), 3) == ["e6", "e7"]
    assert caps.full(flying({}, {A_OWNER: 3, B_OWNER: 1}), 3) == ([], [A_OWNER])
    assert caps.full(flying({}, {A_OWNER: 2}), 4) == ([], [])  # a spare slot is free
    # Alone, an owner uses the spare three quarters: claims stay as large as without caps.
    alone = [(f"e{i}", f"h{i}:443", A_OWNER) for i in range(300)]
    wide = Caps(per_host=20, per_owner=20, reserved=50)  # 200 slots
    assert len(wide.within(alone, flying({}, {A_OWNER: 80}), 120)) == 70
    assert wide.most_claimable(120) == 90
    assert wide.most_claimable(30) == 20
    assert wide.most_claimable(10) == 10


def test_a_host_that_answers_fast_has_its_cap_again_queued_and_loses_it_when_slow() -> None:
    rows = [(f"e{i}", "a:443", A_OWNER) for i in range(10)]
    caps = Caps(per_host=3, per_owner=100, reserved=0, queue=1)
    counted = flying({"a:443": 1})

    assert caps.within(rows, counted, 10) == ["e0", "e1"]  # not known to be fast: the cap
    counted.answered("a:443", fast=True)
    assert caps.within(rows, counted, 10) == ["e0", "e1", "e2", "e3", "e4"]  # 6 held at most
    assert caps.full(flying({"a:443": 3}, {}), 10) == ([(A_OWNER, "a:443")], [])  # not fast
    counted.owner_hosts[A_OWNER, "a:443"] = 5
    assert caps.full(counted, 10) == ([], [])
    counted.owner_hosts[A_OWNER, "a:443"] = 6
    assert caps.full(counted, 10) == ([(A_OWNER, "a:443")], [])
    counted.answered("a:443", fast=False)  # a slow or failed attempt: the plain cap again
    counted.owner_hosts[A_OWNER, "a:443"] = 3
    assert caps.full(counted, 10) == ([(A_OWNER, "a:443")], [])
    assert Caps(per_host=3, per_owner=100, reserved=0).held("a:443", counted) == 3
    counted.answered("a:443", fast=True)
    assert Caps(per_host=3, per_owner=100, reserved=0).held("a:443", counted) == 3  # no queue


def test_a_host_queue_needs_a_timeout_its_lease_covers() -> None:
    quick = Settings(environment="development", webhook_timeout_s=10)
    slow = Settings(environment="development", webhook_timeout_s=30)

    assert (Caps.of(quick).per_host, Caps.of(quick).queue) == (20, 1)
    assert Caps.of(slow).queue == 0  # a queued attempt could outlive its lease


def test_in_flight_counts_come_back_to_nothing() -> None:
    counted = flying({})
    events = [claimed(A_OWNER, "h:443"), claimed(A_OWNER, "h:443"), claimed(B_OWNER, "g:443")]
    for event in events:
        counted.add(event)
    assert counted.owner_hosts == {(A_OWNER, "h:443"): 2, (B_OWNER, "g:443"): 1}
    assert counted.owners == {A_OWNER: 2, B_OWNER: 1}
    for event in events:
        counted.remove(event)
    assert (counted.owner_hosts, counted.owners) == ({}, {})


def test_a_worker_remembers_a_bounded_number_of_fast_hosts() -> None:
    counted = flying({})
    for i in range(FAST_HOSTS + 2):
        counted.answered(f"h{i}:443", fast=True)
    counted.answered("h2:443", fast=True)  # news again: kept as the latest
    counted.answered("h3:443", fast=False)

    assert len(counted.fast) == FAST_HOSTS - 1
    assert list(counted.fast)[:2] == ["h4:443", "h5:443"]  # the two oldest were forgotten
    assert list(counted.fast)[-1] == "h2:443"


def claimed(owner: str, host: str) -> ClaimedEvent:
    return ClaimedEvent("e", 1, host, Delivery(f"https://{host}/", b"{}", {}), owner_key=owner)
