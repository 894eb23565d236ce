"""From a histogram to amax: entropy (TensorRT's INT8 default), max, percentile and MSE."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from trtpipe.calibrators.entropy import START_BIN, entropy_amax
from trtpipe.calibrators.histogram import StreamingHistogram

METHODS = ("entropy", "max", "percentile", "mse")
DEFAULT_PERCENTILE = 99.99
FP8_E4M3_MAX = 448.0


def compute_amax(hist: StreamingHistogram, method: str, grid: str = "int8",
                 percentile: float = DEFAULT_PERCENTILE) -> float:
    """Return amax for one tensor. `grid` ('int8' or 'fp8') is the grid MSE measures against."""
    if hist.empty:
        return 0.0
    if method == "max":
        return hist.max
    if method == "entropy":
        return entropy_amax(hist.counts, hist.width)
    if method == "percentile":
        return percentile_amax(hist.counts, hist.width, percentile)
    if method == "mse":
        return mse_amax(hist.counts, hist.width, grid)
    raise ValueError(f"unknown calibration method {method!r}; use one of {', '.join(METHODS)}")


def uniform_amax(histograms: Mapping[str, StreamingHistogram], method: str, grid: str = "int8",
                 percentile: float = DEFAULT_PERCENTILE) -> dict[str, float]:
    """Return {tensor: amax}, every tensor calibrated by `method` (compute_amax)."""
    return {name: compute_amax(hist, method, grid, percentile) for name, hist in histograms.items()}


def percentile_amax(counts: np.ndarray, width: float, percentile: float) -> float:
    """Return the right edge of the bin where the cumulative share reaches `percentile`."""
    cdf = np.cumsum(counts, dtype=np.float64) / counts.sum()
    index = min(int(np.searchsorted(cdf, percentile / 100.0)), len(counts) - 1)
    return float((index + 1) * width)


def fake_quantize(x: np.ndarray, amax: np.ndarray, grid: str) -> np.ndarray:
    """Return non-negative `x` rounded to the symmetric grid of `amax` (broadcast) and clipped."""
    if grid == "int8":
        scale = amax / 127.0
        return np.minimum(np.round(x / scale), 127.0) * scale
    if grid == "fp8":
        scale = amax / FP8_E4M3_MAX
        v = np.minimum(x / scale, FP8_E4M3_MAX)
        # E4M3: 3 mantissa bits, smallest normal exponent -6 (subnormal steps of 2^-9 below it).
        exponent = np.floor(np.log2(np.maximum(v, 2.0**-6)))
        step = 2.0 ** (exponent - 3)
        return np.round(v / step) * step * scale
    raise ValueError(f"unknown grid {grid!r}")


def mse_amax(counts: np.ndarray, width: float, grid: str, start_bin: int = START_BIN) -> float:
    """Return the bin edge (from bin 128 up) whose quantization error over the histogram is least."""
    centers = (np.arange(len(counts)) + 0.5) * width
    weights = counts.astype(np.float64)
    nonzero = weights > 0
    centers, weights = centers[nonzero], weights[nonzero]
    candidates = np.arange(min(start_bin, len(counts)), len(counts) + 1) * width
    errors = np.empty(len(candidates))
    for start in range(0, len(candidates), 256):  # bounded memory: 256 candidates at a time
        amax = candidates[start:start + 256, None]
        errors[start:start + 256] = ((fake_quantize(centers[None, :], amax, grid) - centers) ** 2 * weights).sum(axis=1)
    return float(candidates[int(np.argmin(errors))])
