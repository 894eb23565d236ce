"""ONNX Runtime sessions over a ModelProto: the one place trtpipe creates them.

The passes run graphs to check and decide (cleanup's optimizer and its before/after check,
control's If conditions, calibration's exposed activations, the auto method's one-layer models),
and trtpipe.runtime.onnxrt runs baselines and typed graphs; all of them ask `session` here, so
logging, provider options and load errors are decided once.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import Sequence
from typing import Any

from trtpipe.errors import TrtpipeError, first_line, require

CPU = ("CPUExecutionProvider",)
# ONNX Runtime's GraphOptimizationLevel by the names callers use.
OPTIMIZATION = {"none": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "all": "ORT_ENABLE_ALL"}
# ONNX Runtime's log severity: fatal only. Its warnings (unused initializers) are noise here, and an error it
# logs it also raises, which trtpipe reports as its one line: the log was a second, coloured line beside it.
QUIET = 4


def ort_reason(exc: BaseException, limit: int = 300) -> str:
    """Return ONNX Runtime's error as one short line: its first, without the status prefix, the source file and
    the function ("Concat node. Name:'a': Non concat axis dimensions must match: Axis 2 has mismatched
    dimensions of 90 and 100"), where the reason came last and a cut at `limit` took it."""
    first = first_line(exc) or type(exc).__name__
    first = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", first)
    first = first.replace("Non-zero status code returned while running ", "")
    first = re.sub(r" Status Message: \S+:\d+ \w+ ", ": ", first)
    return first[:limit]


def session(model, providers: Sequence[str] = CPU, *, optimization: str = "all", threads: int | None = None,
            optimized_path: str | os.PathLike | None = None,
            disabled_optimizers: Sequence[str] = (), name: str | None = None, tf32: bool = False,
            spin: bool = True, arena: bool = True) -> Any:
    """Return an onnxruntime.InferenceSession running the ModelProto `model` on `providers`, in order.

    `optimization`: "none" runs the graph as written (typed graphs: ONNX Runtime's rewrites of Q/DQ
    compute something else than TensorRT builds), "basic" or "all" (ONNX Runtime's default).
    `threads`: intra-op threads (None: ONNX Runtime's choice). `optimized_path`: where ONNX Runtime
    writes the graph it optimized. The CUDA provider runs FP32 as FP32 unless `tf32` (its default
    TF32 rounds MatMul and Conv inputs to 10 mantissa bits). `spin=False` lets the intra-op threads
    sleep between runs instead of spin-waiting (a server's threads share the cores). `arena=False`
    gives memory back after each run (ONNX Runtime's CPU arena keeps a session's peak). A model ONNX
    Runtime refuses is a one-line TrtpipeError, naming `name` when given.
    """
    ort = require("onnxruntime", "pipeline", "running ONNX models")
    options = ort.SessionOptions()
    options.log_severity_level = QUIET
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPTIMIZATION[optimization])
    if threads:
        options.intra_op_num_threads = threads
    options.enable_cpu_mem_arena = options.enable_mem_pattern = arena
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if optimized_path is not None:
        options.optimized_model_filepath = str(optimized_path)
    chosen = [(p, {"use_tf32": "0"}) if p == "CUDAExecutionProvider" and not tf32 else p for p in providers]
    extra = {"disabled_optimizers": list(disabled_optimizers)} if disabled_optimizers else {}
    try:
        # ONNX Runtime prints its fallback from a CUDA provider that cannot start (no device visible, say)
        # to stdout, where it would corrupt `--json` output; the session's providers say where it runs.
        with contextlib.redirect_stdout(io.StringIO()):
            return ort.InferenceSession(model.SerializeToString(), options, providers=chosen, **extra)
    except Exception as exc:  # noqa: BLE001 - ONNX Runtime's load errors have no common base
        where = f"{name}: " if name else ""
        raise TrtpipeError(f"{where}ONNX Runtime cannot load the model ({ort_reason(exc)}); check it with 'trtpipe inspect'") from None
