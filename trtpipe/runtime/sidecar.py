"""The engine sidecar (`<engine>.json`): what an engine was built from, for, and with.

It lives in the runtime package because services check it before TensorRT reads the engine;
the builder writes it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

from trtpipe.errors import TrtpipeError
from trtpipe.files import sidecar_path

SIDECAR_VERSION = 1


@dataclass
class TensorInfo:
    """An engine input or output: -1 marks a dynamic dimension; inputs with one carry min/opt/max."""

    name: str
    mode: str  # "input" or "output"
    dtype: str  # numpy name: float32, float16, int64, ...
    shape: list[int]
    profile: list[list[int]] | None = None  # [min, opt, max] for dynamic inputs


@dataclass
class EngineInfo:
    """The sidecar's contents."""

    engine: str
    backend: str
    backend_version: str
    target: str  # "sm89"
    compute_capability: str  # "8.9"
    precision: str
    onnx: str
    onnx_sha256: str
    engine_sha256: str
    cache_sha256: str | None = None
    build_seconds: float = 0.0
    options: dict = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)
    # Nodes the typed ONNX computes in FP32 although the engine's precision is lower, and why:
    # [{"node", "op", "reason"}] (shape computations, out-of-range constants or activations, ...).
    kept_fp32: list[dict] = field(default_factory=list)
    sidecar_version: int = SIDECAR_VERSION

    @property
    def inputs(self) -> list[TensorInfo]:
        return [t for t in self.tensors if t.mode == "input"]

    @property
    def outputs(self) -> list[TensorInfo]:
        return [t for t in self.tensors if t.mode == "output"]

    @property
    def capability(self) -> tuple[int, int]:
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    def to_json(self) -> dict:
        return asdict(self)


def read_sidecar(engine: str | os.PathLike) -> EngineInfo:
    """Return the EngineInfo beside `engine`, or raise naming the file and the fix."""
    path = sidecar_path(engine)
    try:
        raw = json.loads(path.read_text())
        tensors = [TensorInfo(**t) for t in raw.pop("tensors", [])]
        return EngineInfo(**raw, tensors=tensors)
    except FileNotFoundError:
        raise TrtpipeError(f"{path}: no sidecar beside the engine; rebuild it with 'trtpipe build'") from None
    except (OSError, ValueError, TypeError) as exc:
        raise TrtpipeError(f"{path}: not a trtpipe engine sidecar ({exc.__class__.__name__}); rebuild the engine") from None
