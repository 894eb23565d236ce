"""FP16 and BF16 typed ONNX, safe by construction: each node is decided on its own (keep.py), then
every float tensor takes the precision of the node that makes it.

A strongly typed TensorRT build rejects element-wise ops whose inputs differ in type, so the
conversion is by tensor, not by node: a consumer that wants the other precision reads a Cast (made
once per tensor and precision). Shape computations kept in FP32 stay FP32 end to end, with no
FP32 -> FP16 -> FP32 round trip between two kept nodes. Graph inputs and outputs stay FP32.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio, toolkit
from trtpipe.graph.keep import HALF_RANGE, SHAPE_SOURCES, KeptNode, Observed, kept_reasons
from trtpipe.targets import Precision

# Inputs that stay float32 whatever the node computes in: Resize roi and scales (scales must be exact).
FLOAT32_ONLY_INPUTS = {"Resize": (1, 2), "Upsample": (1,)}


@dataclass
class HalfResult:
    """A half-precision model and the nodes it keeps in FP32."""

    model: object
    kept: list[KeptNode]


def to_half(model, precision: Precision, keep: Iterable[str] = (), default_keep: bool = True,
            ranges: Mapping[str, Observed] | None = None):
    """Return a copy of `model` computing in FP16 or BF16, with FP32 inputs and outputs (see convert)."""
    return convert(model, precision, keep, default_keep, ranges).model


def convert(model, precision: Precision, keep: Iterable[str] = (), default_keep: bool = True,
            ranges: Mapping[str, Observed] | None = None) -> HalfResult:
    """Return `model` computing in FP16 or BF16, and the nodes kept in FP32 with their reasons.

    `keep` names nodes (op type, name or regex) to compute in FP32. None-like defaults: for FP16
    the ops in FP16_KEEP_FP32 are kept too (turn off with default_keep=False); BF16 has FP32's
    range and keeps nothing by default. `ranges` holds what calibration data showed of each tensor
    (observe_ranges); without it only constants are checked.
    """
    from onnx import TensorProto

    if precision not in HALF_RANGE:
        raise TrtpipeError(f"--precision {precision}: half conversion makes fp16 or bf16 only")
    half = TensorProto.FLOAT16 if precision is Precision.FP16 else TensorProto.BFLOAT16
    if precision is Precision.BF16:
        model = _bf16_opset(model)
    model = toolkit.copy(model)
    graph = model.graph
    types = onnxio.tensor_types(model)
    is_float = {name for name, t in types.items() if t == TensorProto.FLOAT}
    reasons = kept_reasons(model, precision, is_float, list(keep), default_keep, ranges or {})
    kept = [KeptNode(toolkit.label(node), node.op_type, reasons[i]) for i, node in enumerate(graph.node) if i in reasons]
    _rewrite(model, half, precision, is_float, reasons)
    return HalfResult(model, kept)


# Cast takes bfloat16 from opset 13 on: below it a BF16 graph is not valid ONNX and ONNX Runtime
# refuses it (PP-OCR's recognizer, exported at opset 12).
BF16_OPSET = 13


def _bf16_opset(model):
    """Return `model` at opset BF16_OPSET or later (onnx's version converter), or say in one line why BF16 cannot be written."""
    try:
        return onnxio.with_opset(model, BF16_OPSET)
    except TrtpipeError as exc:
        raise TrtpipeError(f"bf16 needs opset {BF16_OPSET} (Cast from bfloat16): {exc}; use fp16") from None


def _fixed_float_slots(node, opset: int) -> set[int]:
    """Return the input slots ONNX types as tensor(float) whatever the node computes in."""
    from onnx import defs

    slots = set(FLOAT32_ONLY_INPUTS.get(node.op_type, ()))
    if node.domain in ("", "ai.onnx"):
        try:
            schema = defs.get_schema(node.op_type, opset, "")
        except defs.SchemaError:
            return slots
        slots.update(i for i, param in enumerate(schema.inputs) if param.type_str == "tensor(float)")
    return slots

# ---- rewriting: every float tensor in the precision of its maker, casts where a reader differs --
def _rewrite(model, half: int, precision: Precision, is_float: set[str], reasons: dict[int, str]) -> None:
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    names = toolkit.NewNames(graph)
    fp32 = TensorProto.FLOAT
    opset = onnxio.opset(model)
    nodes = list(graph.node)
    slots_fp32 = [_fixed_float_slots(node, opset) for node in nodes]
    wants_half: set[str] = set()  # tensors some half node reads
    for i, node in enumerate(nodes):
        if i not in reasons and node.op_type not in SHAPE_SOURCES:
            wants_half.update(n for k, n in enumerate(node.input) if n in is_float and k not in slots_fp32[i])

    available: dict[str, dict[int, str]] = {}  # float tensor -> {precision: name holding it}
    fp32_copies = {}  # initializers made half that an FP32 reader needs too
    new_nodes = []
    for value in graph.input:
        if value.name in is_float:
            available[value.name] = {fp32: value.name}
    for init in graph.initializer:
        if init.data_type != fp32:
            continue
        if init.name in wants_half:
            array = numpy_helper.to_array(init)
            fp32_copies[init.name] = numpy_helper.from_array(array, names.new(f"{init.name}__fp32"))
            init.CopyFrom(_half_tensor(array, init.name, half))
            available[init.name] = {half: init.name}
        else:
            available[init.name] = {fp32: init.name}

    def get(name: str, want: int) -> str:
        """Return the name of `name` in precision `want`, casting (once) if it is not there yet."""
        have = available.get(name)
        if have is None:
            return name  # defined inside a subgraph, or of unknown type: left as it is
        if want not in have:
            if want == fp32 and name in fp32_copies:
                have[want] = fp32_copies[name].name
            else:
                source = next(iter(have.values()))
                have[want] = names.new(f"{name}__{'fp32' if want == fp32 else precision}")
                new_nodes.append(helper.make_node("Cast", [source], [have[want]], to=want, name=f"{have[want]}/Cast"))
        return have[want]

    outputs = {value.name for value in graph.output}
    renamed_outputs = []
    for i, node in enumerate(nodes):
        node_type = fp32 if i in reasons else half
        for k, name in enumerate(node.input):
            if name in is_float and node.op_type in SHAPE_SOURCES:
                node.input[k] = next(iter(available[name].values())) if name in available else name  # any precision
            elif name in is_float:
                node.input[k] = get(name, fp32 if node_type == fp32 or k in slots_fp32[i] else half)
        for subgraph in toolkit.subgraphs(node):  # outer-scope values a subgraph reads: FP32, like the subgraph
            _read_outer_as_fp32(subgraph, is_float, get, fp32)
        if node_type == half:
            _retype_attributes(node, half)
        for k, name in enumerate(node.output):
            if name not in is_float:
                continue
            if node_type == half and name in outputs:
                node.output[k] = names.new(f"{name}__{precision}")
                renamed_outputs.append(name)
            available[name] = {node_type: node.output[k]}
        new_nodes.append(node)
    for name in renamed_outputs:
        new_nodes.append(helper.make_node("Cast", [available[name][half]], [name], to=fp32, name=f"{name}/Cast"))

    used = toolkit.names_read(new_nodes)
    graph.initializer.extend(init for init in fp32_copies.values() if init.name in used)
    del graph.node[:]
    graph.node.extend(new_nodes)
    del graph.value_info[:]  # stale float32 types; ONNX Runtime and TensorRT re-infer them


def _read_outer_as_fp32(subgraph, is_float: set[str], get, fp32: int) -> None:
    """Point a subgraph's reads of outer float tensors at their FP32 versions (nested graphs too)."""
    inner = {v.name for v in subgraph.input} | {i.name for i in subgraph.initializer}
    inner.update(o for node in subgraph.node for o in node.output)
    for node in subgraph.node:
        for k, name in enumerate(node.input):
            if name in is_float and name not in inner:
                node.input[k] = get(name, fp32)
        for nested in toolkit.subgraphs(node):
            _read_outer_as_fp32(nested, is_float - inner, get, fp32)


def _half_tensor(array: np.ndarray, name: str, half: int):
    from onnx import TensorProto, numpy_helper

    if half == TensorProto.FLOAT16:
        with np.errstate(over="ignore"):
            # Only saturating ops (Clip, Min, Max) and kept nodes' FP32 copies reach here with
            # values beyond the range: clamping keeps a Clip bound a bound.
            return numpy_helper.from_array(np.clip(array, -65504, 65504).astype(np.float16), name)
    import ml_dtypes

    return numpy_helper.from_array(array.astype(ml_dtypes.bfloat16), name)


def _retype_attributes(node, half: int) -> None:
    """Retype attributes that create float32 data: Cast targets and constants."""
    from onnx import TensorProto, helper, numpy_helper

    for attr in node.attribute:
        if node.op_type in ("Cast", "CastLike") and attr.name == "to" and attr.i == TensorProto.FLOAT:
            attr.i = half
        elif attr.name in ("value", "sparse_value") and attr.t.data_type == TensorProto.FLOAT:
            attr.t.CopyFrom(_half_tensor(numpy_helper.to_array(attr.t), attr.t.name, half))
        elif node.op_type == "Constant" and attr.name in ("value_float", "value_floats"):
            values = np.array(attr.f if attr.name == "value_float" else list(attr.floats), dtype=np.float32)
            node.attribute.remove(attr)
            node.attribute.append(helper.make_attribute("value", _half_tensor(values, "", half)))
            break
        elif attr.name == "dtype" and attr.i == TensorProto.FLOAT:
            attr.i = half
    if node.op_type == "ConstantOfShape" and toolkit.attribute(node, "value") is None:
        node.attribute.append(helper.make_attribute("value", _half_tensor(np.zeros(1, np.float32), "", half)))
