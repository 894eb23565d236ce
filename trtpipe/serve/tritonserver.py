"""The Triton server that nvidia-pytriton bundles (2.51 and its Python backend), run on a model repository.

PyTriton keeps the backend's stub per Python version apart from the backend; Triton looks for it
beside libtriton_python.so, so the server is copied (29 MB, as PyTriton itself does on every start)
with the stub of this interpreter in place.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from trtpipe.errors import TrtpipeError, require
from trtpipe.serve.environment import server_environment

EXIT_TIMEOUT_S = 60  # how long Triton finishes the requests it holds when stopped


@dataclass(frozen=True)
class Endpoints:
    """Where one Triton server listens."""

    http_host: str
    http_port: int
    grpc_host: str
    grpc_port: int
    metrics_host: str
    metrics_port: int


def install_server(root: Path) -> Path:
    """Copy the bundled server under `root` with this Python's stub in its Python backend; return the binary."""
    pytriton = require("pytriton", "serve", "serving on Triton")
    dist = Path(pytriton.__file__).parent / "tritonserver"
    server = root / "tritonserver"
    shutil.copytree(dist, server, ignore=shutil.ignore_patterns("python_backend_stubs", "__pycache__"))
    stub = dist / "python_backend_stubs" / f"{sys.version_info.major}.{sys.version_info.minor}" / "triton_python_backend_stub"
    if not stub.is_file():
        raise TrtpipeError(f"nvidia-pytriton has no Triton Python-backend stub for Python "
                           f"{sys.version_info.major}.{sys.version_info.minor}; serve from Python 3.8-3.13")
    shutil.copy(stub, server / "backends" / "python")
    return server / "bin" / "tritonserver"


def start_server(binary: Path, repository: Path, endpoints: Endpoints, log: Path | None,
                 verbose: bool = False) -> subprocess.Popen:
    """Start Triton on `repository`; its output goes to `log` (None: this process's own)."""
    command = [binary, "--model-repository", repository, "--backend-directory", binary.parents[1] / "backends",
               "--http-address", endpoints.http_host, "--http-port", endpoints.http_port,
               "--grpc-address", endpoints.grpc_host, "--grpc-port", endpoints.grpc_port,
               "--metrics-address", endpoints.metrics_host, "--metrics-port", endpoints.metrics_port,
               "--allow-gpu-metrics", "false", "--exit-timeout-secs", EXIT_TIMEOUT_S,
               "--log-verbose", 1 if verbose else 0, "--strict-readiness", "true"]
    out = open(log, "wb") if log is not None else None  # noqa: SIM115 - the child holds it, closed below
    try:
        return subprocess.Popen(list(map(str, command)), stdout=out, stderr=subprocess.STDOUT if out else None,
                                env=server_environment(), start_new_session=True)
    finally:
        if out is not None:
            out.close()


def wait_ready(process: subprocess.Popen, http_port: int, timeout_s: float) -> bool:
    """Return True once Triton says ready on 127.0.0.1:`http_port`, False when it exits or the time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/health/ready",
                                                                  timeout=5) as response:
            if response.status == 200:
                return True
        time.sleep(0.1)
    return False

