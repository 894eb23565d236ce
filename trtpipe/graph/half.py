"""FP16 and BF16 typed ONNX: every float tensor in half precision, with explicit casts at the edges.

A strongly typed TensorRT build rejects element-wise ops whose inputs differ in type, so a partial
conversion (some tensors half, some float) fails to parse. Here every float32 tensor becomes half,
and the only float32 left is where a cast says so: graph inputs and outputs (kept FP32 for callers),
the nodes kept in FP32 (cast in, cast out), and the inputs the ONNX spec requires in float32.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio
from trtpipe.targets import Precision

# Ops whose results overflow or lose too much in FP16: squares and exponentials of activations,
# and normalizations whose variance underflows. TensorRT computes them in FP32 when the graph says so.
FP16_KEEP_FP32 = frozenset({"LayerNormalization", "Pow", "ReduceSumSquare", "ReduceL2", "Exp", "Log", "Softplus"})

# Inputs that the ONNX spec types as float32 whatever the data type (Resize roi and scales).
FLOAT32_ONLY_INPUTS = {"Resize": (1, 2), "Upsample": (1,)}


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


def check_exclude(model, patterns: Iterable[str], model_path, flag: str = "--exclude") -> None:
    """Raise if a pattern matches no node of `model`: a misspelt exclusion would quantize the layer it meant."""
    for pattern in patterns:
        if not any(node_matches(node, [pattern]) for node in model.graph.node):
            raise TrtpipeError(f"{flag} {pattern}: matches no node of {model_path} (by name, op type or regex); "
                               "list the node names with 'trtpipe inspect --json' or 'trtpipe sensitivity'")


def to_half(model, precision: Precision, keep: Iterable[str] = (), default_keep: bool = True):
    """Return a copy of `model` computing in FP16 or BF16, with FP32 inputs and outputs.

    `keep` names nodes (op type, name or regex) to compute in FP32. None-like defaults: for FP16
    the ops in FP16_KEEP_FP32 are kept too (turn off with default_keep=False); BF16 has FP32's
    range and keeps nothing by default.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    if precision not in (Precision.FP16, Precision.BF16):
        raise TrtpipeError(f"--precision {precision}: half conversion makes fp16 or bf16 only")
    half = TensorProto.FLOAT16 if precision is Precision.FP16 else TensorProto.BFLOAT16
    keep = list(keep) + (sorted(FP16_KEEP_FP32) if default_keep and precision is Precision.FP16 else [])

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    if any(attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
           for node in graph.node for attr in node.attribute):
        raise TrtpipeError("models with subgraphs (If, Loop, Scan) are not converted to half yet; export without control flow")
    types = onnxio.tensor_types(model)
    is_float = {name for name, t in types.items() if t == TensorProto.FLOAT}
    input_names = {v.name for v in graph.input}
    kept_nodes = [node_matches(node, keep) for node in graph.node]
    # Only inputs of FP32 nodes and float32-only slots read FP32: those weights keep an FP32 copy.
    read_as_fp32 = {name for node, kept in zip(graph.node, kept_nodes) for i, name in enumerate(node.input)
                    if kept or i in FLOAT32_ONLY_INPUTS.get(node.op_type, ())}
    new_nodes = []

    def cast(src: str, dst: str, to: int):
        return helper.make_node("Cast", [src], [dst], to=to, name=f"{dst}/Cast")

    # Graph inputs stay FP32; consumers read a half copy.
    renamed_inputs = {}
    for value in graph.input:
        if value.name in is_float:
            renamed_inputs[value.name] = f"{value.name}__{precision}"
            new_nodes.append(cast(value.name, renamed_inputs[value.name], half))

    # Initializers become half; those read as FP32 somewhere keep an FP32 copy.
    fp32_copies = {}
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            array = numpy_helper.to_array(init)
            if init.name in read_as_fp32:
                fp32_copies[init.name] = numpy_helper.from_array(array, f"{init.name}__fp32")
            init.CopyFrom(_half_tensor(array, init.name, half))
    used_copies = set()

    renamed_outputs = {}
    for value in graph.output:
        if value.name in is_float and value.name not in input_names:
            renamed_outputs[value.name] = f"{value.name}__{precision}"

    for node, kept in zip(graph.node, kept_nodes):
        fp32_slots = FLOAT32_ONLY_INPUTS.get(node.op_type, ())
        for i, name in enumerate(node.input):
            if name not in is_float:
                continue
            if kept or i in fp32_slots:
                if name in renamed_inputs:
                    continue  # read the FP32 graph input itself
                if name in fp32_copies:
                    node.input[i] = fp32_copies[name].name
                    used_copies.add(name)
                else:
                    node.input[i] = f"{name}__fp32_for_{len(new_nodes)}_{i}"
                    new_nodes.append(cast(renamed_outputs.get(name, name), node.input[i], TensorProto.FLOAT))
            elif name in renamed_inputs:
                node.input[i] = renamed_inputs[name]
            elif name in renamed_outputs:
                node.input[i] = renamed_outputs[name]
        if not kept:
            _retype_attributes(node, half)
        casts_after = []
        for i, name in enumerate(node.output):
            if name not in is_float:
                continue
            if kept:
                node.output[i] = f"{name}__fp32"
                casts_after.append(cast(node.output[i], renamed_outputs.get(name, name), half))
            elif name in renamed_outputs:
                node.output[i] = renamed_outputs[name]
        new_nodes.append(node)
        new_nodes.extend(casts_after)

    for name, half_name in renamed_outputs.items():
        new_nodes.append(cast(half_name, name, TensorProto.FLOAT))
    for name in used_copies:
        graph.initializer.append(fp32_copies[name])

    del graph.node[:]
    graph.node.extend(new_nodes)
    del graph.value_info[:]  # stale float32 types; ONNX Runtime and TensorRT re-infer them
    return model


def _half_tensor(array: np.ndarray, name: str, half: int):
    from onnx import TensorProto, numpy_helper

    if half == TensorProto.FLOAT16:
        with np.errstate(over="ignore"):
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
