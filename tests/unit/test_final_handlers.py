"""What a final relayer transaction means is registered by the module that sends it
(``settlement.finality``): a fresh process that runs only the workers must know it too."""

from __future__ import annotations

import subprocess
import sys

from invoicing.tables.settlement import TxPurpose

PURPOSES = (TxPurpose.WITHDRAW, TxPurpose.SET_FEE, TxPurpose.SET_PAYOUT, TxPurpose.REFUND)
# As ``invoicing worker`` starts them: the workers module, then the loops it runs.
WORKER_PROCESS = f"""
from invoicing.settlement.finality import handler_of
from invoicing.workers import all_workers
all_workers()
print(" ".join(p for p in {PURPOSES!r} if handler_of(p) is not None))
"""


def test_a_process_running_only_the_workers_settles_withdrawals_and_refunds() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", WORKER_PROCESS], capture_output=True, text=True, check=True
    )

    # The owner's settings need nothing once final: the factory holds them.
    assert ran.stdout.split() == [TxPurpose.WITHDRAW, TxPurpose.REFUND]
