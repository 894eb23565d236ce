"""A `trtpipe serve` subprocess on free 127.0.0.1 ports, stopped (and its Triton with it) when done."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from trtpipe.serve.environment import free_port

START_TIMEOUT_S = 240  # a loaded 2-core machine; Triton starts in 5-15 s when idle
STOP_TIMEOUT_S = 90


def needs_pytriton():
    import importlib.util

    return pytest.mark.skipif(importlib.util.find_spec("pytriton") is None or importlib.util.find_spec("tritonclient") is None,
                              reason="nvidia-pytriton and tritonclient are not installed: pip install 'trtpipe[serve]'")


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
    pytest.fail(f"trtpipe serve did not become ready:\n{server.output[-3000:]}")


def stub_environment() -> dict[str, str]:
    """Return the environment Triton's Python stub gets from trtpipe (prepare_environment), with this
    checkout on the stub's path: the stub imports trtpipe.runtime from here, whatever is installed."""
    from trtpipe.serve import environment

    saved = dict(os.environ)
    try:
        environment.prepare_environment()
        env = dict(os.environ)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    checkout = str(Path(__file__).resolve().parents[2])
    env[environment.STUB_SITE_VARIABLE] = os.pathsep.join(p for p in (env.get(environment.STUB_SITE_VARIABLE), checkout) if p)
    return env


def bundled_triton(root: Path, repository: Path, log: Path) -> tuple[subprocess.Popen, int, int]:
    """Start the Triton server inside nvidia-pytriton on `repository` (as a deployment would run it);
    return the process, its HTTP port and its metrics port once the server is ready."""
    import shutil
    import urllib.request

    import pytriton

    dist = Path(pytriton.__file__).parent / "tritonserver"
    server = root / "tritonserver"
    shutil.copytree(dist, server, ignore=shutil.ignore_patterns("python_backend_stubs"))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    shutil.copy(dist / "python_backend_stubs" / version / "triton_python_backend_stub", server / "backends" / "python")
    env = stub_environment()
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (env.get("LD_LIBRARY_PATH"),
                                                         str(dist.parent.parent / "nvidia_pytriton.libs")) if p)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # the stub finds its Python here
    http, grpc, metrics = free_port(), free_port(), free_port()
    command = [server / "bin" / "tritonserver", "--model-repository", repository, "--backend-directory",
               server / "backends", "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1",
               "--http-port", http, "--grpc-port", grpc, "--metrics-port", metrics, "--allow-gpu-metrics", "false"]
    with open(log, "wb") as out:
        process = subprocess.Popen(list(map(str, command)), stdout=out, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/health/ready",
                                                                  timeout=5) as response:
            if response.status == 200:
                return process, http, metrics
        time.sleep(0.25)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    from trtpipe.serve.triton_log import cause_in

    pytest.fail(f"tritonserver did not become ready: {cause_in(log)}\n{log.read_text(errors='replace')[-3000:]}")
