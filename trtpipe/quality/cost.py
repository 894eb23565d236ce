"""An estimated latency per configuration: FLOPs and bytes per layer against a GPU's tensor-core
throughput and memory bandwidth (a roofline per layer), summed. Every figure it gives is
"estimated": it ranks configurations of one model on one GPU; it is not a measurement.

The model: each Conv, ConvTranspose, MatMul and Gemm is one kernel that takes
max(FLOPs / tensor throughput at its precision, bytes / bandwidth) plus a launch overhead. A
quantized layer reads its activation and weight in one byte; an unquantized one in FP16's two; both
write FP16. Element-wise ops that TensorRT fuses into the layer before them (bias, activation,
residual add, the next Q/DQ) cost nothing; every other op is one memory-bound kernel reading and
writing FP16. Depthwise and other grouped convolutions do not keep tensor cores busy, so they are
charged at CUDA-core rate (an eighth of the FP16 tensor rate), which makes them memory-bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.graph import toolkit
from trtpipe.targets import Target

LAUNCH_SECONDS = 2e-6  # per kernel: launch and tail of a small kernel on a busy stream
GROUPED_CONV_RATE = 1 / 8  # of the FP16 tensor rate: grouped convolutions run on CUDA cores
COMPUTE_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm"})
# Ops TensorRT's pointwise fusion folds into the kernel that produced their input.
FUSIBLE_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
    "Gelu", "Erf", "Elu", "Selu", "Softplus", "BatchNormalization", "Identity", "Cast",
    "QuantizeLinear", "DequantizeLinear", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
})
# Shape plumbing, and Pad (TensorRT folds it into the convolution after it): no kernel of its own.
FREE_OPS = frozenset({"Pad", "Shape", "Gather", "Constant", "ConstantOfShape", "Concat", "Slice", "Range", "Equal",
                      "Where", "Expand", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity", "Cast"})


@dataclass(frozen=True)
class Gpu:
    """Dense (no sparsity) tensor-core throughput in TFLOPS/TOPS per precision, memory bandwidth in
    GB/s, and where the figures come from. A precision the GPU lacks is absent."""

    name: str
    sm: str
    tflops: Mapping[str, float]
    bandwidth_gbs: float
    source: str


# Dense tensor-core rates (no 2:4 sparsity) and memory bandwidth. NVIDIA's data-center datasheets
# print "X | Y*" with * = with sparsity, or only the sparse figure with "* with sparsity" (L4, H100,
# H200): the dense rate is half of it. GeForce whitepapers list FP16/FP8 with FP16 and with FP32
# accumulate; the rows take FP32 accumulate (what TensorRT's kernels use), half the FP16-accumulate
# rate on GeForce. Checked 2026-11-30 against the stored copies of these tables (third-party copies
# where NVIDIA's PDF itself was not stored), named in each row and in docs/tuning.md.
GPUS: dict[str, Gpu] = {gpu.name: gpu for gpu in (
    # A10 datasheet: FP16 125 | 250* TFLOPS, INT8 250 | 500* TOPS, 600 GB/s.
    Gpu("A10", "sm86", {"fp16": 125.0, "int8": 250.0}, 600.0,
        "NVIDIA A10 datasheet, nvidia.com/en-us/data-center/products/a10-gpu (dense column of 'X | Y*')"),
    # A100 80GB SXM datasheet: FP16 312 | 624*, INT8 624 | 1248*, 2,039 GB/s (PCIe 80GB: 1,935).
    Gpu("A100", "sm80", {"fp16": 312.0, "int8": 624.0}, 2039.0,
        "NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), 80GB SXM, dense column"),
    # L4 datasheet: FP16 242*, FP8 485*, INT8 485* TOPS (sparse only), 300 GB/s.
    Gpu("L4", "sm89", {"fp16": 121.0, "int8": 242.5, "fp8": 242.5}, 300.0,
        "NVIDIA L4 datasheet, nvidia.com/en-us/data-center/l4 (sparse figures halved)"),
    # L40S datasheet: FP16 362.05 | 733*, FP8 733 | 1,466*, INT8 733 | 1,466* TOPS, 864 GB/s.
    Gpu("L40S", "sm89", {"fp16": 362.05, "int8": 733.0, "fp8": 733.0}, 864.0,
        "NVIDIA L40S datasheet, nvidia.com/en-us/data-center/l40s (dense column of 'X | Y*')"),
    # Ada whitepaper, RTX 4090: FP16 165.2 | 330.4* (FP32 acc.), FP8 330.3 | 660.6* (FP32 acc.),
    # INT8 660.6 | 1,321.2* TOPS, 1,008 GB/s.
    Gpu("RTX4090", "sm89", {"fp16": 165.2, "int8": 660.6, "fp8": 330.3}, 1008.0,
        "NVIDIA Ada Lovelace GPU architecture whitepaper, appendix A, RTX 4090 (dense, FP32 accumulate)"),
    # H100 SXM5 datasheet: FP16 1,979*, FP8 3,958*, INT8 3,958* TOPS (sparse only), 3.35 TB/s.
    Gpu("H100", "sm90", {"fp16": 989.4, "int8": 1978.9, "fp8": 1978.9}, 3350.0,
        "NVIDIA H100 datasheet, SXM, nvidia.com/en-us/data-center/h100 (sparse figures halved)"),
    # H200 SXM datasheet: the H100's compute, 4.8 TB/s.
    Gpu("H200", "sm90", {"fp16": 989.4, "int8": 1978.9, "fp8": 1978.9}, 4800.0,
        "NVIDIA H200 datasheet, SXM, nvidia.com/en-us/data-center/h200 (sparse figures halved)"),
    # RTX Blackwell whitepaper, RTX 5090: FP16 419 | 838* and FP8 838 | 1,676* with FP16 accumulate,
    # halved with FP32 accumulate; INT8 838 | 1,676* TOPS; 1,792 GB/s.
    Gpu("RTX5090", "sm120", {"fp16": 209.5, "int8": 838.0, "fp8": 419.0}, 1792.0,
        "NVIDIA RTX Blackwell GPU architecture whitepaper, appendix A, RTX 5090 (dense, FP32 accumulate)"),
)}
# The GPU a bare compute capability stands for.
DEFAULT_GPU = {"sm80": "A100", "sm86": "A10", "sm89": "L4", "sm90": "H100", "sm120": "RTX5090"}


def gpu_for(target: Target) -> Gpu:
    """Return the table's GPU for `target`: the one it names, else the one its SM stands for."""
    if target.name:
        key = "".join(target.name.upper().replace("NVIDIA", "").replace("GEFORCE", "").split())
        if key in GPUS:
            return GPUS[key]
    if target.sm in DEFAULT_GPU:
        return GPUS[DEFAULT_GPU[target.sm]]
    raise TrtpipeError(f"--target {target.sm}: no GPU of the cost table runs it; "
                       f"name one of {', '.join(GPUS)} (e.g. --target L4)")


@dataclass(frozen=True)
class Layer:
    """One kernel of the cost model: its node, whether it can be quantized, and its work."""

    name: str
    op: str
    flops: float
    act_bytes: float  # elements read that are not weights (at one byte each; FP16 doubles it)
    weight_bytes: float  # weight elements
    out_bytes: float  # elements written
    grouped: bool = False

    def seconds(self, gpu: Gpu, precision: str) -> float:
        """Return the estimated time of this kernel with its inputs in `precision` (fp16, int8, fp8)."""
        width = 1.0 if precision in ("int8", "fp8") else 2.0
        rate = gpu.tflops["fp16"] * GROUPED_CONV_RATE if self.grouped else gpu.tflops[precision]
        compute = self.flops / (rate * 1e12)
        memory = ((self.act_bytes + self.weight_bytes) * width + self.out_bytes * 2.0) / (gpu.bandwidth_gbs * 1e9)
        return max(compute, memory) + LAUNCH_SECONDS


def _numel(shape) -> float:
    return float(np.prod(shape, dtype=np.float64)) if shape is not None else 0.0


def layers_of(model, shapes: Mapping[str, tuple[int, ...]]) -> list[Layer]:
    """Return the kernels of `model` given every tensor's shape (from `tensor_shapes`)."""
    from trtpipe.calibrators.graph import constant_names

    consumers = toolkit.readers(model.graph)
    constants = constant_names(model)
    fused_into_kernel: set[str] = set()  # tensors produced by a kernel that later pointwise ops may join
    layers = []
    for node in model.graph.node:
        activations = [n for n in node.input if n and n not in constants]
        out = node.output[0] if node.output else ""
        if node.op_type in COMPUTE_OPS:
            layers.append(_compute_layer(node, shapes, constants, toolkit.label(node)))
            fused_into_kernel.add(out)
            continue
        if node.op_type in FUSIBLE_OPS and any(a in fused_into_kernel and consumers.get(a, 0) == 1 for a in activations):
            fused_into_kernel.add(out)  # joins the kernel that made its input
            continue
        if node.op_type in FREE_OPS:
            if any(a in fused_into_kernel for a in activations):
                fused_into_kernel.add(out)
            continue
        read = sum(_numel(shapes.get(a)) for a in activations)
        written = sum(_numel(shapes.get(o)) for o in node.output)
        layers.append(Layer(toolkit.label(node), node.op_type, 0.0, read, 0.0, written))
        fused_into_kernel.add(out)
    return layers


def _compute_layer(node, shapes, constants, name) -> Layer:
    inputs = list(node.input)
    out_shape = shapes.get(node.output[0])
    a_shape = shapes.get(inputs[0])
    b_shape = shapes.get(inputs[1]) if len(inputs) > 1 else None
    weight_bytes = sum(_numel(shapes.get(i)) for i in inputs[1:2] if i in constants)
    act_bytes = sum(_numel(shapes.get(i)) for i in inputs[:2] if i and i not in constants)
    out = _numel(out_shape)
    grouped = False
    if node.op_type in ("Conv", "ConvTranspose") and b_shape is not None:
        group = toolkit.attribute(node, "group", 1)
        grouped = group > 1
        per_output = _numel(b_shape[1:]) if node.op_type == "Conv" else _numel(b_shape[2:]) * b_shape[0] / max(group, 1)
        flops = 2.0 * out * per_output
    else:  # MatMul, Gemm: 2·M·K·N over the batch dimensions of the output
        k = a_shape[-1] if a_shape else 0
        if node.op_type == "Gemm" and toolkit.attribute(node, "transA", 0) and a_shape:
            k = a_shape[0]
        flops = 2.0 * out * k
    return Layer(name, node.op_type, flops, act_bytes, weight_bytes, out, grouped)


def tensor_shapes(model, feeds: Mapping[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
    """Return the shape of every tensor of `model` on `feeds`: one ONNX Runtime run with every
    node output exposed (exact through Reshape and dynamic dimensions, unlike shape inference), in
    groups when they would not fit in memory at once."""
    from trtpipe.calibrators.collect import exposed_activations

    shapes = {init.name: tuple(init.dims) for init in model.graph.initializer}
    shapes.update({name: tuple(np.shape(value)) for name, value in feeds.items()})
    names = list(dict.fromkeys(o for node in model.graph.node for o in node.output if o))
    for values in exposed_activations(model, names, [feeds]):
        shapes.update({name: tuple(np.shape(value)) for name, value in values.items()})
    return shapes


def synthetic_feeds(inputs: Iterable, opt_shapes: Mapping[str, tuple[int, ...]], batch: int = 16) -> dict[str, np.ndarray]:
    """Return inputs of the build's optimum shapes (the spec's OPT), else `batch` for a dynamic
    batch and 1 for other dynamic dimensions: zeros for floats, ones for integers (a valid token)."""
    feeds = {}
    for spec in inputs:
        shape = opt_shapes.get(spec.name) or tuple(
            (batch if i == 0 else 1) if d < 0 else d for i, d in enumerate(spec.shape))
        dtype = np.dtype(spec.dtype)
        feeds[spec.name] = np.ones(shape, dtype) if dtype.kind in "iub" else np.zeros(shape, dtype)
    return feeds


@dataclass(frozen=True)
class CostModel:
    """The kernels of one model on one GPU at one batch, ready to price configurations."""

    gpu: Gpu
    layers: tuple[Layer, ...]

    def seconds(self, precision: str, quantized: Iterable[str]) -> float:
        """Return the estimated latency with the layers named in `quantized` in `precision` and every
        other kernel in FP16."""
        if precision not in self.gpu.tflops:
            raise TrtpipeError(f"--precision {precision}: the {self.gpu.name} has no {precision} tensor cores; "
                               "pick another --target or precision")
        quantized = set(quantized)
        return sum(layer.seconds(self.gpu, precision if layer.name in quantized else "fp16") for layer in self.layers)

    def per_layer(self, precision: str, quantized: Iterable[str]) -> list[tuple[str, str, float]]:
        """Return (layer, precision, estimated seconds) per kernel, the costliest first."""
        quantized = set(quantized)
        rows = [(layer.name, precision if layer.name in quantized else "fp16",
                 layer.seconds(self.gpu, precision if layer.name in quantized else "fp16")) for layer in self.layers]
        return sorted(rows, key=lambda row: -row[2])


def cost_model(model, gpu: Gpu, feeds: Mapping[str, np.ndarray]) -> CostModel:
    """Return the cost model of `model` on `gpu` for inputs shaped like `feeds`."""
    return CostModel(gpu, tuple(layers_of(model, tensor_shapes(model, feeds))))
