"""A candidate file (an engine, or an ONNX model) described as a model Triton serves.

Triton takes dims without the batch dimension when a model batches, and a `max_batch_size` no larger
than what every input can take on its first dimension. Engines say both in their sidecar (the
optimization profile), so describing an engine needs neither TensorRT nor a GPU; an ONNX model
batches up to --max-batch (default 64) when its first dimension is dynamic.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from trtpipe.errors import TrtpipeError
from trtpipe.runtime.runner import IOSpec, Runner
from trtpipe.serve.limits import RequestLimits, request_limits

DEFAULT_ONNX_MAX_BATCH = 64
ENGINE_SUFFIX = ".engine"


@dataclass(frozen=True)
class ServedModel:
    """What Triton is told of one model, and how to open a runner for it."""

    name: str
    path: Path
    kind: str  # "engine" or "onnx"
    precision: str
    simulated: bool  # a typed ONNX standing in for its engine
    max_batch: int  # 0: the model does not batch (its first dimension is fixed)
    inputs: tuple[IOSpec, ...]
    outputs: tuple[IOSpec, ...]
    runner: str = ""  # what runs it: "ONNX Runtime CPUExecutionProvider", "tensorrt-rtx 1.7.1"
    engines: dict[str, Path] = field(default_factory=dict)  # compute capability -> engine (repositories)
    maxima: dict[str, tuple[int, ...]] = field(default_factory=dict)  # input -> the profile's maximum shape (engines)

    def dims(self, spec: IOSpec) -> tuple[int, ...]:
        """Return the dims Triton is given for `spec`: without the batch dimension when the model batches."""
        return tuple(spec.shape[1:]) if self.max_batch else tuple(spec.shape)

    def limits(self) -> RequestLimits:
        """Return the largest request this model takes (shapes, batch, bytes)."""
        return request_limits(self.name, [(s.name, s.dtype, s.shape) for s in self.inputs], self.max_batch, self.maxima)

    def parameters(self) -> dict[str, str]:
        """Return the config parameters that tell a client what it is talking to."""
        return {"trtpipe.file": str(self.path.resolve()), "trtpipe.kind": self.kind, "trtpipe.precision": self.precision,
                "trtpipe.simulated": "true" if self.simulated else "false", "trtpipe.runner": self.runner}


# Triton names a model by its directory in the repository: a name must be one directory, and safe in a URL.
MODEL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


def model_name(path: str | os.PathLike) -> str:
    """Return a Triton model name for a file: digits.int8.sm89.engine -> digits_int8, digits.onnx -> digits."""
    stem = Path(path).name
    for suffix in (ENGINE_SUFFIX, ".onnx"):
        stem = stem.removesuffix(suffix)
    stem = re.sub(r"\.sm\d+$", "", stem)
    name = re.sub(r"[^A-Za-z0-9_-]", "_", stem).lstrip("-")[:200]
    if not re.search(r"[A-Za-z0-9]", name):
        raise TrtpipeError(f"{path}: its file name makes no model name; pass --name NAME (letters, digits, '_', '-')")
    return name


def check_model_name(name: str, flag: str = "--name") -> str:
    """Return `name` when Triton can serve a model of that name from its own directory, else raise naming `flag`."""
    if not MODEL_NAME.fullmatch(name) or len(name) > 200:
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", name).lstrip("-")[:200]
        hint = f" (e.g. {flag} {safe})" if re.search(r"[A-Za-z0-9]", safe) else ""
        raise TrtpipeError(f"{flag} {name!r}: a model name is letters, digits, '_' and '-', not starting with '-', "
                           f"up to 200 characters (it names a directory of the repository){hint}")
    return name


def _max_batch(name: str, specs: list[IOSpec], limit: int | None, given: int | None, why: str) -> int:
    """Return the batch limit: 0 when some tensor's first dimension is fixed, else `given` or `limit`."""
    if any(not s.shape or s.shape[0] != -1 for s in specs):
        return 0  # a fixed first dimension: served as it is, whatever --max-batch says (it names the others)
    if given is not None and given < 1:
        raise TrtpipeError(f"--max-batch {given}: must be at least 1")
    if given is not None and limit is not None and given > limit:
        raise TrtpipeError(f"--max-batch {given}: {name} takes at most {limit} ({why}); "
                           f"pass --max-batch {limit} or less, or rebuild with a larger profile")
    return given or limit or DEFAULT_ONNX_MAX_BATCH


def describe_engine(path: str | os.PathLike, max_batch: int | None = None, name: str | None = None) -> ServedModel:
    """Return the ServedModel of an engine from its sidecar alone (no TensorRT, no GPU), once the engine
    file is checked against it: `triton` copies the file into a repository, where a truncated plan
    would fail only when Triton loads it."""
    from trtpipe.runtime.sidecar import verify_engine

    path = Path(path)
    info = verify_engine(path)
    inputs = tuple(IOSpec(t.name, t.dtype, tuple(t.shape)) for t in info.inputs)
    outputs = tuple(IOSpec(t.name, t.dtype, tuple(t.shape)) for t in info.outputs)
    profile_max = [t.profile[2][0] for t in info.inputs if t.profile]
    limit = min(profile_max) if profile_max else None
    batch = _max_batch(path.name, list(inputs + outputs), limit, max_batch, "the smallest profile maximum of dimension 0")
    maxima = {t.name: tuple(t.profile[2]) for t in info.inputs if t.profile}
    return ServedModel(name or model_name(path), path, "engine", info.precision, False, batch, inputs, outputs,
                       f"{info.backend} {info.backend_version}", {info.compute_capability: path}, maxima)


def describe_runner(path: Path, runner: Runner, max_batch: int | None = None, name: str | None = None) -> ServedModel:
    """Return the ServedModel of an ONNX model from its open runner."""
    batch = _max_batch(path.name, list(runner.inputs + runner.outputs), None, max_batch, "")
    precision = getattr(runner, "precision", "fp32")
    # Served, an FP32 ONNX is the model itself; a typed one stands in for the engine it builds.
    return ServedModel(name or model_name(path), path, "onnx", precision, precision != "fp32", batch,
                       tuple(runner.inputs), tuple(runner.outputs), f"ONNX Runtime {getattr(runner, 'provider', '')}".strip())


def open_runner(path: str | os.PathLike, threads: int | None = None) -> Runner:
    """Return the runner of a candidate: Engine for .engine files (on this GPU), OnnxRunner for ONNX."""
    path = Path(path)
    if not path.is_file():
        raise TrtpipeError(f"{path}: no such file; pass an engine (.engine) or an ONNX model (.onnx)")
    if path.suffix == ENGINE_SUFFIX:
        from trtpipe.runtime import Engine

        try:
            return Engine(path)
        except TrtpipeError as exc:
            if "no usable CUDA GPU" in str(exc) or "pycuda" in str(exc):
                raise TrtpipeError(f"{path}: engines are served on a GPU and this machine has none usable ({exc}); "
                                   "serve the typed ONNX beside it instead, which simulates the engine on the CPU") from None
            raise
    if path.suffix != ".onnx":
        raise TrtpipeError(f"{path}: not an engine (.engine) or an ONNX model (.onnx)")
    from trtpipe.runtime import OnnxRunner

    return OnnxRunner(path, threads=threads)


def describe(path: str | os.PathLike, runner: Runner, max_batch: int | None = None, name: str | None = None) -> ServedModel:
    """Return the ServedModel of a candidate whose runner is open."""
    path = Path(path)
    if path.suffix == ENGINE_SUFFIX:
        return describe_engine(path, max_batch, name)
    return describe_runner(path, runner, max_batch, name)
