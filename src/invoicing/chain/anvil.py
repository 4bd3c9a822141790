"""Run a local anvil node: for ``invoicing dev``, the integration tests and the benchmarks.

The binary comes from the pinned npm package (``node_modules/@foundry-rs/anvil``), from
``INVOICING_ANVIL_BIN``, or from an explicit path::

    with AnvilProcess(block_time_s=1) as anvil:
        client = EvmClient.connect(anvil.url)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

REPO_ROOT = Path(__file__).resolve().parents[3]
ANVIL_BIN_ENV = "INVOICING_ANVIL_BIN"
DEV_CHAIN_ID = 31337
DEV_MNEMONIC = "test test test test test test test test test test test junk"
# anvil's ten default accounts for DEV_MNEMONIC (m/44'/60'/0'/0/i), each funded with 10,000 ETH.
# Public test keys: never use them anywhere real.
DEV_PRIVATE_KEYS = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
)
DEV_ADDRESSES = (
    "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
    "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
    "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
    "0x90F79bf6EB2c4f870365E785982E1f101E93b906",
    "0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65",
    "0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc",
    "0x976EA74026E726554dB657fA54763abd0C3a0aa9",
    "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955",
    "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f",
    "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720",
)
STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0


class AnvilError(RuntimeError):
    """anvil could not be found or did not come up."""


def find_anvil_binary(
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The anvil executable: ``explicit``, else ``$INVOICING_ANVIL_BIN``, else the npm package.

    The platform binary is preferred over the ``node_modules/.bin/anvil`` node wrapper so that
    stopping the process stops the node itself.
    """
    env = os.environ if env is None else env
    candidates: list[Path] = []
    if explicit is not None:
        candidates.append(Path(explicit))
    elif env.get(ANVIL_BIN_ENV):
        candidates.append(Path(env[ANVIL_BIN_ENV]))
    else:
        candidates.extend(sorted(REPO_ROOT.glob("node_modules/@foundry-rs/anvil-*/bin/anvil")))
        candidates.append(REPO_ROOT / "node_modules" / ".bin" / "anvil")
        on_path = shutil.which("anvil")
        if on_path:
            candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise AnvilError(
        f"anvil not found (tried {', '.join(map(str, candidates))}); "
        f"run `npm ci` or set {ANVIL_BIN_ENV}"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class AnvilProcess:
    """One anvil child process; ``start()`` returns once it answers ``eth_chainId``."""

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        chain_id: int = DEV_CHAIN_ID,
        block_time_s: float | None = None,
        extra_args: Sequence[str] = (),
        binary: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.chain_id = chain_id
        self.block_time_s = block_time_s
        self.extra_args = list(extra_args)
        self.binary = find_anvil_binary(binary)
        self.startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        args = [
            str(self.binary),
            "--host", self.host,
            "--port", str(self.port),
            "--chain-id", str(self.chain_id),
            "--mnemonic", DEV_MNEMONIC,
        ]  # fmt: skip
        if self.block_time_s is not None:
            args += ["--block-time", _seconds(self.block_time_s)]
        return args + self.extra_args

    def start(self) -> AnvilProcess:
        """Start anvil and wait until it answers JSON-RPC with the expected chain id."""
        if self.running:
            return self
        self._log = tempfile.NamedTemporaryFile(prefix="anvil-", suffix=".log")
        self._process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stop() reaches any children
        )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        body = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
        with httpx.Client(timeout=1.0) as http:
            while True:
                if self._process is None or self._process.poll() is not None:
                    raise AnvilError(f"anvil exited during startup:\n{self.log_tail()}")
                with contextlib.suppress(httpx.HTTPError, ValueError):
                    answer = http.post(self.url, json=body).json()
                    if int(answer["result"], 16) == self.chain_id:
                        return
                if time.monotonic() > deadline:
                    raise AnvilError(
                        f"anvil did not answer on {self.url} within {self.startup_timeout_s} s:\n"
                        f"{self.log_tail()}"
                    )
                time.sleep(0.05)

    def stop(self) -> None:
        """Terminate anvil (SIGTERM, then SIGKILL after a grace period) and drop its log."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            self._signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._signal_group(process, signal.SIGKILL)
                process.wait(timeout=STOP_TIMEOUT_S)
        if self._log is not None:
            self._log.close()
            self._log = None

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)  # the group started with start_new_session=True

    def log_tail(self, lines: int = 20) -> str:
        """The last lines anvil printed (for error messages)."""
        if self._log is None:
            return ""
        text = Path(self._log.name).read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> AnvilProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
