"""The `auto` method: for each tensor, the candidate amax whose quantization error at the output of
the layers it feeds is least on the calibration data.

The candidates come from the one histogram pass (entropy, max, percentile 99.99 and 99.999, MSE).
No single method serves every tensor: entropy clips a tensor whose few outlying channels meet a
layer's largest weights (PP-OCRv4's recognizer, cosine 0.37 with entropy everywhere), max wastes
the grid on a tensor with rare, harmless spikes. A histogram of the tensor alone cannot tell these
apart, since it sees neither the channels nor the weights; the layer's output does. So a second,
short pass over the calibration data runs each Conv/MatMul/Gemm alone, with its real (per-channel
quantized) weights, on its input quantized at each candidate, and compares the output with the FP32
model's. Every layer is judged on its own: no search over the whole model.

In INT8 no tensor is cut below its 99.99th percentile (CLIP_FLOOR): the candidate of least layer
error is raised to it when it is smaller. A layer's error weighs clipping like rounding, but they do
not travel alike: rounding is noise that the next layers average, clipping cuts the largest values
the same way on every sample, a bias that adds up downstream. PP-OCRv4's detector shows it: every
tensor's least-error amax, 25 of 61 of them under that percentile, gave a mask IoU of 0.896 and
failed where max passed; with the floor, 0.922 (docs/zoo.md, "Calibration methods").

In FP8 every candidate reaches past the calibration data's max (covering): it is raised by powers of two
to FP8_HEADROOM times the tensor's max. E4M3's grid is logarithmic, so doubling amax doubles every grid
point: a value in the normal range rounds to the same point, and only the values past the old amax, which
saturated, and those in the lowest binade, which turn subnormal, move. A candidate keeps where values land
between grid points, which the layer's error chooses among, and loses its clipping, which the layer's error
weighs like rounding and which, as in INT8, is a bias that adds up downstream. The binade past the max is
for what calibration did not see: a recurrent state grows over a whole utterance past what calibration's
short windows show, and saturates there at every later step. On the zoo's streamed models (docs/zoo.md,
"FP8 headroom: a binade past the max"): gtcrn's FP8 went from failing (a band at 2.8 dB) to passing,
silero-vad's from failing (125 of 128 decisions) to passing, fsmn-vad's segments from 52 of 64 recordings
to 57, dtln-stage2 passing as before. Model Optimizer's FP8 scale has headroom too (its INT8 amax x 448/127).

In FP8 the weights are placed first. E4M3's grid is logarithmic, so where a weight channel's values
land between its points depends on the scale, and putting the channel's largest |w| on 448 (what
TensorRT and a plain max do) is one of many placements that clip nothing. Each channel takes the one
of WEIGHT_STEPS positions, 448 x 2^(-j/16) for j = 0..15 (one octave: the grid repeats past it), whose
rounding gives that channel's output the least squared error on the calibration data, the layer run
alone on its FP32 input (each output channel reads one weight channel, so every channel is judged in
the same 16 runs). A steady rounding bias is what it removes: slovorez's 96 -> 27 tag head reads a
ReLU's output, and its exact match went from 0.961 to 0.984 (docs/zoo.md). The positions live in the
cache's sidecar (TensorRT's cache format has no place for them); a cache without one keeps 448.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import numpy as np

from trtpipe.calibrators.amax import FP8_E4M3_MAX, compute_amax, percentile_amax
from trtpipe.calibrators.histogram import StreamingHistogram

# In this order ties go to the first (candidates of equal amax are one candidate).
CANDIDATES = ("entropy", "max", "percentile 99.99", "percentile 99.999", "mse")
# INT8: the least amax `auto` takes for a tensor (see the module's doc).
CLIP_FLOOR = "percentile 99.99"
# FP8: how far past the calibration data's max each candidate reaches (see the module's doc).
FP8_HEADROOM = 2.0
# What `auto` decides by, recorded in a cache's sidecar: a cache chosen by another rule is stale.
RULE = f"least layer-output error; int8 not under {CLIP_FLOOR}"
# What places FP8 weights and raises FP8 candidates, recorded beside RULE in an FP8 cache's sidecar.
WEIGHT_RULE = ("fp8 weight channels at the least output error of their grid positions; fp8 candidates raised by "
               f"powers of two to {FP8_HEADROOM:g} times the tensor's max")
# The choice pass reads at most this many calibration samples: enough to rank five candidates per
# tensor, and it runs each quantized layer once per candidate, so it costs more per sample than the histograms.
CHOICE_SAMPLES = 64
# It holds every quantized layer's inputs and outputs of a batch at once: small batches keep that
# near the histogram pass's memory (the errors are sums over samples, whatever the batch).
CHOICE_BATCH = 4


def candidate_amax(hist: StreamingHistogram, grid: str) -> dict[str, float]:
    """Return {candidate: amax} for one tensor's histogram, the candidates of CANDIDATES (in FP8 each covering
    the tensor's max: see the module's doc)."""
    if hist.empty:
        return {"max": 0.0}
    found = {"entropy": compute_amax(hist, "entropy", grid),
             "max": hist.max,
             "percentile 99.99": percentile_amax(hist.counts, hist.width, 99.99),
             "percentile 99.999": percentile_amax(hist.counts, hist.width, 99.999),
             "mse": compute_amax(hist, "mse", grid)}
    return {name: covering(amax, hist.max, grid) for name, amax in found.items()}


def covering(amax: float, top: float, grid: str) -> float:
    """Return `amax` times the least power of two that reaches FP8_HEADROOM times `top`, the tensor's max, on the
    FP8 grid; `amax` itself on INT8's (its uniform grid has no free binade: see the module's doc)."""
    if grid != "fp8" or amax <= 0 or amax >= FP8_HEADROOM * top:
        return amax
    return float(amax * 2.0 ** np.ceil(np.log2(FP8_HEADROOM * top / amax)))


def quantize_signed(x: np.ndarray, amax: float, grid: str) -> np.ndarray:
    """Return `x` after the typed ONNX's symmetric Q/DQ at `amax` on `grid`, as float32.

    'int8': steps of amax/127, rounded half to even, clipped to [-127, 127] steps (what a symmetric
    calibration uses of INT8). 'fp8': E4M3 with amax at 448, rounded to nearest even and saturated,
    through ml_dtypes' cast (amax.fake_quantize computes the same grid on histogram bins, not tensors).
    """
    x = np.asarray(x, dtype=np.float32)
    if amax <= 0:
        return np.zeros_like(x)
    if grid == "int8":
        scale = np.float32(amax / 127.0)
        return np.clip(np.rint(x / scale), -127.0, 127.0) * scale
    if grid == "fp8":
        import ml_dtypes

        scale = np.float32(amax / FP8_E4M3_MAX)
        scaled = np.clip(x / scale, -FP8_E4M3_MAX, FP8_E4M3_MAX)
        return scaled.astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale
    raise ValueError(f"unknown grid {grid!r}")


def method_of(candidate: str) -> str:
    """Return the calibration method a candidate belongs to ('percentile 99.99' -> 'percentile')."""
    return candidate.split()[0]


def choose(errors: Mapping[str, float]) -> str:
    """Return the candidate of least error; on ties, the one first in CANDIDATES."""
    order = {name: i for i, name in enumerate(CANDIDATES)}
    return min(errors, key=lambda name: (errors[name], order.get(name, len(order))))


def distinct(candidates: Mapping[str, float]) -> dict[str, float]:
    """Return the candidates with one name per amax (the first in CANDIDATES): equal amax, equal error."""
    kept: dict[float, str] = {}
    for name in sorted(candidates, key=lambda n: CANDIDATES.index(n) if n in CANDIDATES else len(CANDIDATES)):
        kept.setdefault(candidates[name], name)
    return {name: amax for amax, name in kept.items()}


def dequantized_weight(node, array: np.ndarray, slot: int, grid: str, steps=None) -> np.ndarray:
    """Return the weight `array` of `node` after its own Q/DQ on `grid`, per channel as the typed ONNX stores it."""
    from trtpipe.graph.qdq import quantize_weight, weight_axis
    from trtpipe.targets import Precision

    axis = weight_axis(node, array, slot)
    q, scale = quantize_weight(array, axis, Precision.INT8 if grid == "int8" else Precision.FP8, steps=steps)
    shape = [1] * array.ndim
    if axis is not None:
        shape[axis] = -1
    return (q.astype(np.float32) * scale.reshape(shape)).astype(np.float32)


def layer_model(model, node, values: Mapping[str, np.ndarray], grid: str,
                weight_steps: Mapping[str, tuple[int, ...]] | None = None, weight_fed: bool = False):
    """Return a one-node ONNX of `node`, its weight quantized per channel for `grid` as the typed ONNX
    stores it (at `weight_steps`' positions where given), every other constant as it is, every
    non-constant input a graph input. `weight_fed`: the weight is a graph input too."""
    import onnx
    from onnx import helper, numpy_helper

    from trtpipe.calibrators.graph import constant_names, weight_slot
    from trtpipe.graph import toolkit
    from trtpipe.graph.qdq import chosen_steps, weight_axis
    from trtpipe.targets import Precision

    slot = weight_slot(node, constant_names(model))
    inputs, initializers = [], []
    for i, name in enumerate(node.input):
        if not name or any(v.name == name for v in inputs) or any(t.name == name for t in initializers):
            continue
        if name not in values or (i == slot and weight_fed):
            inputs.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
            continue
        array = values[name]
        if i == slot:  # what the layer computes with: the weight after its own Q/DQ
            steps = chosen_steps(weight_steps or {}, name, array, weight_axis(node, array, slot),
                                 Precision.INT8 if grid == "int8" else Precision.FP8)
            array = dequantized_weight(node, array, slot, grid, steps)
        initializers.append(numpy_helper.from_array(np.asarray(array), name))
    outputs = [helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, None)]
    graph = helper.make_graph([helper.make_node(node.op_type, list(node.input), [node.output[0]],
                                                **toolkit.attributes(node))],
                              "layer", inputs, outputs, initializers)
    opsets = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    layer = helper.make_model(graph, opset_imports=opsets)
    layer.ir_version = model.ir_version
    return layer


def layer_errors(model, candidates: Mapping[str, Mapping[str, float]], batches: Iterable[Mapping[str, np.ndarray]],
                 grid: str, weight_steps: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, dict[str, float]]:
    """Return {tensor: {candidate: error}}: the relative squared error ||y_q - y||^2 / ||y||^2 of each
    layer the tensor feeds, its input quantized at the candidate's amax, summed over those layers.

    `model` is the cleaned FP32 graph; `candidates` {tensor: {candidate: amax}} (candidate_amax),
    candidates of equal amax measured once. `y` is the FP32 model's own output of the layer;
    `y_q` is the layer alone with the tensor quantized, its weight quantized per channel (at
    `weight_steps`' positions where given) and any other input as FP32 computed it.
    """
    from trtpipe.calibrators.collect import exposed_groups
    from trtpipe.calibrators.graph import QUANTIZED_OPS, activation_inputs, constant_names
    from trtpipe.graph import sessions
    from trtpipe.graph.qdq import float_constants

    constants = constant_names(model)
    values = float_constants(model)
    measured = {tensor: distinct(c) for tensor, c in candidates.items()}
    layers = [node for node in model.graph.node if node.op_type in QUANTIZED_OPS
              and any(t in measured for t in activation_inputs(node, constants))]
    # no arena: each would keep its layer's peak, and LORE's 57 at 768x768 held 16 GB between them
    layer_sessions = [sessions.session(layer_model(model, node, values, grid, weight_steps), arena=False)
                      for node in layers]
    feeds = [[name for name in dict.fromkeys(node.input) if name and name not in values] for node in layers]
    units = [[*names, node.output[0]] for node, names in zip(layers, feeds)]  # a layer's inputs with its output
    # per (tensor, layer): squared error of each candidate, and the squared norm of the FP32 output
    squared = {(t, i): dict.fromkeys(measured[t], 0.0) for i, node in enumerate(layers)
               for t in activation_inputs(node, constants) if t in measured}
    norm = dict.fromkeys(squared, 0.0)
    for indices, activations in exposed_groups(model, units, batches):
        for i in indices:
            node, session, names = layers[i], layer_sessions[i], feeds[i]
            # float64: a layer's squared norm passes float32's 3.4e38 at outputs near 1e19 (Inception v1 as
            # the onnx wheel ships it, every weight 0.02), and inf / inf is no error to compare
            reference = activations[node.output[0]].ravel().astype(np.float64)
            for tensor in dict.fromkeys(t for t in activation_inputs(node, constants) if t in measured):
                norm[tensor, i] += float(np.dot(reference, reference))
                for name, amax in measured[tensor].items():
                    feed = {n: activations[n] for n in names}
                    feed[tensor] = quantize_signed(activations[tensor], amax, grid)
                    difference = session.run(None, feed)[0].ravel().astype(np.float64) - reference
                    squared[tensor, i][name] += float(np.dot(difference, difference))
        del activations
    errors: dict[str, dict[str, float]] = {t: dict.fromkeys(c, 0.0) for t, c in measured.items()}
    for key, by_candidate in squared.items():
        for name, value in by_candidate.items():
            errors[key[0]][name] += value / norm[key] if norm[key] > 0 else value
    return errors


def output_channels(node, slot: int, output: np.ndarray, weight_channels: int) -> np.ndarray:
    """Return `output` (of `node`, its constant weight in input `slot`) summed to one value per weight channel.

    Each output channel is computed from one channel of the weight alone: a Conv's output axis 1 from
    its weight's axis 0; a grouped ConvTranspose's from its axis 1, every group's channels through the
    same weight channels; a Gemm's or MatMul's output columns from B's columns, its rows from A's rows.
    """
    if node.op_type in ("Conv", "ConvTranspose"):
        axis = 1
    elif node.op_type == "Gemm":
        axis = 1 if slot == 1 else 0
    else:
        axis = output.ndim - 1 if slot == 1 else output.ndim - 2
    if weight_channels == 1:
        return np.array([output.sum(dtype=np.float64)])
    per_output = np.moveaxis(output, axis, 0).reshape(output.shape[axis], -1).sum(axis=1, dtype=np.float64)
    return per_output.reshape(-1, weight_channels).sum(axis=0)


def choose_weight_steps(model, batches: Iterable[Mapping[str, np.ndarray]], grid: str = "fp8",
                        only: Collection[str] | None = None) -> dict[str, tuple[int, ...]]:
    """Return {weight: each channel's grid position} (see the module's doc): of the WEIGHT_STEPS positions
    of a channel's largest |w| in E4M3's top octave, the one whose rounding gives that channel's output
    the least squared error on `batches`, the layer run alone on its FP32 input. `only`: the names of
    the layers to place (those the typed graph quantizes), None for all."""
    from trtpipe.calibrators.collect import exposed_groups
    from trtpipe.calibrators.graph import QUANTIZED_OPS, constant_names, weight_slot
    from trtpipe.graph import sessions, toolkit
    from trtpipe.graph.qdq import WEIGHT_STEPS, float_constants, weight_axis

    constants = constant_names(model)
    values = float_constants(model)
    layers = [(node, slot) for node in model.graph.node if node.op_type in QUANTIZED_OPS
              and (only is None or toolkit.label(node) in only)
              for slot in [weight_slot(node, constants)] if slot is not None and node.input[slot] in values]
    read_along: dict[str, set[int | None]] = {}
    for node, slot in layers:
        read_along.setdefault(node.input[slot], set()).add(weight_axis(node, values[node.input[slot]], slot))
    # a weight read along two axes (W and W^T) has no one channel to place: it keeps 448
    axes = {w: next(iter(found)) for w, found in read_along.items() if len(found) == 1}
    layers = [(node, slot) for node, slot in layers if node.input[slot] in axes]
    if not layers:
        return {}
    channels = {w: 1 if axis is None else values[w].shape[axis] for w, axis in axes.items()}
    layer_sessions = [sessions.session(layer_model(model, node, values, grid, weight_fed=True), arena=False)
                      for node, _ in layers]
    feeds = [[name for name in dict.fromkeys(node.input) if name and (name not in values or name == node.input[slot])]
             for node, slot in layers]
    units = [[*(n for n in names if n not in values), node.output[0]] for (node, _), names in zip(layers, feeds)]
    squared = {node.input[slot]: np.zeros((WEIGHT_STEPS, channels[node.input[slot]])) for node, slot in layers}
    for indices, activations in exposed_groups(model, units, batches):
        for i in indices:
            (node, slot), session = layers[i], layer_sessions[i]
            weight = node.input[slot]
            reference = activations[node.output[0]].astype(np.float64)
            for step in range(WEIGHT_STEPS):  # made again each batch: all of a large model's at once would not fit
                dequantized = dequantized_weight(node, values[weight], slot, grid, np.full(channels[weight], step))
                feed = {n: dequantized if n == weight else activations[n] for n in feeds[i]}
                difference = session.run(None, feed)[0] - reference
                squared[weight][step] += output_channels(node, slot, difference * difference, channels[weight])
        del activations
    return {w: tuple(int(j) for j in np.argmin(errors, axis=0)) for w, errors in squared.items()}


def choose_amax(model, histograms: Mapping[str, StreamingHistogram], batches: Iterable[Mapping[str, np.ndarray]],
                grid: str, weight_steps: Mapping[str, tuple[int, ...]] | None = None
                ) -> tuple[dict[str, float], dict[str, str]]:
    """Return ({tensor: amax}, {tensor: candidate chosen}) of the `auto` method (see the module's doc),
    the layers' weights at `weight_steps`' grid positions where given."""
    candidates = {name: candidate_amax(h, grid) for name, h in histograms.items()}
    errors = layer_errors(model, {n: c for n, c in candidates.items() if any(a > 0 for a in c.values())},
                          batches, grid, weight_steps)
    chosen = {name: choose(errors[name]) if name in errors else "max" for name in candidates}
    if grid == "int8":
        chosen = {name: floored(candidates[name], choice) for name, choice in chosen.items()}
    return {name: candidates[name][chosen[name]] for name in candidates}, chosen


def floored(candidates: Mapping[str, float], choice: str) -> str:
    """Return `choice`, or CLIP_FLOOR when the chosen amax is under CLIP_FLOOR's (INT8: see the module's doc)."""
    floor = candidates.get(CLIP_FLOOR)
    return CLIP_FLOOR if floor is not None and candidates[choice] < floor else choice
