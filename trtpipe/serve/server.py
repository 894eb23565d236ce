"""`trtpipe serve`: runners behind the KServe v2 protocol, in this process or in Triton Inference Server.

`--stack direct` (serve_direct): the fronts below answer what they accept with the runners in this
process (direct.py); no Triton is started. `--stack triton`, the rest of this docstring:
The models are written as `trtpipe triton` writes them for the Python backend (python_model.py runs
trtpipe's runner in Triton's stub, one per instance) into a temporary repository, and the Triton
server nvidia-pytriton bundles serves it: no proxy between Triton and the runner, and each request
of a dynamic batch gets its own answer or its own error. Metrics are Triton's; HTTP and gRPC go
through fronts (guard.py, grpc_guard.py) that refuse requests the model cannot take before Triton
2.51's frontends allocate for them, and Triton itself listens on loopback ports of its own. Triton answers health (/v2/health/ready) and metrics
(:metrics_port/metrics), and checks shapes, dtypes, batch limits and model names.

SIGTERM or SIGINT stops it gracefully: Triton is stopped first and finishes the requests it holds
(queued or running), answered through the fronts; then the fronts stop.
"""

from __future__ import annotations

import contextlib
import itertools
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
    lone_threads: int = 0  # direct stack, ONNX: one more runner of this many threads, for a request alone (direct.Batcher)
    start_timeout_s: float = 300.0  # loading the models included
    stack: str = "triton"  # "triton": Triton and its Python stub run the models; "direct": the fronts do (direct.py)


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
    from trtpipe.serve.grpc_guard import GrpcGuard
    from trtpipe.serve.guard import Guard

    if len({options.http_port, options.grpc_port, options.metrics_port}) != 3:
        raise TrtpipeError("--http-port, --grpc-port and --metrics-port must differ")
    bind = "127.0.0.1" if options.host == "localhost" else options.host
    for port, flag in ((options.http_port, "--http-port"), (options.grpc_port, "--grpc-port"),
                       (options.metrics_port, "--metrics-port")):
        check_port(port, flag, bind)
    stop = stop or threading.Event()
    if options.stack == "direct":
        serve_direct(models, options, bind, on_ready, stop)
        return
    require("pytriton", "serve", "serving on Triton")
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    root = Path(tempfile.mkdtemp(prefix="trtpipe-serve-"))
    log = None if options.verbose else root / "triton.log"
    process = guard = grpc_guard = None
    try:
        repository = write_served(root, models, options)
        binary = install_server(root)
        upstream, grpc_upstream = free_port(), free_port()
        while grpc_upstream == upstream:
            grpc_upstream = free_port()
        endpoints = Endpoints("127.0.0.1", upstream, "127.0.0.1", grpc_upstream, bind, options.metrics_port)
        process = start_server(binary, repository, endpoints, log, options.verbose)
        if not wait_ready(process, upstream, options.start_timeout_s):
            why = cause_in(log) or ("it exited" if process.poll() is not None else "not ready in time")
            raise TrtpipeError(f"Triton did not start ({why}); rerun with --verbose to see its log")
        limits = {m.name: m.limits() for m in models}
        guard = Guard(bind, options.http_port, upstream, limits)
        threading.Thread(target=guard.serve_forever, name="http-guard", daemon=True).start()
        grpc_guard = GrpcGuard(bind, options.grpc_port, grpc_upstream, limits)
        grpc_guard.start()
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
            _stop(process)  # Triton drains the requests it holds before it exits, answered through the fronts
        if grpc_guard is not None:
            grpc_guard.stop()
        if guard is not None:
            guard.shutdown()
            guard.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(root, ignore_errors=True)


def open_runners(model: ServedModel, options: ServerOptions) -> tuple[list, object | None]:
    """Return `options.instances` runners of `model`, opened as an instance of the Python-backend model opens them,
    and for an ONNX model with `options.lone_threads` the runner of that many threads for a request alone (else None)."""
    if model.kind == "engine":
        from trtpipe.runtime import Engine

        return [Engine(model.path) for _ in range(options.instances)], None
    from trtpipe.runtime import OnnxRunner

    # Not spinning, as in the stub: the intra-op threads share the cores with the fronts' threads.
    runners = [OnnxRunner(model.path, threads=options.threads, spin=False) for _ in range(options.instances)]
    return runners, OnnxRunner(model.path, threads=options.lone_threads, spin=False) if options.lone_threads else None


def serve_direct(models: Sequence[ServedModel], options: ServerOptions, bind: str, on_ready: Callable[[], None] | None,
                 stop: threading.Event) -> None:
    """Serve `models` with the runners in this process until `stop` is set; in flight requests are answered first."""
    require("tritonclient", "serve", "serving")
    from trtpipe.serve.direct import DirectModels, MetricsServer
    from trtpipe.serve.grpc_guard import GrpcGuard
    from trtpipe.serve.guard import Guard

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    runners: dict[str, list] = {}
    lone: dict[str, object | None] = {}
    servers: list = []
    direct = grpc_guard = None
    try:
        texts = {}
        for model in models:
            repo_options = RepositoryOptions(model.max_batch or None, True, options.max_queue_delay_us, options.instances,
                                             "gpu" if model.kind == "engine" else "cpu", options.threads, served_file=True)
            texts[model.name] = config_text(model, "python", repo_options, version_files(model))
            runners[model.name], lone[model.name] = open_runners(model, options)
        direct = DirectModels(models, runners, texts, options.max_queue_delay_us, lone)
        limits = direct.limits()
        for make in (lambda: Guard(bind, options.http_port, None, limits, answer=direct.http_answer),
                     lambda: MetricsServer(bind, options.metrics_port, direct)):
            server = make()
            servers.append(server)
            threading.Thread(target=server.serve_forever, name=type(server).__name__, daemon=True).start()
        grpc_guard = GrpcGuard(bind, options.grpc_port, None, limits, local=direct)
        grpc_guard.start()
        if on_ready:
            on_ready()
        stop.wait()
    finally:
        if direct is not None:
            direct.flush()  # what the batchers hold runs now, without waiting for fuller batches
            direct.wait_idle(EXIT_TIMEOUT_S)
        if servers:
            servers[0].wait_answered(EXIT_TIMEOUT_S)  # HTTP answers written before the process exits
        if grpc_guard is not None:
            grpc_guard.stop()
        for server in servers:
            server.shutdown()
            server.server_close()
        for runner in [*itertools.chain(*runners.values()), *filter(None, lone.values())]:
            runner.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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
