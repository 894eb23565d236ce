"""`trtpipe serve`: runners behind Triton Inference Server, through PyTriton.

PyTriton starts the Triton server bundled in nvidia-pytriton and proxies every (dynamically batched)
request to a Python callable in this process; here each callable owns one runner, so `instances`
callables run side by side (an Engine takes one call at a time). Triton answers HTTP, gRPC, health
(/v2/health/ready) and metrics (:metrics_port/metrics), and checks shapes, dtypes, batch limits and
model names before a request reaches a runner.

SIGTERM or SIGINT stops it gracefully: Triton is stopped first and finishes the requests it holds
(queued or running) while the runners still answer; then the runners close.
"""

from __future__ import annotations

import logging
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trtpipe.errors import TrtpipeError, require
from trtpipe.runtime.runner import Runner
from trtpipe.serve.environment import check_port, prepare_environment
from trtpipe.serve.models import ServedModel

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


def infer_function(runner: Runner, model: ServedModel) -> Callable:
    """Return the callable PyTriton runs for one instance: a batch of requests in, the runner's outputs out."""
    from pytriton.decorators import batch

    names = [o.name for o in model.outputs]

    def infer(**inputs: np.ndarray) -> dict[str, np.ndarray]:
        outputs = runner.infer(inputs)
        return {name: np.asarray(outputs[name]) for name in names}

    return batch(infer) if model.max_batch else _unbatched(infer)


def _unbatched(infer: Callable) -> Callable:
    """Run a model without a batch dimension once per request (PyTriton hands over a list of requests)."""

    def run(requests):
        return [infer(**request) for request in requests]

    return run


def _tensors(specs, model: ServedModel):
    from pytriton.model_config import Tensor

    return [Tensor(name=s.name, dtype=np.dtype(s.dtype), shape=model.dims(s)) for s in specs]


def _set_parameters(triton, model: ServedModel) -> None:
    """Put trtpipe's facts (file, precision, simulated) into the model's config parameters.

    PyTriton's public API has no config parameters; its model keeps the TritonModelConfig it writes
    into config.pbtxt, made once on first use, so adding to that object here puts them there
    (nvidia-pytriton is pinned at 0.7.0, where this holds).
    """
    for bound in triton._model_manager.models:  # private: see the docstring
        if bound.model_name == model.name:
            bound._get_triton_model_config().backend_parameters.update(model.parameters())


def _last_error(log: Path | None) -> str | None:
    """Return the last error line Triton logged (E... lines), without its prefix, or None."""
    if log is None or not log.is_file():
        return None
    errors = [line for line in log.read_text(errors="replace").splitlines()
              if line.startswith("E") and "CudaDriverHelper" not in line and "modification time" not in line]
    return errors[-1].split("] ", 1)[-1].strip('"')[:300] if errors else None


def serve(models: Sequence[ServedModel], runners: dict[str, list[Runner]], options: ServerOptions,
          on_ready: Callable[[], None] | None = None, stop: threading.Event | None = None) -> None:
    """Serve `models`, each with its instances' runners, until SIGTERM/SIGINT (or `stop` is set)."""
    if len({options.http_port, options.grpc_port, options.metrics_port}) != 3:
        raise TrtpipeError("--http-port, --grpc-port and --metrics-port must differ")
    for port, flag in ((options.http_port, "--http-port"), (options.grpc_port, "--grpc-port"),
                       (options.metrics_port, "--metrics-port")):
        check_port(port, flag, "127.0.0.1" if options.host == "localhost" else options.host)
    require("pytriton", "serve", "serving on Triton")
    prepare_environment()
    if not options.verbose:
        logging.getLogger("pytriton").setLevel(logging.WARNING)
    from pytriton.model_config import DynamicBatcher, ModelConfig
    from pytriton.triton import Triton, TritonConfig

    # Triton logs to this process's stdout unless given a file; the file is kept for the error message.
    log = None if options.verbose else Path(tempfile.mkdtemp(prefix="trtpipe-triton-")) / "triton.log"
    config = TritonConfig(http_address=options.host, http_port=options.http_port, grpc_address=options.host,
                          grpc_port=options.grpc_port, metrics_port=options.metrics_port, log_file=log,
                          log_verbose=1 if options.verbose else 0, exit_timeout_secs=60, allow_gpu_metrics=False)
    stop = stop or threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    triton = Triton(config=config)
    try:
        for model in models:
            batcher = DynamicBatcher(max_queue_delay_microseconds=options.max_queue_delay_us)
            triton.bind(model_name=model.name, infer_func=[infer_function(r, model) for r in runners[model.name]],
                        inputs=_tensors(model.inputs, model), outputs=_tensors(model.outputs, model),
                        config=ModelConfig(batching=bool(model.max_batch), max_batch_size=model.max_batch,
                                           batcher=batcher), strict=True)
            _set_parameters(triton, model)
        try:
            triton.run()
        except Exception as exc:  # noqa: BLE001 - PyTriton raises bare exceptions when Triton does not start
            why = _last_error(log) or (str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            raise TrtpipeError(f"Triton did not start ({why}); rerun with --verbose to see its log") from None
        if on_ready:
            on_ready()
        while not stop.wait(timeout=1.0):
            if not triton.is_alive():
                raise TrtpipeError(f"Triton stopped by itself ({_last_error(log) or 'no error logged'}); "
                                   "rerun with --verbose to see its log")
    finally:
        triton.stop()  # Triton drains the requests it holds before it exits; then the proxies stop
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if log is not None:
            shutil.rmtree(log.parent, ignore_errors=True)
