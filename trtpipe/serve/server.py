"""`trtpipe serve`: runners behind Triton Inference Server, on a repository written for this run.

The models are written as `trtpipe triton` writes them for the Python backend (python_model.py runs
trtpipe's runner in Triton's stub, one per instance) into a temporary repository, and the Triton
server nvidia-pytriton bundles serves it: no proxy between Triton and the runner, and each request
of a dynamic batch gets its own answer or its own error. gRPC and metrics are Triton's; HTTP goes
through the guard (guard.py), which refuses requests the model cannot take before Triton 2.51's
HTTP frontend allocates for them. Triton answers health (/v2/health/ready) and metrics
(:metrics_port/metrics), and checks shapes, dtypes, batch limits and model names.

SIGTERM or SIGINT stops it gracefully: Triton is stopped first and finishes the requests it holds
(queued or running), answered through the guard; then the guard stops.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trtpipe.errors import TrtpipeError, require
from trtpipe.serve.environment import check_port, free_port
from trtpipe.serve.models import ServedModel
from trtpipe.serve.repository import RepositoryOptions, config_text, version_files, write_model
from trtpipe.serve.triton_log import cause_in
from trtpipe.serve.tritonserver import EXIT_TIMEOUT_S, Endpoints, install_server, start_server, wait_ready

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(frozen=True)
class ServerOptions:
    """Where the server listens and how it batches."""

    host: str = "127.0.0.1"  # this machine only; 0.0.0.0 (every interface) only when asked
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    max_queue_delay_us: int = 100  # how long Triton holds a request for a fuller batch
    verbose: bool = False
    instances: int = 1  # model instances, each with its own runner
    threads: int = 1  # ONNX Runtime threads per instance
    start_timeout_s: float = 300.0  # loading the models included


def default_threads(instances: int, models: int) -> int:
    """Return ONNX Runtime's threads per instance when none are given: the cores, shared by every instance."""
    return max(1, (os.cpu_count() or 1) // (instances * models))


def write_served(root: Path, models: Sequence[ServedModel], options: ServerOptions) -> Path:
    """Write the repository Triton serves `models` from (engines on the GPU, ONNX on the CPU); return it."""
    repository = root / "models"
    for model in models:
        repo_options = RepositoryOptions(model.max_batch or None, True, options.max_queue_delay_us, options.instances,
                                         "gpu" if model.kind == "engine" else "cpu", options.threads, served_file=True)
        files = version_files(model)
        write_model(repository, model, files, config_text(model, "python", repo_options, files), python=True)
    return repository


def serve(models: Sequence[ServedModel], options: ServerOptions, on_ready: Callable[[], None] | None = None,
          stop: threading.Event | None = None) -> None:
    """Serve `models` until SIGTERM/SIGINT (or `stop` is set)."""
    from trtpipe.serve.guard import Guard

    if len({options.http_port, options.grpc_port, options.metrics_port}) != 3:
        raise TrtpipeError("--http-port, --grpc-port and --metrics-port must differ")
    bind = "127.0.0.1" if options.host == "localhost" else options.host
    for port, flag in ((options.http_port, "--http-port"), (options.grpc_port, "--grpc-port"),
                       (options.metrics_port, "--metrics-port")):
        check_port(port, flag, bind)
    require("pytriton", "serve", "serving on Triton")
    stop = stop or threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    root = Path(tempfile.mkdtemp(prefix="trtpipe-serve-"))
    log = None if options.verbose else root / "triton.log"
    process = guard = None
    try:
        repository = write_served(root, models, options)
        binary = install_server(root)
        upstream = free_port()
        endpoints = Endpoints("127.0.0.1", upstream, bind, options.grpc_port, bind, options.metrics_port)
        process = start_server(binary, repository, endpoints, log, options.verbose)
        if not wait_ready(process, upstream, options.start_timeout_s):
            why = cause_in(log) or ("it exited" if process.poll() is not None else "not ready in time")
            raise TrtpipeError(f"Triton did not start ({why}); rerun with --verbose to see its log")
        guard = Guard(bind, options.http_port, upstream, {m.name: m.limits() for m in models})
        threading.Thread(target=guard.serve_forever, name="http-guard", daemon=True).start()
        if on_ready:
            on_ready()
        while not stop.wait(timeout=1.0):
            if process.poll() is not None:
                raise TrtpipeError(f"Triton stopped by itself ({cause_in(log) or 'no error logged'}); "
                                   "rerun with --verbose to see its log")
    finally:
        if guard is not None:
            guard.drain()  # no idle connection keeps Triton from exiting
        if process is not None:
            _stop(process)  # Triton drains the requests it holds before it exits, answered through the guard
        if guard is not None:
            guard.shutdown()
            guard.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(root, ignore_errors=True)


def _stop(process: subprocess.Popen) -> None:
    """Stop Triton (SIGINT: it finishes what it holds) and what it started; kill what is left after the timeout."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=EXIT_TIMEOUT_S + 30)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # stubs Triton left behind: its own session, started here
    process.wait()
