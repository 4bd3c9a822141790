"""How ``make test`` orders and groups the suite over its xdist workers
(``tests/support/workers.py``): the units that take minutes start first, longest first; the
bench smoke tests spread one by one; the files that share a costly process stay together."""

from __future__ import annotations

from tests.support.workers import LONGEST_FIRST, rank, unit_of

MEDUSA = "tests/integration/test_medusa_provider.py"
BENCHES = "tests/integration/test_benches.py"


def test_each_bench_smoke_test_is_a_unit_of_its_own() -> None:
    first = f"{BENCHES}::test_the_bench_runs_and_prints_its_line[api]"
    second = f"{BENCHES}::test_the_bench_runs_and_prints_its_line[gas]"

    assert (unit_of(first), unit_of(second)) == (first, second)


def test_the_files_that_share_a_costly_process_stay_one_unit() -> None:
    assert unit_of("tests/clients/test_python_client.py::test_a") == "invoicing dev"
    assert unit_of("tests/acceptance/test_js_client.py::test_a") == "invoicing dev"
    assert unit_of("tests/integration/test_woocommerce_plugin.py::test_a") == "invoicing dev"
    assert unit_of("tests/browser/test_dashboard.py::test_a") == "chromium"
    assert unit_of("tests/chaos/test_chain_cut.py::test_a") == "chaos topology"
    assert unit_of("tests/unit/test_fees.py::test_a[1]") == "tests/unit/test_fees.py"


def test_the_medusa_suite_is_a_unit_of_its_own() -> None:
    assert unit_of(f"{MEDUSA}::test_the_medusa_provider_suite") == MEDUSA


def test_the_longest_units_start_first_then_the_slow_ones_then_the_rest() -> None:
    units = [
        "tests/unit/test_fees.py",
        "tests/integration/test_refunds.py",
        "chromium",
        "invoicing dev",
        "tests/acceptance/test_cli.py",
        "chaos topology",
        MEDUSA,
    ]
    slow = {"tests/integration/test_refunds.py", "tests/acceptance/test_cli.py", "chromium"}

    assert sorted(units, key=lambda unit: rank(unit, slow)) == [
        MEDUSA,
        "chaos topology",
        "invoicing dev",
        "chromium",
        "tests/integration/test_refunds.py",
        "tests/acceptance/test_cli.py",
        "tests/unit/test_fees.py",
    ]
    assert LONGEST_FIRST[0] == MEDUSA
