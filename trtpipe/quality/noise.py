"""Local quantization noise: how much quantizing one tensor alone distorts it, with no model run.

Tuning ranks the layers that measured sensitivity has no time for by these (noise-to-signal ratios
of a layer's activation histogram at its amax and of its per-channel quantized weight).
"""

from __future__ import annotations

import numpy as np

from trtpipe.calibrators.histogram import StreamingHistogram
from trtpipe.targets import Precision


def local_noise(hist: StreamingHistogram, amax: float, grid: str) -> float:
    """Return the noise-to-signal ratio of quantizing the histogram's values with `amax` (clipping included)."""
    from trtpipe.calibrators.amax import fake_quantize

    if hist.empty or amax <= 0:
        return 0.0
    centers = (np.arange(len(hist.counts)) + 0.5) * hist.width
    weights = hist.counts.astype(np.float64)
    signal = float((centers**2 * weights).sum())
    noise = float(((fake_quantize(centers, np.float64(amax), grid) - centers) ** 2 * weights).sum())
    return noise / signal if signal > 0 else 0.0


def weight_noise(model, node, constants: set[str], precision: Precision) -> float:
    """Return the noise-to-signal ratio of the layer's weight quantized per output channel."""
    from onnx import numpy_helper

    from trtpipe.calibrators.graph import weight_input
    from trtpipe.graph.qdq import quantize_weight, weight_axis

    name = weight_input(node, constants)
    init = next((i for i in model.graph.initializer if i.name == name), None) if name else None
    if init is None:
        return 0.0
    weight = numpy_helper.to_array(init).astype(np.float32)
    axis = weight_axis(node, weight)
    q, scale = quantize_weight(weight, axis, precision)
    shape = [1] * weight.ndim
    shape[axis] = -1
    error = q.astype(np.float32) * scale.reshape(shape) - weight
    signal = float((weight.astype(np.float64) ** 2).sum())
    return float((error.astype(np.float64) ** 2).sum()) / signal if signal > 0 else 0.0
