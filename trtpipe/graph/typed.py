"""The typed ONNX of a precision: the graph whose types make a strongly typed build run in it.

    cleanup (fold constants and BatchNormalization, name dims)  ->  half (FP16/BF16)
                                                                ->  qdq (INT8/FP8), then half for the rest
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trtpipe.calibrators.cache import CalibrationTable
from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio
from trtpipe.graph.cleanup import CleanupReport, cleanup
from trtpipe.graph.half import convert
from trtpipe.graph.keep import KeptNode, Observed
from trtpipe.graph.lowbit import lowbit_model
from trtpipe.graph.qdq import UNQUANTIZED_KEY, insert_qdq
from trtpipe.targets import Precision

# What the layers left out of INT8/FP8 compute in.
UNQUANTIZED = ("fp16", "fp32")
# The typed ONNX's metadata key listing the nodes kept in FP32 (JSON); the build copies it to the sidecar.
KEPT_KEY = "trtpipe.kept_fp32"
# The typed ONNX's metadata key listing the If nodes cleanup folded into their branch (JSON).
FOLDED_KEY = "trtpipe.folded_ifs"
# The precision the typed ONNX was written for: its types alone cannot always tell (onnxio.typed_precision).
PRECISION_KEY = onnxio.PRECISION_KEY


@dataclass
class TypedGraph:
    """A typed ONNX and what was decided on the way: nodes kept in FP32, what cleanup did."""

    model: object
    kept: list[KeptNode] = field(default_factory=list)
    cleanup: CleanupReport | None = None


def write_typed_onnx(model, precision: Precision, output: Path, table: CalibrationTable | None,
                     exclude: Sequence[str] = (), implicit: bool = False, unquantized: str = "fp16", *,
                     ranges: Mapping[str, Observed] | None = None, clean: bool = True, block: int | None = None,
                     shapes=None, fixed=None, min_weights: int = 0) -> Path:
    """Write the ONNX whose types make a strongly typed build of `model` run in `precision`; return its path.

    The nodes kept in FP32 and why are written into the model's metadata (KEPT_KEY).
    """
    typed = typed_graph(model, precision, table, exclude, implicit, unquantized, ranges=ranges, clean=clean,
                        block=block, shapes=shapes, fixed=fixed, min_weights=min_weights)
    typed.model = with_kept(typed.model, typed.kept)
    if typed.cleanup is not None and typed.cleanup.folded_ifs:
        onnxio.set_metadata(typed.model, FOLDED_KEY, json.dumps([{"node": f.node, "branch": f.branch}
                                                                  for f in typed.cleanup.folded_ifs]))
    onnxio.set_metadata(typed.model, PRECISION_KEY, str(precision))
    return onnxio.save(typed.model, output)


def typed_model(model, precision: Precision, table: CalibrationTable | None, exclude: Sequence[str] = (),
                implicit: bool = False, unquantized: str = "fp16", only: Sequence[str] | None = None, *,
                ranges: Mapping[str, Observed] | None = None, clean: bool = True, min_weights: int = 0):
    """Return the typed ONNX of `model` for `precision` (see typed_graph)."""
    return typed_graph(model, precision, table, exclude, implicit, unquantized, only, ranges=ranges, clean=clean,
                       min_weights=min_weights).model


def typed_graph(model, precision: Precision, table: CalibrationTable | None, exclude: Sequence[str] = (),
                implicit: bool = False, unquantized: str = "fp16", only: Sequence[str] | None = None, *,
                ranges: Mapping[str, Observed] | None = None, clean: bool = True, block: int | None = None,
                shapes=None, fixed=None, min_weights: int = 0) -> TypedGraph:
    """Return the typed ONNX of `model` for `precision`, with the nodes kept in FP32.

    The model is cleaned first (graph.cleanup; `clean=False` skips it). INT8 and FP8 graphs compute
    what is not quantized (excluded layers, normalizations, softmax, elementwise ops) in
    `unquantized`: FP16 by default, as a weakly typed TensorRT build with the FP16 and INT8 flags
    would, or FP32. `only` names the nodes to quantize, all others stay out. `ranges`, what
    calibration data showed of each tensor (keep.observe_ranges), keeps nodes whose activations
    leave FP16's range in FP32. `block`: INT4's block size (None: trtpipe.graph.lowbit.int4_block's).
    `shapes` (the build's profile) and `fixed` (inputs with one value) let cleanup fold the If nodes
    they decide (graph.control). `min_weights`: INT8/FP8 leave layers with fewer weight elements
    unquantized (graph.qdq).
    """
    if precision in (Precision.INT8, Precision.FP8) and not implicit:  # int4 needs no cache, fp4 says so itself
        if table is None:
            raise TrtpipeError(f"--precision {precision} needs --cache CACHE; make one with 'trtpipe calibrate'")
        if unquantized not in UNQUANTIZED:
            raise TrtpipeError(f"--unquantized {unquantized}: use one of {', '.join(UNQUANTIZED)}")
    report = None
    if clean:
        metadata = {p.key: p.value for p in model.metadata_props}  # AWQ's block size travels there
        model, report = cleanup(model, shapes=shapes, fixed=fixed)
        for key, value in metadata.items():
            onnxio.set_metadata(model, key, value)
    if precision in (Precision.FP32, Precision.TF32) or implicit:
        return TypedGraph(model, [], report)  # implicit INT8: TensorRT quantizes the FP32 graph itself
    if precision in (Precision.FP16, Precision.BF16):
        half = convert(model, precision, keep=exclude, ranges=ranges)
        return TypedGraph(half.model, half.kept, report)
    if precision in (Precision.INT4, Precision.FP4):
        return TypedGraph(lowbit_model(model, precision, table, exclude, block), [], report)
    if table is None:
        raise TrtpipeError(f"--precision {precision} needs --cache CACHE; calibrate the model with 'trtpipe calibrate'")
    to_fp16 = unquantized == "fp16"
    if to_fp16:  # FP16 Q/DQ scales need opset 19
        model = onnxio.with_opset(model, 19)
    typed, _ = insert_qdq(model, table, precision, exclude, scales_fit_fp16=to_fp16, only=only, min_weights=min_weights)
    if not to_fp16:
        return TypedGraph(typed, [], report)
    half = convert(typed, Precision.FP16, ranges=ranges)
    return TypedGraph(half.model, half.kept, report)


def with_kept(model, kept: Sequence[KeptNode]):
    """Return `model` with the kept nodes recorded in its metadata (replacing an earlier record)."""
    entries = [p for p in model.metadata_props if p.key != KEPT_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(entries)
    if kept:
        entry = model.metadata_props.add()
        entry.key = KEPT_KEY
        entry.value = json.dumps([k.to_json() for k in kept])
    return model


def _json_list(model, key: str) -> list[dict]:
    """Return the JSON list a typed ONNX records under metadata `key`, empty if none or unreadable."""
    for entry in model.metadata_props:
        if entry.key == key:
            try:
                found = json.loads(entry.value)
            except (ValueError, RecursionError):
                return []
            return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []
    return []


def folded_ifs(model) -> list[dict]:
    """Return the folded-If record of a typed ONNX: [{"node", "branch"}], empty if none."""
    return _json_list(model, FOLDED_KEY)


def kept_nodes(model) -> list[dict]:
    """Return the kept-in-FP32 record of a typed ONNX: [{"node", "op", "reason"}], empty if none."""
    return _json_list(model, KEPT_KEY)


def unquantized_layers(model) -> list[dict]:
    """Return the INT8/FP8 typed ONNX's record of layers left unquantized: [{"node", "op", "reason"}]."""
    return _json_list(model, UNQUANTIZED_KEY)
