"""INT8 and FP8 typed ONNX: Q/DQ pairs placed the way TensorRT fuses them, scales from a cache.

Activations: QuantizeLinear -> DequantizeLinear per tensor on the inputs of Conv, MatMul and Gemm.
Weights: stored quantized per output channel with a DequantizeLinear in front of the layer.
All symmetric with zero point 0: INT8 scale = amax/127, FP8 E4M3 scale = amax/448. Biases stay
float (TensorRT rejects INT32 DequantizeLinear).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from calibrators.cache import CalibrationTable
from calibrators.graph import activation_inputs, constant_names, weight_input
from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio
from trtpipe.graph.half import node_matches
from trtpipe.targets import Precision

QMAX = {Precision.INT8: 127.0, Precision.FP8: 448.0}
MIN_OPSET = {Precision.INT8: 13, Precision.FP8: 19}  # per-axis DequantizeLinear; float8 types


def weight_axis(node, weight: np.ndarray) -> int:
    """Return the output-channel axis of a layer's weight."""
    if node.op_type == "Conv":
        return 0
    if node.op_type == "ConvTranspose":
        return 1
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return weight.ndim - 1  # MatMul: [..., K, N]


def fp16_scale(scale: np.ndarray) -> np.ndarray:
    """Return `scale` rounded up to a positive FP16 value, as float32.

    A graph computing in FP16 holds its Q/DQ scales in FP16. A tiny per-channel weight scale would
    round to zero there, and TensorRT rejects a zero scale. Rounding up clips nothing, and the
    weights are quantized with the very scale the graph stores.
    """
    scale = np.asarray(scale, np.float32)
    half = scale.astype(np.float16)
    half = np.where(half.astype(np.float32) < scale, np.nextafter(half, np.float16(np.inf)), half)
    return np.maximum(half, np.float16(2.0**-24)).astype(np.float32)  # 2**-24: FP16's least positive value


def quantize_weight(weight: np.ndarray, axis: int, precision: Precision,
                    scales_fit_fp16: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Return (quantized weight, per-channel scale) for symmetric quantization along `axis`."""
    reduce_axes = tuple(i for i in range(weight.ndim) if i != axis)
    amax = np.abs(weight).max(axis=reduce_axes) if reduce_axes else np.abs(weight)
    scale = np.where(amax > 0, amax / QMAX[precision], 1.0).astype(np.float32)
    if scales_fit_fp16:
        scale = fp16_scale(scale)
    shape = [1] * weight.ndim
    shape[axis] = -1
    scaled = weight / scale.reshape(shape)
    if precision is Precision.INT8:
        return np.clip(np.round(scaled), -127, 127).astype(np.int8), scale
    import ml_dtypes

    return np.clip(scaled, -448, 448).astype(ml_dtypes.float8_e4m3fn), scale


def layer_name(node) -> str:
    """Return the name a layer goes by in --exclude lists and reports: its node name, else its output."""
    return node.name or node.output[0]


def quantizable(node, constants: set[str], table: CalibrationTable) -> bool:
    """Return True if Q/DQ insertion can quantize `node`: a Conv/MatMul/Gemm whose activations all have scales."""
    activations = activation_inputs(node, constants)
    return bool(activations) and all(name in table.amax for name in activations)


def _zero_point(precision: Precision, size: int):
    if precision is Precision.INT8:
        return np.zeros(size, np.int8)
    import ml_dtypes

    return np.zeros(size, ml_dtypes.float8_e4m3fn)


def insert_qdq(model, table: CalibrationTable, precision: Precision, exclude: Iterable[str] = (),
               scales_fit_fp16: bool = False, only: Iterable[str] | None = None):
    """Return a copy of the FP32 `model` with Q/DQ for `precision`, and the names of quantized nodes.

    `scales_fit_fp16`: every scale is an FP16 value, for a graph that will compute in FP16.
    `only`: node names to quantize; the others are left alone (per-layer sensitivity).
    """
    import onnx
    from onnx import helper, numpy_helper

    if precision not in QMAX:
        raise TrtpipeError(f"--precision {precision}: Q/DQ insertion makes int8 or fp8")
    exclude = list(exclude)
    only = set(only) if only is not None else None
    model = onnxio.with_opset(onnx.ModelProto.FromString(model.SerializeToString()), MIN_OPSET[precision])
    graph = model.graph
    constants = constant_names(model)
    initializers = {init.name: init for init in graph.initializer}
    qmax = QMAX[precision]
    inputs_needed = {n for node in graph.node for n in activation_inputs(node, constants)}
    missing = sorted(n for n in inputs_needed if n not in table.amax)
    if missing and len(missing) == len(inputs_needed):
        raise TrtpipeError(
            f"--cache: none of the model's {len(inputs_needed)} quantized tensors is in the cache "
            f"(first: '{missing[0]}'); calibrate this model with 'trtpipe calibrate'"
        )

    new_initializers = []
    dequantized: dict[str, str] = {}  # activation -> its DequantizeLinear output
    weights_done: dict[str, str] = {}
    quantized_nodes = []
    new_nodes = []

    def add_scale(name: str, values) -> str:
        values = fp16_scale(values) if scales_fit_fp16 else np.asarray(values, np.float32)
        new_initializers.append(numpy_helper.from_array(values, name))
        return name

    def add_zero_point(name: str, size: int, scalar: bool) -> str:
        zp = _zero_point(precision, size)
        new_initializers.append(numpy_helper.from_array(zp.reshape(()) if scalar else zp, name))
        return name

    for node in graph.node:
        activations = activation_inputs(node, constants)
        weight = weight_input(node, constants)
        if (not quantizable(node, constants, table) or node_matches(node, exclude)
                or (only is not None and layer_name(node) not in only)):
            new_nodes.append(node)
            continue
        for name in activations:
            if name not in dequantized:
                amax = table.amax[name]
                scale = add_scale(f"{name}__scale", amax / qmax if amax > 0 else 1.0)
                zp = add_zero_point(f"{name}__zero_point", 1, scalar=True)
                new_nodes.append(helper.make_node("QuantizeLinear", [name, scale, zp], [f"{name}__q"], name=f"{name}/QuantizeLinear"))
                new_nodes.append(helper.make_node("DequantizeLinear", [f"{name}__q", scale, zp], [f"{name}__dq"], name=f"{name}/DequantizeLinear"))
                dequantized[name] = f"{name}__dq"
        for i, name in enumerate(node.input):
            if name in activations:
                node.input[i] = dequantized[name]
        if weight is not None and weight in initializers and initializers[weight].data_type == onnx.TensorProto.FLOAT:
            if weight not in weights_done:
                array = numpy_helper.to_array(initializers[weight])
                axis = weight_axis(node, array)
                q, scale = quantize_weight(array, axis, precision, scales_fit_fp16)
                new_initializers.append(numpy_helper.from_array(q, f"{weight}__quantized"))
                add_scale(f"{weight}__scale", scale)
                add_zero_point(f"{weight}__zero_point", scale.size, scalar=False)
                new_nodes.append(helper.make_node(
                    "DequantizeLinear", [f"{weight}__quantized", f"{weight}__scale", f"{weight}__zero_point"],
                    [f"{weight}__dq"], axis=axis, name=f"{weight}/DequantizeLinear"))
                weights_done[weight] = f"{weight}__dq"
            node.input[list(node.input).index(weight)] = weights_done[weight]
        new_nodes.append(node)
        quantized_nodes.append(layer_name(node))

    if not quantized_nodes:
        raise TrtpipeError("nothing was quantized: every Conv, MatMul and Gemm is excluded or lacks scales; check --exclude and --cache")
    # Weights now read only through their DequantizeLinear; drop the float originals nobody uses.
    used = {name for node in new_nodes for name in node.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + new_initializers)
    del graph.node[:]
    graph.node.extend(new_nodes)
    return model, quantized_nodes
