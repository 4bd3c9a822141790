"""The child process that decodes one logo: ``python -m invoicing.brand.logo_child CPU_S
MEMORY_BYTES``, the file on stdin (``brand.logo_process`` starts it).

It lowers its own limits before reading a byte: ``RLIMIT_CPU`` (the kernel sends SIGXCPU at
``CPU_S`` seconds of CPU and SIGKILL a second later), ``RLIMIT_AS`` (an allocation past
``MEMORY_BYTES`` of address space fails) and no core file. Then it writes to stdout the PNG
(exit 0) or the refusal as ``reason`` and message on two lines (exit ``REFUSED_EXIT``).
"""

from __future__ import annotations

import resource
import sys

from invoicing.brand.logo import LogoProblem, reencode_logo

REFUSED_EXIT = 3
OUT_OF_MEMORY_EXIT = 4


def lower_limit(which: int, soft: int, hard: int) -> None:
    """Set a limit, never above the hard limit this process already has."""
    _, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def main(argv: list[str]) -> int:
    cpu_s, memory_bytes = int(argv[1]), int(argv[2])
    lower_limit(resource.RLIMIT_CORE, 0, 0)
    lower_limit(resource.RLIMIT_CPU, cpu_s, cpu_s + 1)
    lower_limit(resource.RLIMIT_AS, memory_bytes, memory_bytes)
    data = sys.stdin.buffer.read()
    try:
        png = reencode_logo(data)
    except LogoProblem as problem:
        sys.stdout.buffer.write(f"{problem.reason}\n{problem}".encode())
        return REFUSED_EXIT
    except MemoryError:
        return OUT_OF_MEMORY_EXIT
    sys.stdout.buffer.write(png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
