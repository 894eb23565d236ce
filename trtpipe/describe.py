"""What `trtpipe inspect` shows: an engine's sidecar, an ONNX's ops and types, a cache's entries."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from trtpipe.errors import TrtpipeError
from trtpipe.files import sidecar_path
from trtpipe.graph import onnxio


def describe(path: str | os.PathLike) -> dict:
    """Return a JSON-able description of an engine, an ONNX model or a calibration cache."""
    path = Path(path)
    if not path.exists():
        raise TrtpipeError(f"{path}: no such file")
    if path.suffix == ".engine" or (sidecar_path(path).is_file() and path.suffix != ".onnx"):
        from trtpipe.runtime.sidecar import read_sidecar

        return {"kind": "engine", "path": str(path), "size_bytes": path.stat().st_size, **read_sidecar(path).to_json()}
    if path.suffix == ".onnx":
        return describe_onnx(path)
    from calibrators.cache import CacheError, read_cache

    try:
        table = read_cache(path)
    except CacheError as exc:
        raise TrtpipeError(f"{exc}; inspect takes an .engine, an .onnx or a calibration cache") from None
    return {"kind": "calibration cache", "path": str(path), "header": table.header, "entries": len(table.amax),
            "amax": table.amax}


def describe_onnx(path: Path) -> dict:
    from onnx import TensorProto

    from trtpipe.graph.typed import kept_nodes

    model = onnxio.load(path)
    types = onnxio.tensor_types(model)
    ops = Counter(node.op_type for node in model.graph.node)
    ops_by_dtype: Counter = Counter()
    for node in model.graph.node:
        out = types.get(node.output[0]) if node.output else None
        ops_by_dtype[f"{node.op_type}:{TensorProto.DataType.Name(out) if out else '?'}"] += 1
    dtypes = Counter(TensorProto.DataType.Name(t) for t in types.values())

    def io(values):
        return [{"name": v.name, "dtype": TensorProto.DataType.Name(v.type.tensor_type.elem_type),
                 "shape": [d.dim_value if d.HasField("dim_value") else (d.dim_param or -1) for d in v.type.tensor_type.shape.dim]}
                for v in values]

    initializers = {i.name for i in model.graph.initializer}
    kept = kept_nodes(model)
    return {
        "kind": "onnx", "path": str(path), "opset": onnxio.opset(model), "ir_version": model.ir_version,
        "nodes": len(model.graph.node), "qdq_pairs": ops.get("QuantizeLinear", 0),
        "dequantize_nodes": ops.get("DequantizeLinear", 0),
        "inputs": io(v for v in model.graph.input if v.name not in initializers), "outputs": io(model.graph.output),
        "ops": dict(ops.most_common()), "ops_by_output_dtype": dict(sorted(ops_by_dtype.items())),
        "tensor_dtypes": dict(dtypes.most_common()),
        **({"kept_fp32": kept} if kept else {}),
    }


def render(description: dict) -> str:
    """Return the description as indented text for a terminal."""
    lines = []

    def emit(key, value, depth=0):
        pad = "  " * depth
        if isinstance(value, dict):
            lines.append(f"{pad}{key}:")
            for k, v in value.items():
                emit(k, v, depth + 1)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            lines.append(f"{pad}{key}:")
            for item in value:
                lines.append(f"{pad}  - " + ", ".join(f"{k}={v}" for k, v in item.items()))
        else:
            lines.append(f"{pad}{key}: {value}")

    for key, value in description.items():
        emit(key, value)
    return "\n".join(lines)
