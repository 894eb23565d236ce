"""The engine sidecar (`<engine>.json`): what an engine was built from, for, and with.

It lives in the runtime package because services check it before TensorRT reads the engine;
the builder writes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from trtpipe.errors import TrtpipeError
from trtpipe.files import read_text_input, sha256, sidecar_path

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
    # INT8/FP8: the Conv/MatMul/Gemm layers left unquantized, and why: [{"node", "op", "reason"}]
    # (excluded, depthwise, under min_weights, no scale in the cache).
    unquantized_layers: list[dict] = field(default_factory=list)
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


# The JSON type each field must have; a sidecar that differs was edited or is not ours.
_FIELDS: dict[str, type | tuple[type, ...]] = {"engine": str, "backend": str, "backend_version": str, "target": str, "compute_capability": str,
           "precision": str, "onnx": str, "onnx_sha256": str, "engine_sha256": str, "cache_sha256": (str, type(None)),
           "build_seconds": (int, float), "options": dict, "tensors": list, "sidecar_version": int}
_TENSOR_FIELDS: dict[str, type | tuple[type, ...]] = {"name": str, "mode": str, "dtype": str, "shape": list, "profile": (list, type(None))}
_SHA256 = re.compile(r"[0-9a-f]{64}")


SEAL = "sidecar_sha256"  # a digest of the sidecar's other fields: a hand edit shows


def _digest(raw: dict) -> str:
    body = {k: v for k, v in raw.items() if k != SEAL}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sealed(info: EngineInfo) -> dict:
    """Return the sidecar JSON for `info` with the digest of its fields, as the builder writes it."""
    raw = info.to_json()
    return {**raw, SEAL: _digest(raw)}


def parse_sidecar(raw, path) -> EngineInfo:
    """Return the EngineInfo in the parsed JSON `raw`; raise ValueError naming the first bad field.

    A sidecar that carries a digest of its fields (every one trtpipe writes) must match it, so an
    edited sidecar is refused, not shown as it is.
    """
    if not isinstance(raw, dict):
        raise TypeError("not a JSON object")
    if SEAL in raw:
        if raw[SEAL] != _digest(raw):
            raise ValueError("edited after the build: its fields do not match their recorded digest")
        raw = {k: v for k, v in raw.items() if k != SEAL}
    unknown = sorted(set(raw) - {f.name for f in fields(EngineInfo)})  # fields added to EngineInfo later are known
    missing = sorted(k for k in _FIELDS if k not in raw and k not in ("cache_sha256", "build_seconds", "options",
                                                                       "tensors", "sidecar_version"))
    if unknown or missing:
        raise ValueError(f"unknown field '{unknown[0]}'" if unknown else f"no field '{missing[0]}'")
    for key, kind in _FIELDS.items():
        if key in raw and (not isinstance(raw[key], kind) or isinstance(raw[key], bool)):
            raise ValueError(f"field '{key}' has the wrong type")
    if raw.get("sidecar_version", SIDECAR_VERSION) != SIDECAR_VERSION:
        raise ValueError(f"sidecar_version {raw['sidecar_version']} (this trtpipe reads {SIDECAR_VERSION})")
    for key in ("onnx_sha256", "engine_sha256", "cache_sha256"):
        if raw.get(key) is not None and not _SHA256.fullmatch(raw[key]):
            raise ValueError(f"field '{key}' is not a sha256")
    if not re.fullmatch(r"\d+\.\d+", raw["compute_capability"]):
        raise ValueError("field 'compute_capability' is not MAJOR.MINOR")
    tensors = []
    for t in raw.get("tensors", []):
        if not isinstance(t, dict) or set(t) - {f.name for f in fields(TensorInfo)} or not {"name", "mode", "dtype", "shape"} <= set(t):
            raise ValueError("a tensor entry is not {name, mode, dtype, shape[, profile]}")
        for key, kind in _TENSOR_FIELDS.items():
            if key in t and not isinstance(t[key], kind):
                raise ValueError(f"tensor field '{key}' has the wrong type")
        if t["mode"] not in ("input", "output"):
            raise ValueError(f"tensor mode '{t['mode']}' is not input or output")
        dims = list(t["shape"]) + [d for s in (t.get("profile") or []) for d in (s if isinstance(s, list) else [s])]
        if not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
            raise ValueError(f"tensor '{t['name']}' has a shape that is not a list of integers")
        tensors.append(TensorInfo(**t))
    values = {k: v for k, v in raw.items() if k != "tensors"}
    return EngineInfo(**values, tensors=tensors)


def read_sidecar(engine: str | os.PathLike) -> EngineInfo:
    """Return the EngineInfo beside `engine`, or raise naming the file and the fix."""
    path = sidecar_path(engine)
    if not os.path.lexists(path):
        raise TrtpipeError(f"{path}: no sidecar beside the engine; rebuild it with 'trtpipe build'")
    text = read_text_input(path, str(path), "rebuild the engine")  # a FIFO is not waited on, nor a huge file read
    try:
        return parse_sidecar(json.loads(text), path)
    except (ValueError, TypeError, RecursionError) as exc:
        why = str(exc) if type(exc) in (ValueError, TypeError) else exc.__class__.__name__
        raise TrtpipeError(f"{path}: not a trtpipe engine sidecar ({why[:120]}); rebuild the engine") from None


def verify_engine(engine: str | os.PathLike) -> EngineInfo:
    """Return the sidecar of `engine` after checking that the engine's sha256 is the one it records.

    Every reader of an engine calls this: a truncated or replaced engine, or an engine left beside
    a sidecar from another build, is refused before anything trusts either file.
    """
    path = Path(engine)
    info = read_sidecar(path)
    if not path.is_file():
        raise TrtpipeError(f"{path}: no such engine; build it with 'trtpipe build'")
    if sha256(path) != info.engine_sha256:
        raise TrtpipeError(f"{path}: the file does not match its sidecar's sha256 (truncated, replaced or "
                           "left by an interrupted build); rebuild the engine")
    return info
