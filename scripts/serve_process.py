"""A `trtpipe serve` process, and the bundled Triton on a repository, started on free ports and stopped
whole (its process group): for the serving tests and scripts/bench_serve.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from trtpipe.serve.environment import free_port

START_TIMEOUT_S = 240  # a loaded 2-core machine; Triton starts in 5-15 s when idle
STOP_TIMEOUT_S = 90


@dataclass
class Server:
    process: subprocess.Popen
    log: Path
    http: int
    grpc: int
    metrics: int

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM the server and wait for it; return its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.kill_group()

    def kill_group(self) -> None:
        """Kill what is left of the process group this test started (Triton, its stubs), if anything."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)


def start_server(args: list[str], log: Path, extra_env: dict | None = None) -> Server:
    """Start `trtpipe serve ARGS` on free ports; return once it says ready, or fail with its output."""
    http, grpc, metrics = free_port(), free_port(), free_port()
    while len({http, grpc, metrics}) < 3:
        grpc, metrics = free_port(), free_port()
    command = [sys.executable, "-m", "trtpipe.cli", "serve", *map(str, args), "--host", "127.0.0.1",
               "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    env = {**os.environ, **(extra_env or {})}
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = Server(process, log, http, grpc, metrics)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if "ready;" in server.output:
            return server
        if process.poll() is not None:
            break
        time.sleep(0.25)
    server.terminate(timeout=30)
    raise RuntimeError(f"trtpipe serve did not become ready:\n{server.output[-3000:]}")


def bundled_triton(root: Path, repository: Path, log: Path) -> tuple[subprocess.Popen, int, int, int]:
    """Start the Triton server inside nvidia-pytriton on `repository` (as a deployment would run it);
    return the process, its HTTP, gRPC and metrics ports once the server is ready."""
    from trtpipe.serve.tritonserver import Endpoints, install_server, start_server, wait_ready

    http, grpc, metrics = free_port(), free_port(), free_port()
    endpoints = Endpoints("127.0.0.1", http, "127.0.0.1", grpc, "127.0.0.1", metrics)
    process = start_server(install_server(root), repository, endpoints, log)
    if wait_ready(process, http, START_TIMEOUT_S):
        return process, http, grpc, metrics
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    from trtpipe.serve.triton_log import cause_in

    raise RuntimeError(f"tritonserver did not become ready: {cause_in(log)}\n{log.read_text(errors='replace')[-3000:]}")
