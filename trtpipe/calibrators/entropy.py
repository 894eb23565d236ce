"""TensorRT's IInt8EntropyCalibrator2 threshold search, vectorized over every candidate.

The algorithm as NVIDIA's open-source reimplementations describe it (pytorch-quantization and
Model Optimizer, `_compute_amax_entropy`): on a histogram of |x|, the zero bin takes its
neighbour's count; each candidate i from bin 128 up defines P (the first i bins, with everything
beyond folded into bin i-1) and Q (the first i bins merged into 128 levels, each level's mass
spread evenly over its non-empty bins). The smallest KL(P || Q) wins, the last one on ties, and
amax is the right edge of the winning bin.

Instead of a Python loop over the ~1900 candidates, each candidate's KL is assembled from prefix
sums of h, h·log h and the count of non-empty bins, so the cost is O(candidates × levels).
"""

from __future__ import annotations

import numpy as np

START_BIN = 128


def entropy_amax(counts: np.ndarray, width: float, levels: int = 128, start_bin: int = START_BIN) -> float:
    """Return the amax whose quantized distribution is closest (KL) to the calibration data."""
    h = np.asarray(counts, dtype=np.float64).copy()
    if len(h) < 2 or h.sum() == 0:
        return float(len(h) * width)
    h[0] = h[1]
    n = len(h)
    total = h.sum()
    start = min(start_bin, n)
    candidates = np.arange(start, n + 1)

    with np.errstate(divide="ignore", invalid="ignore"):
        hlogh = np.where(h > 0, h * np.log(np.where(h > 0, h, 1.0)), 0.0)
    csum = np.concatenate([[0.0], np.cumsum(h)])
    csum_hlogh = np.concatenate([[0.0], np.cumsum(hlogh)])
    csum_nonzero = np.concatenate([[0], np.cumsum(h > 0)])

    # Level k of candidate i covers bins j with floor(j * levels / i) == k.
    k = np.arange(levels)
    i = candidates[:, None]
    lo = (k * i + levels - 1) // levels
    hi = ((k + 1) * i + levels - 1) // levels
    level_mass = csum[hi] - csum[lo]
    level_nonzero = csum_nonzero[hi] - csum_nonzero[lo]
    with np.errstate(divide="ignore", invalid="ignore"):
        level_avg = np.where(level_nonzero > 0, level_mass / np.maximum(level_nonzero, 1), 0.0)
        log_avg = np.where(level_avg > 0, np.log(np.where(level_avg > 0, level_avg, 1.0)), 0.0)
    mass_log_q = (level_mass * log_avg).sum(axis=1)

    last = candidates - 1
    h_last = h[last]
    log_q_last = log_avg[:, levels - 1]
    p_last = total - csum[last]  # bin i-1 plus every outlier beyond it
    # Sum over the bins before the last: P_j log P_j - P_j log Q_j.
    inner = csum_hlogh[last] - (mass_log_q - h_last * log_q_last)
    with np.errstate(divide="ignore", invalid="ignore"):
        last_term = np.where(p_last > 0, p_last * (np.log(np.maximum(p_last, 1e-300)) - log_q_last), 0.0)
        kl = (inner + last_term) / total + np.log(csum[candidates] / total)
    kl = np.where((p_last > 0) & (h_last == 0), np.inf, kl)  # P has mass where Q has none
    best = len(kl) - 1 - int(np.argmin(kl[::-1]))
    return float(candidates[best] * width)
