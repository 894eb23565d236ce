"""What `trtpipe inspect` shows: an engine's sidecar, an ONNX's ops and types, a cache's entries."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from trtpipe.errors import TrtpipeError
from trtpipe.files import read_sidecar_json, sha256
from trtpipe.graph import onnxio


def describe(path: str | os.PathLike) -> dict:
    """Return a JSON-able description of an engine, an ONNX model or a calibration cache."""
    path = Path(path)
    if not path.exists():
        raise TrtpipeError(f"{path}: no such file")
    if not path.is_file():
        raise TrtpipeError(f"{path}: not a regular file; inspect takes an .engine, an .onnx or a calibration cache")
    if path.suffix == ".engine" or _is_engine_sidecar(path):
        from trtpipe.runtime.sidecar import verify_engine

        info = verify_engine(path)  # the sha256 the sidecar records: an edited or truncated engine is refused
        return {"kind": "engine", "path": str(path), "size_bytes": path.stat().st_size, **info.to_json()}
    if path.suffix == ".onnx":
        return describe_onnx(path)
    if path.suffix == ".json":
        raise TrtpipeError(f"{path}: a JSON file; inspect takes an .engine, an .onnx or a calibration cache "
                           "(a sidecar describes the file named like it without .json)")
    return describe_cache(path)


def _is_engine_sidecar(path: Path) -> bool:
    """Return True if the sidecar beside `path` is an engine's (a cache's records calibration, not an engine)."""
    try:
        raw = read_sidecar_json(path, "a sidecar", "rebuild or recalibrate what it describes")
    except TrtpipeError:
        return False  # the reader of the kind the file is says what is wrong with it
    return raw is not None and "engine_sha256" in raw


def describe_cache(path: Path) -> dict:
    """Return a cache's header and amax, and what its sidecar (if calibrate wrote one) says it was made from."""
    from trtpipe.calibrate import cache_sidecar, sidecar_weight_steps, weight_steps_text
    from trtpipe.calibrators.cache import CacheError, read_cache

    try:
        table = read_cache(path)
    except CacheError as exc:
        raise TrtpipeError(f"{exc}; inspect takes an .engine, an .onnx or a calibration cache") from None
    description = {"kind": "calibration cache", "path": str(path), "header": table.header, "entries": len(table.amax)}
    recorded = cache_sidecar(path)
    if recorded is not None:
        if recorded.get("cache_sha256") not in (None, sha256(path)):
            raise TrtpipeError(f"{path}: the cache does not match its sidecar's sha256 (edited, or left by an "
                               "interrupted calibration); recalibrate with 'trtpipe calibrate --force'")
        options = recorded.get("options") if isinstance(recorded.get("options"), dict) else {}
        description.update({"precision": options.get("grid"), "method": options.get("method"),
                            "samples": recorded.get("samples"), "onnx_sha256": recorded.get("onnx_sha256"),
                            "data_sha256": recorded.get("data_sha256"), "versions": recorded.get("versions")})
        if isinstance(recorded.get("methods"), dict):  # `auto`: the candidate each tensor's amax came from
            description["methods"] = recorded["methods"]
        steps = sidecar_weight_steps(path, recorded)  # `auto` in FP8: each weight channel's place on the grid
        if steps:
            description["weight_steps"] = weight_steps_text(steps)
    description["amax"] = table.amax
    return description


def describe_onnx(path: Path) -> dict:
    from onnx import TensorProto

    from trtpipe.graph.typed import folded_ifs, kept_nodes, unquantized_layers

    model = onnxio.load(path)
    types = onnxio.tensor_types(model)
    ops = Counter(node.op_type for node in model.graph.node)
    ops_by_dtype: Counter = Counter()
    for node in model.graph.node:
        out = types.get(node.output[0]) if node.output else None
        ops_by_dtype[f"{node.op_type}:{TensorProto.DataType.Name(out) if out else '?'}"] += 1
    dtypes = Counter(TensorProto.DataType.Name(t) for t in types.values())

    def io(values):
        return [{"name": v.name, "dtype": type_text(v.type),
                 "shape": [d.dim_value if d.HasField("dim_value") else (d.dim_param or -1) for d in v.type.tensor_type.shape.dim]}
                for v in values]

    initializers = {i.name for i in model.graph.initializer}
    kept, folded, left_out = kept_nodes(model), folded_ifs(model), unquantized_layers(model)
    return {
        "kind": "onnx", "path": str(path), "ir_version": model.ir_version,
        "opset": onnxio.opset(model) if any(e.domain in ("", "ai.onnx") for e in model.opset_import) else None,
        **({"other_opsets": others} if (others := {e.domain: e.version for e in model.opset_import
                                                   if e.domain not in ("", "ai.onnx")}) else {}),
        "nodes": len(model.graph.node), "qdq_pairs": ops.get("QuantizeLinear", 0),
        "dequantize_nodes": ops.get("DequantizeLinear", 0),
        "inputs": io(v for v in model.graph.input if v.name not in initializers), "outputs": io(model.graph.output),
        "ops": dict(ops.most_common()), "ops_by_output_dtype": dict(sorted(ops_by_dtype.items())),
        "tensor_dtypes": dict(dtypes.most_common()),
        **({"kept_fp32": kept} if kept else {}),
        **({"folded_ifs": folded} if folded else {}),
        **({"unquantized_layers": left_out} if left_out else {}),
    }


def type_text(value_type) -> str:
    """Return an ONNX type as inspect shows it: a tensor's element type (FLOAT), else map(INT64, FLOAT) or
    sequence(...), as classic-ML exporters write their outputs."""
    from onnx import TensorProto

    kind = value_type.WhichOneof("value")
    if kind == "map_type":
        key = TensorProto.DataType.Name(value_type.map_type.key_type)
        return f"map({key}, {type_text(value_type.map_type.value_type)})"
    if kind == "sequence_type":
        return f"sequence({type_text(value_type.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_text(value_type.optional_type.elem_type)})"
    if kind == "sparse_tensor_type":
        return f"sparse({TensorProto.DataType.Name(value_type.sparse_tensor_type.elem_type)})"
    return TensorProto.DataType.Name(value_type.tensor_type.elem_type)


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
