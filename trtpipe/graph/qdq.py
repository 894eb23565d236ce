"""INT8 and FP8 typed ONNX: Q/DQ pairs placed the way TensorRT fuses them, scales from a cache.

Activations: QuantizeLinear -> DequantizeLinear per tensor on the inputs of Conv, MatMul and Gemm.
Weights: stored quantized per output channel with a DequantizeLinear in front of the layer.
All symmetric with zero point 0: INT8 scale = amax/127, FP8 E4M3 scale = amax/448. Biases stay
float (TensorRT rejects INT32 DequantizeLinear).

Depthwise convolutions (grouped, fewer than 4 input channels per group) stay in the unquantized type:
TensorRT-RTX pads every group of a quantized one to 4 channels, with zeros it stores in the plan
when the shapes are static (PP-PicoDet's INT8 plan: 23.8 of its 39 MB were such zeros), and their
few weights save next to nothing (docs/zoo.md, "Engine size").

`min_weights` (the spec's [quantize] min_weights) leaves every layer with fewer weight elements
unquantized, for the same plan format: a CPU-built TensorRT-RTX plan stores ~145 KB of generated
kernel source for each quantized layer, and INT8 saves one byte per weight element against FP16,
so small layers make the plan larger (open-nsfw's INT8 plan: 14.1 MB quantizing all, under FP16's
13.6 MB with min_weights = 65536).

FP8 also leaves a Conv unquantized when it has at most FP8_MIN_CHANNELS input or output channels
(per group) or a kernel of more than FP8_MAX_KERNEL elements, the rule NVIDIA Model Optimizer 0.47
applies in FP8 (TensorRT's FP8 convolutions are no faster than FP16 there). It is an accuracy rule
too: such a layer is typically the stem reading the image, whose 8-bit pixels E4M3's 3 mantissa
bits cannot hold, and a few products per output average no rounding out. On YOLOv8n it lifts FP8
from F1 0.693 to 0.889 (docs/zoo.md, "Calibration methods"). A ConvTranspose is held to the same
rule, for the same reasons (Model Optimizer quantizes none in FP8): GTCRN's decoder is eleven
transposed convolutions of 1 to 16 channels a side, and leaving them in FP16 lifts its worst channel
from 11.3 to 15.0 dB (docs/zoo.md, "FP8 beside Model Optimizer, layer by layer"). The rule does
not step aside: a model whose every layer it leaves out has no FP8 (NothingToQuantize, no_layer_for),
as Model Optimizer's FP8 graph of one quantizes nothing. Quantizing such layers anyway was tried
(RivaGAN's decoder, Basic Pitch): each engine was no faster by the rule's reason, hardly smaller than
FP16's (TensorRT-RTX stores kernel source for each quantized layer) and failed validation where FP16
passes (docs/zoo.md, "FP8 of small convolutions: none").

INT8 and FP8 both leave a MatMul or Gemm unquantized whose constant weight has an inner (K) or output (N)
dimension under MIN_GEMM_DIM, Model Optimizer 0.47's small-GEMM rule: Tensor Core kernels need 16 a
side to gain anything, and the layer is typically a head mapping features to a few scores, where one
rounding step moves a decision. On spindle-eeg's INT8 it lifts the spindles within tolerance of FP32's
from 0.9688 to 0.9922 (detection_head.3, 51x3, and segmentation_head.1, 64x1; docs/zoo.md). Where
nothing would remain quantized it steps aside (gemm_rule_holds): an MLP of narrow layers is quantized whole.

INT8 leaves a layer unquantized whose input is a Softmax's probabilities (an attention's weights times V,
YOLOv8's distribution of box edges through its DFL convolution): on INT8's uniform grid, a step of 1/127
of the largest, every probability under 1/254 becomes 0 and the rest move by up to 0.4% of the largest,
where an attention row over 197 tokens averages 0.005. E4M3's grid is logarithmic and holds them, so FP8
quantizes these layers (Model Optimizer leaves a masked attention core out of INT8, not of FP8). The zoo's
INT8 rows with it: vit-focus and khmersm fail -> pass, ppocr-rec's exact match 0.53 -> 0.72, yolov8n's box
IoU 0.937 -> 0.951 (docs/zoo.md, "Softmax's probabilities in INT8").
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from trtpipe.calibrators.cache import CalibrationTable
from trtpipe.calibrators.graph import activation_inputs, constant_names, weight_slot
from trtpipe.errors import NothingToQuantize, TrtpipeError
from trtpipe.graph import onnxio, toolkit
from trtpipe.graph.keep import ACTIVATION_HEADROOM, HALF_RANGE, KeptNode, node_matches
from trtpipe.targets import Precision

QMAX = {Precision.INT8: 127.0, Precision.FP8: 448.0}
# A quantized grouped Conv with fewer input channels per group is padded to this many by TensorRT-RTX.
MIN_GROUP_CHANNELS = 4
# FP8's Conv rule (see the module's doc): Model Optimizer's thresholds.
FP8_MIN_CHANNELS = 16
FP8_MAX_KERNEL = 32
# The small-GEMM rule (see the module's doc): Model Optimizer's threshold.
MIN_GEMM_DIM = 16
# In a graph computing in FP16, a layer reading a tensor calibrated beyond this stays unquantized: safe FP16's
# limit for activations (keep.py), past which an INT8 or FP8 scale, or the values it dequantizes, overflow
# FP16 (terrain-cm's UNet reaches 2.6e10: 73 of its 201 tensors; their scales were written as inf).
FP16_ACTIVATION_LIMIT = HALF_RANGE[Precision.FP16][0] / ACTIVATION_HEADROOM
# FP8 weight scales: the positions in E4M3's top octave a channel's largest |w| may take (see choose_weight_steps).
WEIGHT_STEPS = 16
MIN_OPSET = {Precision.INT8: 13, Precision.FP8: 19}  # per-axis DequantizeLinear; float8 types
# The typed ONNX's metadata key listing the Conv/MatMul/Gemm layers Q/DQ left unquantized, and why
# (JSON, as KeptNode); the build copies it to the sidecar.
UNQUANTIZED_KEY = "trtpipe.unquantized_layers"


def weight_axis(node, weight: np.ndarray, slot: int = 1) -> int | None:
    """Return the output-channel axis of a layer's weight in input `slot`; None: one scale for all.

    Conv weights are [C_out, C_in/g, k...]; ConvTranspose [C_in, C_out/g, k...]; Gemm's B is [K, N]
    ([N, K] with transB) and its A [M, K] ([K, M] with transA); MatMul's B is [..., K, N] and its
    A [..., M, K]. A 1-D MatMul operand has no output channel.
    """
    def attr(name):
        return toolkit.attribute(node, name, 0)

    if node.op_type == "Conv":
        return 0
    if node.op_type == "ConvTranspose":
        return 1
    if node.op_type == "Gemm":
        if slot == 1:
            return 0 if attr("transB") else 1
        return 1 if attr("transA") else 0
    if weight.ndim < 2:
        return None
    return weight.ndim - 1 if slot == 1 else weight.ndim - 2


def fp16_scale(scale: np.ndarray) -> np.ndarray:
    """Return `scale` rounded up to a positive FP16 value, as float32.

    A graph computing in FP16 holds its Q/DQ scales in FP16. A tiny per-channel weight scale would
    round to zero there, and TensorRT rejects a zero scale. Rounding up clips nothing, and the
    weights are quantized with the very scale the graph stores.
    """
    scale = np.asarray(scale, np.float32)
    if scale.size and float(scale.max()) > HALF_RANGE[Precision.FP16][0]:  # what reaches here is a weight's
        raise TrtpipeError(f"a Q/DQ scale of {float(scale.max()):.3g} is beyond FP16's range, where the graph around "
                           "it computes; quantize with --unquantized fp32")
    half = scale.astype(np.float16)
    half = np.where(half.astype(np.float32) < scale, np.nextafter(half, np.float16(np.inf)), half)
    return np.maximum(half, np.float16(2.0**-24)).astype(np.float32)  # 2**-24: FP16's least positive value


def quantize_weight(weight: np.ndarray, axis: int | None, precision: Precision,
                    scales_fit_fp16: bool = False, steps=None) -> tuple[np.ndarray, np.ndarray]:
    """Return (quantized weight, per-channel scale) for symmetric quantization along `axis`.

    `axis` None: one scale for the whole tensor (a 0-d scale array). `steps` (FP8, one a channel):
    each channel's largest |w| goes to 448 x 2^(-step/WEIGHT_STEPS) instead of 448 (choose_weight_steps).
    """
    if axis is None:
        q, scale = quantize_weight(weight.reshape(1, -1), 0, precision, scales_fit_fp16,
                                   None if steps is None else np.reshape(steps, 1))
        return q.reshape(weight.shape), scale.reshape(())
    reduce_axes = tuple(i for i in range(weight.ndim) if i != axis)
    amax = np.abs(weight).max(axis=reduce_axes) if reduce_axes else np.abs(weight)
    top = QMAX[precision] if steps is None else QMAX[precision] * 2.0 ** (-np.asarray(steps, np.float64) / WEIGHT_STEPS)
    scale = np.where(amax > 0, amax / top, 1.0).astype(np.float32)
    if scales_fit_fp16:
        scale = fp16_scale(scale)
    shape = [1] * weight.ndim
    shape[axis] = -1
    scaled = weight / scale.reshape(shape)
    if precision is Precision.INT8:
        return np.clip(np.round(scaled), -127, 127).astype(np.int8), scale
    import ml_dtypes

    return np.clip(scaled, -448, 448).astype(ml_dtypes.float8_e4m3fn), scale


def chosen_steps(weight_steps: Mapping[str, tuple[int, ...]], weight: str, array: np.ndarray, axis: int | None,
                 precision: Precision) -> tuple[int, ...] | None:
    """Return the FP8 grid positions `weight_steps` (a cache's) chose for `weight` read along `axis`, None for 448
    (INT8, none chosen, or a count of channels that does not match: a weight read along another axis)."""
    steps = weight_steps.get(weight) if precision is Precision.FP8 else None
    channels = 1 if axis is None else array.shape[axis]
    return steps if steps is not None and len(steps) == channels else None


def depthwise(node, values: dict[str, np.ndarray]) -> bool:
    """Return True for a grouped Conv with fewer than MIN_GROUP_CHANNELS input channels per group."""
    if node.op_type != "Conv" or len(node.input) < 2 or node.input[1] not in values:
        return False
    group = toolkit.attribute(node, "group", 1)
    weight = values[node.input[1]]
    return group > 1 and weight.ndim >= 2 and weight.shape[1] < MIN_GROUP_CHANNELS


def gemm_dims(node, weight: np.ndarray, slot: int) -> tuple[int, ...]:
    """Return the GEMM dimensions the MatMul/Gemm `node`'s constant weight in input `slot` fixes: (K, N) for
    the second operand, (K,) for the first (its other side is the output's rows, not a channel)."""
    if weight.ndim < 2:
        return ()
    if node.op_type == "Gemm":
        trans = toolkit.attribute(node, "transB" if slot == 1 else "transA", 0)
        rows, cols = weight.shape[::-1] if trans else weight.shape
        return (rows, cols) if slot == 1 else (cols,)
    return tuple(weight.shape[-2:]) if slot == 1 else (weight.shape[-1],)


def small_layer(node, constants: set[str], values: dict[str, np.ndarray], precision: Precision | None,
                gemms: bool = True) -> str | None:
    """Return why `precision` leaves `node` unquantized for its size, None if it does not: where `gemms`, a
    MatMul/Gemm with a weight dimension under MIN_GEMM_DIM (INT8 and FP8); in FP8 a Conv or ConvTranspose of
    few channels or of a large kernel."""
    if precision not in QMAX:
        return None
    if node.op_type in ("MatMul", "Gemm"):
        slot = weight_slot(node, constants)
        weight = values.get(node.input[slot]) if slot is not None else None
        dims = gemm_dims(node, weight, slot) if weight is not None and slot is not None else ()
        if gemms and dims and min(dims) < MIN_GEMM_DIM:
            named = " and ".join(f"{side} {size}" for side, size in zip(("K", "N"), dims))
            return f"a GEMM of {named}, under {MIN_GEMM_DIM} on one side (Model Optimizer's small-GEMM rule)"
        return None
    if precision is not Precision.FP8 or node.op_type not in ("Conv", "ConvTranspose") \
            or len(node.input) < 2 or node.input[1] not in values:
        return None
    weight = values[node.input[1]]
    if weight.ndim < 3:
        return None
    # Conv's weight is [C_out, C_in/g, k...], ConvTranspose's [C_in, C_out/g, k...]: the same rule on both sides.
    outputs, inputs = weight.shape[:2] if node.op_type == "Conv" else weight.shape[1::-1]
    kernel = int(np.prod(weight.shape[2:]))
    if min(outputs, inputs) <= FP8_MIN_CHANNELS:
        return f"fp8: {inputs} input and {outputs} output channels per group, at most {FP8_MIN_CHANNELS} on one side"
    if kernel > FP8_MAX_KERNEL:
        return f"fp8: a kernel of {kernel} elements, over {FP8_MAX_KERNEL}"
    return None


def no_layer_for(model, precision: Precision, exclude: Iterable[str] = (), min_weights: int = 0,
                 quantize_depthwise: bool = False) -> str | None:
    """Return why `precision` has no layer of `model` to quantize by the graph alone: every Conv, MatMul and Gemm
    excluded, under `min_weights`, depthwise (unless `quantize_depthwise`) or too small for FP8 (its Conv rule does
    not step aside: see the module's doc); None where some layer is one it quantizes. Found before calibration reads
    any data, and by build and deploy, which skip the precision."""
    constants, values = constant_names(model), float_constants(model)
    exclude = list(exclude)
    why: dict[str, int] = {}
    for node in (n for n in model.graph.node if activation_inputs(n, constants)):
        if node_matches(node, exclude):
            reason = "excluded (the spec's [quantize] exclude or --exclude)"
        elif min_weights and weight_elements(node, constants, values) < min_weights:
            reason = f"under min_weights {min_weights}"
        elif not quantize_depthwise and depthwise(node, values):
            reason = f"a depthwise convolution (TensorRT-RTX pads a quantized one's groups to {MIN_GROUP_CHANNELS} channels)"
        elif small_layer(node, constants, values, precision, gemms=False) is not None:
            reason = "too small for fp8"
        else:
            return None
        why[reason] = why.get(reason, 0) + 1
    if not why:
        return None
    if list(why) == ["too small for fp8"]:
        return (f"no layer to quantize in {precision}: each of the model's convolutions ({why['too small for fp8']}) "
                f"has at most {FP8_MIN_CHANNELS} channels on a side or a kernel over {FP8_MAX_KERNEL} elements, where "
                "TensorRT's FP8 kernels are no faster than FP16's (Model Optimizer's rule); build it in fp16 instead")
    fixes = [fix for start, fix in (("excluded", "exclude fewer layers"),
                                    ("under min_weights", "lower min_weights ([quantize] or --min-weights)"))
             if any(r.startswith(start) for r in why)]
    return (f"no layer to quantize in {precision}: each of the model's layers ({sum(why.values())}) is "
            + " or ".join(why) + "; " + ", or ".join(["build it in fp16 instead", *fixes]))


def probabilities(graph) -> set[str]:
    """Return the tensors that hold a Softmax's output, as it is or only moved (toolkit.MOVES_VALUES: an
    attention's heads split)."""
    held = {node.output[0] for node in graph.node if node.op_type == "Softmax"}
    for node in graph.node:  # nodes are in topological order
        if node.op_type in toolkit.MOVES_VALUES and node.input and node.input[0] in held:
            held.add(node.output[0])
    return held


def weight_elements(node, constants: set[str], values: dict[str, np.ndarray]) -> int:
    """Return how many elements the layer's constant weight holds (0 for an activation-only MatMul)."""
    slot = weight_slot(node, constants)
    weight = values.get(node.input[slot]) if slot is not None else None
    return 0 if weight is None else int(weight.size)


@dataclass(frozen=True)
class Placement:
    """What Q/DQ placement reads of one graph, found once: its constants and float weights, the cache's
    scales, the precision and the user's limits (see insert_qdq), and the tensors that hold a Softmax's
    probabilities (probabilities())."""

    constants: set[str]
    values: dict[str, np.ndarray]
    table: CalibrationTable
    precision: Precision | None = None
    quantize_depthwise: bool = False
    min_weights: int = 0
    softmaxed: Collection[str] = ()
    fp16: bool = False  # the graph around the layers computes in FP16 (insert_qdq's scales_fit_fp16)

    @classmethod
    def of(cls, model, table: CalibrationTable, precision: Precision | None = None, quantize_depthwise: bool = False,
           min_weights: int = 0, fp16: bool = False) -> Placement:
        return cls(constant_names(model), float_constants(model), table, precision, quantize_depthwise, min_weights,
                   probabilities(model.graph), fp16)

    def why_left_out(self, node, gemms: bool = True) -> str | None:
        """Return why Q/DQ insertion leaves the Conv/MatMul/Gemm `node` unquantized, None if it quantizes it:
        an activation without a scale, a depthwise Conv unless `quantize_depthwise`, fewer than `min_weights`
        weight elements, in INT8 an input among the Softmax's probabilities, a layer too small for the
        precision (small_layer; the small-GEMM rule where `gemms`, gemm_rule_holds' answer)."""
        activations = activation_inputs(node, self.constants)
        missing = [name for name in activations if name not in self.table.amax]
        if missing:
            return f"no scale for '{missing[0]}' in the cache"
        if not self.quantize_depthwise and depthwise(node, self.values):
            return f"depthwise convolution: TensorRT-RTX pads a quantized one's groups to {MIN_GROUP_CHANNELS} channels"
        if self.min_weights and (count := weight_elements(node, self.constants, self.values)) < self.min_weights:
            return f"{count} weight elements, under min_weights {self.min_weights}"
        read = next((name for name in activations if name in self.softmaxed), None)
        if self.precision is Precision.INT8 and read is not None:
            return f"int8: reads '{read}', a Softmax's probabilities, whose small values INT8's uniform grid rounds to 0"
        beyond = next((name for name in activations if self.table.amax[name] > FP16_ACTIVATION_LIMIT), None)
        if self.fp16 and beyond is not None:
            return (f"reads '{beyond}', calibrated to {self.table.amax[beyond]:.3g}, beyond what FP16 holds "
                    f"({FP16_ACTIVATION_LIMIT:.0f} with safe FP16's headroom): in the FP16 graph around it, its scale "
                    "and dequantized values would overflow")
        return small_layer(node, self.constants, self.values, self.precision, gemms)

    def gemm_rule_holds(self, nodes, exclude=()) -> bool:
        """Return whether the small-GEMM rule leaves some layer quantized: where it would leave none (an MLP of
        narrow layers) it steps aside and every GEMM is quantized, as the layers' own precision asks."""
        return any(activation_inputs(node, self.constants) and not node_matches(node, exclude)
                   and self.why_left_out(node) is None for node in nodes)

    def quantizable(self, node, gemms: bool = True) -> bool:
        """Return True if Q/DQ insertion quantizes `node`: a Conv/MatMul/Gemm with an activation input that
        nothing leaves out (why_left_out)."""
        return bool(activation_inputs(node, self.constants)) and self.why_left_out(node, gemms) is None


def _zero_point(precision: Precision, size: int):
    if precision is Precision.INT8:
        return np.zeros(size, np.int8)
    import ml_dtypes

    return np.zeros(size, ml_dtypes.float8_e4m3fn)


def insert_qdq(model, table: CalibrationTable, precision: Precision, exclude: Iterable[str] = (),
               scales_fit_fp16: bool = False, only: Iterable[str] | None = None, quantize_depthwise: bool = False,
               min_weights: int = 0):
    """Return a copy of the FP32 `model` with Q/DQ for `precision`, and the names of quantized nodes.

    `scales_fit_fp16`: every scale is an FP16 value, for a graph that will compute in FP16.
    `only`: node names to quantize; the others are left alone (per-layer sensitivity).
    `quantize_depthwise`: quantize depthwise convolutions too (left out by default: see the module's doc);
    it does not lift FP8's rule for few channels, which leaves most depthwise convolutions out anyway.
    `min_weights`: leave layers with fewer weight elements unquantized (see the module's doc).
    """
    from onnx import helper, numpy_helper

    if precision not in QMAX:
        raise TrtpipeError(f"--precision {precision}: Q/DQ insertion makes int8 or fp8")
    exclude = list(exclude)
    if (why := no_layer_for(model, precision, exclude, min_weights, quantize_depthwise)) is not None:
        raise NothingToQuantize(why)
    only = set(only) if only is not None else None
    model = onnxio.with_opset(toolkit.copy(model), MIN_OPSET[precision])
    graph = model.graph
    placement = Placement.of(model, table, precision, quantize_depthwise, min_weights, scales_fit_fp16)
    constants, values = placement.constants, placement.values
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
    weights_done: dict[tuple[str, int | None], str] = {}
    quantized_nodes = []
    left_out: list[KeptNode] = []
    new_nodes = []
    names = toolkit.NewNames(graph)

    def add_scale(stem: str, values) -> str:
        values = fp16_scale(values) if scales_fit_fp16 else np.asarray(values, np.float32)
        name = names.new(stem)
        new_initializers.append(numpy_helper.from_array(values, name))
        return name

    def add_zero_point(stem: str, size: int, scalar: bool) -> str:
        zp = _zero_point(precision, size)
        name = names.new(stem)
        new_initializers.append(numpy_helper.from_array(zp.reshape(()) if scalar else zp, name))
        return name

    gemms = placement.gemm_rule_holds(graph.node, exclude)
    for node in graph.node:
        activations = activation_inputs(node, constants)
        slot = weight_slot(node, constants)
        weight = node.input[slot] if slot is not None else None
        if not activations or (only is not None and toolkit.label(node) not in only):
            new_nodes.append(node)
            continue
        reason = ("excluded (--exclude or the spec's [quantize] exclude)" if node_matches(node, exclude) else
                  placement.why_left_out(node, gemms))
        if reason is not None:
            left_out.append(KeptNode(toolkit.label(node), node.op_type, reason))
            new_nodes.append(node)
            continue
        for name in activations:
            if name not in dequantized:
                amax = table.amax[name]
                scale = add_scale(f"{name}__scale", amax / qmax if amax > 0 else 1.0)
                zp = add_zero_point(f"{name}__zero_point", 1, scalar=True)
                q_name, dq_name = names.new(f"{name}__q"), names.new(f"{name}__dq")
                new_nodes.append(helper.make_node("QuantizeLinear", [name, scale, zp], [q_name], name=f"{name}/QuantizeLinear"))
                new_nodes.append(helper.make_node("DequantizeLinear", [q_name, scale, zp], [dq_name], name=f"{name}/DequantizeLinear"))
                dequantized[name] = dq_name
        for i, name in enumerate(node.input):
            if name in activations:
                node.input[i] = dequantized[name]
        if slot is not None and weight in values:
            array = values[weight]
            axis = weight_axis(node, array, slot)
            key = (weight, axis)  # one weight read along two axes (W and W^T users) gets two DQs
            if key not in weights_done:
                stem = weight if not any(k[0] == weight for k in weights_done) else f"{weight}__axis{axis}"
                q, weight_scale = quantize_weight(array, axis, precision, scales_fit_fp16,
                                                  chosen_steps(table.weight_steps, weight, array, axis, precision))
                quantized = names.new(f"{stem}__quantized")
                new_initializers.append(numpy_helper.from_array(q, quantized))
                scale_name = add_scale(f"{stem}__scale", weight_scale)
                zp_name = add_zero_point(f"{stem}__zero_point", weight_scale.size, scalar=axis is None)
                weights_done[key] = names.new(f"{stem}__dq")
                dequantize = helper.make_node("DequantizeLinear", [quantized, scale_name, zp_name], [weights_done[key]],
                                              name=f"{stem}/DequantizeLinear")
                if axis is not None:
                    toolkit.set_attribute(dequantize, "axis", axis)
                new_nodes.append(dequantize)
            node.input[slot] = weights_done[key]
        new_nodes.append(node)
        quantized_nodes.append(toolkit.label(node))

    # Constant nodes whose weights now live quantized are read by nobody: drop them with the initializers.
    used = toolkit.names_needed(graph, new_nodes)
    new_nodes = [n for n in new_nodes if not (n.op_type == "Constant" and n.output[0] not in used)]
    if not quantized_nodes:  # NothingToQuantize: `build --precision auto` and deploy skip the precision, as for FP8's rule
        raise NothingToQuantize(f"nothing to quantize in {precision}: every Conv, MatMul and Gemm is excluded, depthwise, "
                                "under min_weights or lacks scales; check --exclude, --min-weights and --cache, or build "
                                "it in fp16")
    # Weights now read only through their DequantizeLinear; drop the float originals nobody uses.
    used = toolkit.names_needed(graph, new_nodes)
    kept = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + new_initializers)
    del graph.node[:]
    graph.node.extend(new_nodes)
    if left_out:
        onnxio.set_metadata(model, UNQUANTIZED_KEY, json.dumps([k.to_json() for k in left_out]))
    return model, quantized_nodes


def float_constants(model) -> dict[str, np.ndarray]:
    """Return the float32 values of the model's initializers and Constant nodes, by name."""
    from onnx import TensorProto, numpy_helper

    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer
              if init.data_type == TensorProto.FLOAT}
    for node in model.graph.node:
        tensor = toolkit.attribute(node, "value") if node.op_type == "Constant" else None
        if tensor is not None and tensor.data_type == TensorProto.FLOAT:
            values[node.output[0]] = numpy_helper.to_array(tensor)
    return values
