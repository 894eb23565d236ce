"""FP16 and BF16 typed ONNX, safe by construction: each node is decided on its own, with a reason.

A node computes in half precision unless one of these keeps it in FP32 (the way Model Optimizer's
AutoCast decides per node):
- it is part of a shape or index computation (Shape -> Gather -> Cast -> Div -> Range, the inputs
  of Reshape, Expand, Slice, Resize, ...): FP16 holds integers exactly only up to 2048;
- ONNX gives the op no float16 (Range, NonMaxSuppression, custom-domain ops);
- a constant it reads lies beyond the type's range (PP-OCR's BatchNormalization variances of 1e8),
  or loses more than UNDERFLOW_FRACTION of its non-zero values to zero;
- an activation it reads or writes reached beyond ACTIVATION_LIMIT on calibration data;
- it runs If/Loop/Scan subgraphs (they stay FP32, outer values cast in);
- it is a fragile op (FP16_KEEP_FP32) or the user names it (--exclude).

A strongly typed TensorRT build rejects element-wise ops whose inputs differ in type, so the
conversion is by tensor, not by node: every float tensor has the precision of the node that makes it,
and a consumer that wants the other precision reads a Cast (made once per tensor and precision).
Graph inputs and outputs stay FP32.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio
from trtpipe.targets import Precision

# Ops whose results overflow or lose too much in FP16: squares and exponentials of activations,
# and normalizations whose variance underflows. TensorRT computes them in FP32 when the graph says so.
FP16_KEEP_FP32 = frozenset({"LayerNormalization", "Pow", "ReduceSumSquare", "ReduceL2", "Exp", "Log", "Softplus"})

# Inputs that stay float32 whatever the node computes in: Resize roi and scales (scales must be exact).
FLOAT32_ONLY_INPUTS = {"Resize": (1, 2), "Upsample": (1,)}

# Input slots that hold shapes, sizes, indices or counts: whatever computes them is a shape computation.
SHAPE_INPUTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Slice": (1, 2, 3, 4), "Resize": (1, 2, 3), "Upsample": (1,), "Pad": (1, 3), "Squeeze": (1,),
    "Unsqueeze": (1,), "Split": (1,), "TopK": (1,), "OneHot": (1,), "Trilu": (1,), "CenterCropPad": (1,),
    "Loop": (0, 1), "If": (0,), "NonMaxSuppression": (2,), "ReduceSum": (1,), "ReduceMean": (1,),
    "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
    "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,), "Col2Im": (1, 2),
}
# Nodes whose output describes their input's shape, not its values: a shape computation starts here.
SHAPE_SOURCES = frozenset({"Shape", "Size"})
# Ops that clamp with their constants: a constant beyond the range may saturate there harmlessly.
SATURATING = frozenset({"Clip", "Min", "Max"})

HALF_RANGE = {Precision.FP16: (65504.0, 2.0**-25), Precision.BF16: (3.3895e38, 2.0**-134)}  # max, rounds to 0 below
ACTIVATION_HEADROOM = 4.0  # activations seen on calibration data stay this far below the type's max
# A constant losing more of its non-zero values than this to zero, or an activation having more of
# them among FP16's subnormal numbers (fewer than 10 bits kept), keeps its nodes in FP32.
UNDERFLOW_FRACTION = 0.1
SMALLEST_NORMAL_FP16 = 2.0**-14


@dataclass(frozen=True)
class KeptNode:
    """A node kept in FP32 and why; recorded in the typed ONNX and the engine sidecar."""

    node: str
    op: str
    reason: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Observed:
    """What calibration data showed of one tensor: its largest |value|, and the fraction of its
    non-zero values below FP16's smallest normal number (2**-14), where FP16 keeps fewer bits."""

    amax: float = 0.0
    subnormal_fraction: float = 0.0


@dataclass
class HalfResult:
    model: object
    kept: list[KeptNode]


def node_matches(node, patterns: Iterable[str]) -> bool:
    """Return True if a pattern is the node's op type, its name, or a regex matching the name."""
    for pattern in patterns:
        if pattern in (node.op_type, node.name):
            return True
        try:
            if node.name and re.fullmatch(pattern, node.name):
                return True
        except re.error:
            continue
    return False


def activation_limit(precision: Precision) -> float:
    """Return the largest |activation| on calibration data that a half node may see."""
    return HALF_RANGE[precision][0] / ACTIVATION_HEADROOM


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
    import onnx
    from onnx import TensorProto

    if precision not in HALF_RANGE:
        raise TrtpipeError(f"--precision {precision}: half conversion makes fp16 or bf16 only")
    half = TensorProto.FLOAT16 if precision is Precision.FP16 else TensorProto.BFLOAT16
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    types = onnxio.tensor_types(model)
    is_float = {name for name, t in types.items() if t == TensorProto.FLOAT}
    reasons = _kept_reasons(model, precision, is_float, list(keep), default_keep, ranges or {})
    kept = [KeptNode(_label(node), node.op_type, reasons[i]) for i, node in enumerate(graph.node) if i in reasons]
    _rewrite(model, half, precision, is_float, reasons)
    return HalfResult(model, kept)


# ---- deciding: which nodes stay FP32, and why --------------------------------------------------


def _label(node) -> str:
    return node.name or (node.output[0] if node.output else node.op_type)


def _kept_reasons(model, precision, is_float, keep, default_keep, ranges) -> dict[int, str]:
    """Return {node index: reason} for the nodes that compute in FP32."""
    from onnx import AttributeProto, numpy_helper

    graph = model.graph
    fmax, tiny = HALF_RANGE[precision]
    limit = activation_limit(precision)
    shape_nodes = _shape_computation(graph)
    constants = {init.name: init for init in graph.initializer}
    constant_nodes = {n.output[0]: n for n in graph.node if n.op_type == "Constant" and n.output}
    opset = onnxio.opset(model)
    fragile = FP16_KEEP_FP32 if default_keep and precision is Precision.FP16 else frozenset()
    reasons: dict[int, str] = {}
    for i, node in enumerate(graph.node):
        floats = [n for n in list(node.input) + list(node.output) if n in is_float]
        if not floats or node.op_type in SHAPE_SOURCES:
            continue  # nothing float to convert (integer shape math), or only a shape read off a tensor
        reason = None
        if node_matches(node, keep):
            reason = "named by --exclude"
        elif node.op_type in fragile:
            reason = "fragile in FP16 (squares, exponentials, normalization statistics)"
        elif any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in node.attribute):
            reason = "control flow: its subgraphs compute in FP32"
        elif i in shape_nodes:
            reason = "shape computation: FP16 holds integers exactly only up to 2048"
        elif node.domain not in ("", "ai.onnx"):
            reason = f"custom-domain op ({node.domain}): no half-precision type known"
        elif not _has_half_kernel(node, opset):
            reason = f"ONNX {node.op_type} (opset {opset}) has no float16 type"
        if reason is None and node.op_type not in SATURATING:
            for name in node.input:
                value = constants.get(name)
                array = numpy_helper.to_array(value) if value is not None else None
                if array is None and name in constant_nodes:
                    array = _constant_value(constant_nodes[name])
                if array is None or array.dtype != np.float32:
                    continue
                reason = _constant_out_of_range(name, array, fmax, tiny, precision)
                if reason:
                    break
        if reason is None and node.op_type == "Constant":
            array = _constant_value(node)
            if array is not None and array.dtype == np.float32:
                reason = _constant_out_of_range(node.output[0], array, fmax, tiny, precision)
        if reason is None:
            for name in floats:
                seen = ranges.get(name)
                if seen is None:
                    continue
                if seen.amax > limit:
                    reason = f"'{name}' reaches {seen.amax:.4g} on calibration data (limit {limit:.4g})"
                elif precision is Precision.FP16 and seen.subnormal_fraction > UNDERFLOW_FRACTION:
                    reason = (f"'{name}' has {seen.subnormal_fraction:.0%} of its non-zero values below "
                              "FP16's smallest normal number on calibration data")
                if reason:
                    break
        if reason:
            reasons[i] = reason
    return reasons


def _constant_out_of_range(name: str, array: np.ndarray, fmax: float, tiny: float, precision) -> str | None:
    finite = np.abs(array[np.isfinite(array)])
    if finite.size and finite.max() > fmax:
        return f"constant '{name}' reaches {finite.max():.3g}, beyond {precision}'s {fmax:.6g}"
    nonzero = finite[finite > 0]
    if nonzero.size:
        lost = float(np.mean(nonzero < tiny))
        if lost > UNDERFLOW_FRACTION:
            return f"constant '{name}' loses {lost:.0%} of its non-zero values to zero in {precision}"
    return None


def _constant_value(node) -> np.ndarray | None:
    from onnx import numpy_helper

    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name == "value_float":
            return np.array(attr.f, np.float32)
        if attr.name == "value_floats":
            return np.array(list(attr.floats), np.float32)
    return None


def _shape_computation(graph) -> set[int]:
    """Return the indices of nodes that compute shapes, sizes or indices (walked back from SHAPE_INPUTS)."""
    producer = {out: i for i, node in enumerate(graph.node) for out in node.output}
    todo = [name for node in graph.node for slot in SHAPE_INPUTS.get(node.op_type, ())
            if slot < len(node.input) and (name := node.input[slot])]
    found: set[int] = set()
    while todo:
        i = producer.get(todo.pop())
        if i is None or i in found:
            continue
        found.add(i)
        if graph.node[i].op_type not in SHAPE_SOURCES:
            todo.extend(n for n in graph.node[i].input if n)
    return found


def _has_half_kernel(node, opset: int) -> bool:
    """Return True if ONNX lets every float input and output of `node` be float16."""
    from onnx import defs

    try:
        schema = defs.get_schema(node.op_type, opset, "")
    except defs.SchemaError:
        return False
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    for params in (schema.inputs, schema.outputs):
        for param in params:
            types = allowed.get(param.type_str)
            if types is not None and "tensor(float)" in types and "tensor(float16)" not in types:
                return False
    return True


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
    from onnx import AttributeProto, TensorProto, helper, numpy_helper

    graph = model.graph
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
            fp32_copies[init.name] = numpy_helper.from_array(array, f"{init.name}__fp32")
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
                have[want] = f"{name}__{'fp32' if want == fp32 else precision}"
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
        for attr in node.attribute:  # outer-scope values a subgraph reads: FP32, like the subgraph
            if attr.type == AttributeProto.GRAPH:
                _read_outer_as_fp32(attr.g, is_float, get, fp32)
            elif attr.type == AttributeProto.GRAPHS:
                for g in attr.graphs:
                    _read_outer_as_fp32(g, is_float, get, fp32)
        if node_type == half:
            _retype_attributes(node, half)
        for k, name in enumerate(node.output):
            if name not in is_float:
                continue
            if node_type == half and name in outputs:
                node.output[k] = f"{name}__{precision}"
                renamed_outputs.append(name)
            available[name] = {node_type: node.output[k]}
        new_nodes.append(node)
    for name in renamed_outputs:
        new_nodes.append(helper.make_node("Cast", [available[name][half]], [name], to=fp32, name=f"{name}/Cast"))

    used = {n for node in new_nodes for n in node.input} | _subgraph_reads(new_nodes)
    graph.initializer.extend(init for init in fp32_copies.values() if init.name in used)
    del graph.node[:]
    graph.node.extend(new_nodes)
    del graph.value_info[:]  # stale float32 types; ONNX Runtime and TensorRT re-infer them


def _subgraph_reads(nodes) -> set[str]:
    from onnx import AttributeProto

    names: set[str] = set()
    for node in nodes:
        for attr in node.attribute:
            graphs = [attr.g] if attr.type == AttributeProto.GRAPH else list(attr.graphs) if attr.type == AttributeProto.GRAPHS else []
            for g in graphs:
                names.update(n for inner in g.node for n in inner.input)
                names |= _subgraph_reads(g.node)
    return names


def _read_outer_as_fp32(subgraph, is_float: set[str], get, fp32: int) -> None:
    """Point a subgraph's reads of outer float tensors at their FP32 versions (nested graphs too)."""
    from onnx import AttributeProto

    inner = {v.name for v in subgraph.input} | {i.name for i in subgraph.initializer}
    inner.update(o for node in subgraph.node for o in node.output)
    for node in subgraph.node:
        for k, name in enumerate(node.input):
            if name in is_float and name not in inner:
                node.input[k] = get(name, fp32)
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                _read_outer_as_fp32(attr.g, is_float - inner, get, fp32)
            elif attr.type == AttributeProto.GRAPHS:
                for g in attr.graphs:
                    _read_outer_as_fp32(g, is_float - inner, get, fp32)


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
    if node.op_type == "ConstantOfShape" and not any(a.name == "value" for a in node.attribute):
        node.attribute.append(helper.make_attribute("value", _half_tensor(np.zeros(1, np.float32), "", half)))


# ---- observing: activation ranges on calibration data --------------------------------------------


def observe_ranges(model, batches: Iterable[Mapping[str, np.ndarray]]) -> dict[str, Observed]:
    """Return what `batches` show of every float tensor `model` computes (ONNX Runtime, CPU)."""
    from onnx import TensorProto

    from calibrators.collect import exposed_activations

    types = onnxio.tensor_types(model)
    initializers = {init.name for init in model.graph.initializer}
    names = [out for node in model.graph.node for out in node.output
             if types.get(out) == TensorProto.FLOAT and out not in initializers and node.op_type != "Constant"]
    amax = dict.fromkeys(names, 0.0)
    counts = {name: [0, 0] for name in names}  # non-zero values, of which subnormal in FP16
    for values in exposed_activations(model, names, batches):
        for name, value in values.items():
            magnitude = np.abs(value[np.isfinite(value)])
            nonzero = magnitude[magnitude > 0]
            if nonzero.size:
                amax[name] = max(amax[name], float(nonzero.max()))
                counts[name][0] += nonzero.size
                counts[name][1] += int(np.count_nonzero(nonzero < SMALLEST_NORMAL_FP16))
        del values
    return {name: Observed(amax[name], counts[name][1] / counts[name][0] if counts[name][0] else 0.0) for name in names}
