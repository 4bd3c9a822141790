"""Decoding a logo in a child process, never on the event loop (docs/security.md#logos).

Pillow decodes synchronously, and a 128 KiB file can ask it for seconds of CPU (see
``brand.logo``). A thread would still hold the GIL through parts of it and could not be
stopped, so each upload starts its own child, ``python -m invoicing.brand.logo_child``
(Python and Pillow, nothing else of the service: 60 to 90 ms of CPU, once per upload), which:

- runs under ``RLIMIT_CPU`` of ``LIMITS.cpu_s`` and ``RLIMIT_AS`` of ``LIMITS.memory_bytes``
  (set by the child on itself before it reads the file);
- is killed by this process past ``LIMITS.wall_s``, or when the request is cancelled;
- gets only the file on stdin, an environment of nothing but ``PYTHONPATH`` (no setting,
  no secret) and no other descriptor (``close_fds``).

The API awaits it like any I/O. At most ``LIMITS.at_once`` decodes run at once in one API
process; one more is refused at once with ``DecodersBusy`` (the API's 429 ``rate_limited``),
rather than queued behind slow ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from invoicing.brand import logo_child
from invoicing.brand.logo import UNDECODABLE, LogoProblem

log = logging.getLogger(__name__)

CHILD_MODULE = logo_child.__name__


@dataclass(frozen=True)
class DecodeLimits:
    """What one logo's decoding may take."""

    cpu_s: int = 2
    wall_s: float = 5.0
    memory_bytes: int = 256 * 1024 * 1024  # a 2,048-pixel WebP peaks near 100 MiB
    at_once: int = 2


LIMITS = DecodeLimits()


class DecodersBusy(Exception):
    """Every decoding slot of this process is taken: retry in a moment."""


class _Slots:
    """How many decodes this process runs now (the event loop's thread only: no lock)."""

    def __init__(self) -> None:
        self.taken = 0

    @contextlib.contextmanager
    def one(self, at_once: int) -> Iterator[None]:
        if self.taken >= at_once:
            raise DecodersBusy(f"{at_once} logos are being decoded already")
        self.taken += 1
        try:
            yield
        finally:
            self.taken -= 1


_slots = _Slots()


async def reencoded_in_child(data: bytes, limits: DecodeLimits | None = None) -> bytes:
    """``logo.reencode_logo(data)``, computed by a child process within ``limits``
    (``LIMITS`` by default); LogoProblem when refused or past a limit."""
    limits = limits or LIMITS
    with _slots.one(limits.at_once):
        returncode, out, err = await _run_child(data, limits)
    if returncode == 0:
        return out
    if returncode == logo_child.REFUSED_EXIT:
        reason, _, message = out.decode().partition("\n")
        raise LogoProblem(message, reason)
    if returncode == logo_child.OUT_OF_MEMORY_EXIT:
        mib = limits.memory_bytes // (1024 * 1024)
        raise LogoProblem(f"needs more than {mib} MiB to decode", "decode_memory")
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise LogoProblem(f"took more than {limits.cpu_s} s of CPU to decode", "decode_time")
    log.warning("the logo decoder exited with %s: %s", returncode, err[-2000:].decode("replace"))
    raise LogoProblem(UNDECODABLE, "undecodable")


async def _run_child(data: bytes, limits: DecodeLimits) -> tuple[int, bytes, bytes]:
    """The child's exit code, stdout and stderr; LogoProblem once it ran past ``wall_s``."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        CHILD_MODULE,
        str(limits.cpu_s),
        str(limits.memory_bytes),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        out, err = await asyncio.wait_for(child.communicate(data), limits.wall_s)
    except TimeoutError:
        raise LogoProblem(f"took more than {limits.wall_s:g} s to decode", "decode_time") from None
    finally:
        if child.returncode is None:  # past the wall time, or the request was cancelled
            child.kill()
            await child.wait()
    assert child.returncode is not None
    return child.returncode, out, err
