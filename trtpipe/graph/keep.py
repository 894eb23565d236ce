"""Which nodes of a half-precision (FP16/BF16) graph stay in FP32, and why: one reason per node.

A node computes in half precision unless one of these keeps it in FP32 (the way Model Optimizer's
AutoCast decides per node):
- it is part of a shape or index computation (Shape -> Gather -> Cast -> Div -> Range, the inputs
  of Reshape, Expand, Slice, Resize, ...): FP16 holds integers exactly only up to 2048;
- ONNX gives the op no float16 (Range, custom-domain ops);
- a constant it reads lies beyond the type's range (PP-OCR's BatchNormalization variances of 1e8),
  or loses more than UNDERFLOW_FRACTION of its non-zero values to zero;
- an activation it reads or writes went beyond the range on calibration data (observe_ranges), or
  sat among FP16's subnormal numbers;
- it runs If/Loop/Scan subgraphs, or makes, reads or fills a sequence (SEQUENCE_OPS);
- it only moves graph inputs to graph outputs (an Identity that returns an input: MOVES);
- it is a fragile op (FP16_KEEP_FP32) or the user names it (--exclude).
half.py does the rewriting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio, toolkit
from trtpipe.targets import Precision

# Ops whose results overflow or lose too much in FP16: squares and exponentials of activations,
# and normalizations whose variance underflows. TensorRT computes them in FP32 when the graph says so.
FP16_KEEP_FP32 = frozenset({"LayerNormalization", "Pow", "ReduceSumSquare", "ReduceL2", "Exp", "Log", "Softplus"})

# Input slots that hold shapes, sizes, indices or counts: whatever computes them is a shape computation.
# Not an If's or a Loop's condition: a decision, as a score read at a threshold is (a wake-word model's
# verifier runs when its first score passes 0.5), which validate judges; walked back as a shape it kept
# every node before it in FP32 for "integers", and openWakeWord's FP16 engine was its FP32 one.
SHAPE_INPUTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Slice": (1, 2, 3, 4), "Resize": (1, 2, 3), "Upsample": (1,), "Pad": (1, 3), "Squeeze": (1,),
    "Unsqueeze": (1,), "Split": (1,), "TopK": (1,), "OneHot": (1,), "Trilu": (1,), "CenterCropPad": (1,),
    "Loop": (0,), "NonMaxSuppression": (2,), "ReduceSum": (1,), "ReduceMean": (1,),
    "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
    "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,), "Col2Im": (1, 2),
}
# Nodes whose output describes their input's shape, not its values: a shape computation starts here.
SHAPE_SOURCES = frozenset({"Shape", "Size"})
# Ops that move values without arithmetic: one that takes graph inputs straight to graph outputs stays FP32,
# since in half it would only round the model's own inputs on their way out.
MOVES = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Tile", "Slice",
                   "Gather", "Concat", "Split"})
# Ops that make, read or fill sequences of tensors (a scripted loop appending to a list): the half pass retypes
# tensors, not the sequences holding them, so these stay FP32 with every sequence, whoever fills it.
SEQUENCE_OPS = frozenset({"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceErase",
                          "SequenceLength", "SplitToSequence", "ConcatFromSequence", "SequenceMap"})
# Ops that clamp with their constants: a constant beyond the range may saturate there harmlessly. A non-zero
# bound that FP16 flushes to zero is not harmless: Max(x, 1e-12) before a Log (DNSMOS's STFT, the Keras idiom)
# becomes Max(x, 0), and a silent bin's log is -inf.
SATURATING = frozenset({"Clip", "Min", "Max"})

HALF_RANGE = {Precision.FP16: (65504.0, 2.0**-25), Precision.BF16: (3.3895e38, 2.0**-134)}  # max, rounds to 0 below
ACTIVATION_HEADROOM = 4.0  # activations seen on calibration data stay this far below the type's max
# A constant losing more of its non-zero values than this to zero, or an activation having more of
# them among FP16's subnormal numbers (fewer than 10 bits kept), keeps its nodes in FP32.
UNDERFLOW_FRACTION = 0.1
SMALLEST_NORMAL_FP16 = 2.0**-14


@dataclass(frozen=True)
class KeptNode:
    """A node kept in a higher precision and why: in FP32 by the half pass, or out of INT8/FP8 (qdq);
    recorded in the typed ONNX and the engine sidecar."""

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



def check_exclude(model, patterns: Iterable[str], model_path, flag: str = "--exclude",
                  cleaned: Callable[[], Any] | None = None) -> None:
    """Raise if a pattern matches no node of `model`: a misspelt exclusion would quantize the layer it meant.

    `cleaned` gives the graph the typed passes rewrite (cleanup with the spec's fixed inputs): the
    layers of an If it folds (silero-vad's, which `tune` names) exist only there. It is asked for
    only when a pattern matches nothing in `model`.
    """
    missing = [p for p in patterns if not any(node_matches(node, [p]) for node in model.graph.node)]
    if missing and cleaned is not None:
        graph = cleaned().graph
        missing = [p for p in missing if not any(node_matches(node, [p]) for node in graph.node)]
    if missing:
        raise TrtpipeError(f"{flag} {missing[0]}: matches no node of {model_path} (by name, op type or regex); "
                           "list the node names with 'trtpipe inspect --json' or 'trtpipe sensitivity'")

def activation_limit(precision: Precision) -> float:
    """Return the largest |activation| on calibration data that a half node may see."""
    return HALF_RANGE[precision][0] / ACTIVATION_HEADROOM


def kept_reasons(model, precision, is_float, keep, default_keep, ranges) -> dict[int, str]:
    """Return {node index: reason} for the nodes that compute in FP32."""
    from onnx import numpy_helper

    graph = model.graph
    fmax, tiny = HALF_RANGE[precision]
    limit = activation_limit(precision)
    shape_nodes = _shape_computation(graph)
    constants = {init.name: init for init in graph.initializer}
    constant_nodes = {n.output[0]: n for n in graph.node if n.op_type == "Constant" and n.output}
    opset = onnxio.opset(model)
    fragile = FP16_KEEP_FP32 if default_keep and precision is Precision.FP16 else frozenset()
    graph_inputs = {value.name for value in graph.input}
    graph_outputs = {value.name for value in graph.output}
    reasons: dict[int, str] = {}
    for i, node in enumerate(graph.node):
        if node.op_type in SEQUENCE_OPS:  # before the float check: SequenceEmpty reads and writes no tensor
            reasons[i] = "sequence op: the half pass retypes tensors, not the sequences that hold them"
            continue
        floats = [n for n in list(node.input) + list(node.output) if n in is_float]
        if not floats or node.op_type in SHAPE_SOURCES:
            continue  # nothing float to convert (integer shape math), or only a shape read off a tensor
        reason = None
        if node_matches(node, keep):
            reason = "named by --exclude"
        elif (node.op_type in MOVES and all(n in graph_inputs for n in node.input if n in is_float)
              and all(n in graph_outputs for n in node.output if n)):
            reason = "passes graph inputs through to graph outputs: in half it would only round them"
        elif node.op_type in fragile:
            reason = "fragile in FP16 (squares, exponentials, normalization statistics)"
        elif toolkit.subgraphs(node):
            reason = "control flow: its subgraphs compute in FP32"
        elif i in shape_nodes:
            reason = "shape computation: FP16 holds integers exactly only up to 2048"
        elif node.domain not in ("", "ai.onnx"):
            reason = f"custom-domain op ({node.domain}): no half-precision type known"
        elif not _has_half_kernel(node, opset):
            reason = f"ONNX {node.op_type} (opset {opset}) has no float16 type"
        if reason is None:
            for name in node.input:
                value = constants.get(name)
                array = numpy_helper.to_array(value) if value is not None else None
                if array is None and name in constant_nodes:
                    array = toolkit.constant_value(constant_nodes[name])
                if array is None or array.dtype != np.float32:
                    continue
                reason = _constant_out_of_range(name, array, fmax, tiny, precision,
                                                overflow=node.op_type not in SATURATING)
                if reason:
                    break
        if reason is None and node.op_type == "Constant":
            array = toolkit.constant_value(node)
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


def _constant_out_of_range(name: str, array: np.ndarray, fmax: float, tiny: float, precision,
                           overflow: bool = True) -> str | None:
    """Return why `array` cannot be `precision` (beyond its max, when `overflow` counts; or its non-zero
    values flushed to zero), else None."""
    finite = np.abs(array[np.isfinite(array)])
    if overflow and finite.size and finite.max() > fmax:
        return f"constant '{name}' reaches {finite.max():.3g}, beyond {precision}'s {fmax:.6g}"
    nonzero = finite[finite > 0]
    if nonzero.size:
        lost = float(np.mean(nonzero < tiny))
        if lost > UNDERFLOW_FRACTION:
            return f"constant '{name}' loses {lost:.0%} of its non-zero values to zero in {precision}"
    return None


def _shape_computation(graph) -> set[int]:
    """Return the indices of nodes that compute shapes, sizes or indices (walked back from SHAPE_INPUTS)."""
    producer = toolkit.producer_positions(graph)
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


def observe_ranges(model, batches: Iterable[Mapping[str, np.ndarray]]) -> dict[str, Observed]:
    """Return what `batches` show of every float tensor `model` computes (ONNX Runtime, CPU)."""
    from onnx import TensorProto

    from trtpipe.calibrators.collect import exposed_activations

    types = onnxio.tensor_types(model)
    initializers = {init.name for init in model.graph.initializer}
    names = [out for node in model.graph.node for out in node.output
             if types.get(out) == TensorProto.FLOAT and out not in initializers and node.op_type != "Constant"]
    if not names:  # a model of integers alone: ONNX Runtime runs no session asked for no output
        return {}
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
