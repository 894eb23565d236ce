"""AWQ's search (Lin et al., 2024), in numpy: per-input-channel scales and per-block clipping that
minimise the output error of INT4 weights on real activations.

A layer computes y = x @ W. Scaling W's row j by s_j and x's channel j by 1/s_j leaves y unchanged
in FP32, but INT4 rounds W*s: channels where |x| is large get finer steps and their rounding error
(which |x| amplifies) shrinks. s = mean|x|^alpha, with alpha searched on a grid; alpha = 0 is plain
round-to-nearest, so the search never does worse than it on the samples. Then each block's
quantization range is shrunk where clipping a few large weights costs less output error than the
coarser steps would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from trtpipe.calibrators.lowbit import int4_block_amax, quantize_int4

ALPHA_GRID = 20  # alphas 0, 0.05, ..., 1 as AWQ searches them
CLIP_RATIOS = tuple(np.round(np.arange(1.0, 0.49, -0.05), 2))  # fractions of each block's max |w| tried


@dataclass
class AwqLayerResult:
    """The scales for one activation (shared by the layers reading it) and each weight's clip."""

    scales: np.ndarray  # [K]: weights' rows are multiplied by it, the activation divided
    alpha: float
    clips: list[np.ndarray]  # per weight, [K/block, N]: the block amax to quantize W*s with
    rtn_error: float  # mean squared output error of round-to-nearest INT4 on the samples
    awq_error: float  # the same with the scales and clips


def output_error(x: np.ndarray, weight: np.ndarray, dequantized: np.ndarray) -> float:
    """Return mean((x @ dequantized - x @ weight)^2): the error the quantized weight adds to the output."""
    diff = x @ (dequantized - weight)
    return float(np.mean(diff * diff))


def _scales_for(x_mean: np.ndarray, alpha: float) -> np.ndarray:
    s = np.maximum(x_mean, 1e-8) ** alpha
    return (s / np.sqrt(s.max() * s.min())).astype(np.float32)  # centred on 1, as AWQ does


def search_scales(x: np.ndarray, x_mean: np.ndarray, weights: Sequence[np.ndarray], block: int,
                  grid: int = ALPHA_GRID) -> tuple[np.ndarray, float, float, float]:
    """Return (scales, alpha, error at alpha, error of round-to-nearest) summed over `weights`.

    `x` [T, K] are sample rows of the activation, `x_mean` [K] its mean |x| over all calibration data.
    """
    best = (np.ones_like(x_mean, dtype=np.float32), 0.0, np.inf)
    rtn = np.inf
    for alpha in np.linspace(0.0, 1.0, grid + 1):
        s = _scales_for(x_mean, alpha) if alpha > 0 else np.ones_like(x_mean, dtype=np.float32)
        xs = x / s
        error = sum(output_error(xs, w * s[:, None], quantize_int4(w * s[:, None], block).dequantize()) for w in weights)
        if alpha == 0:
            rtn = error
        if error < best[2]:
            best = (s, float(alpha), error)
    return best[0], best[1], best[2], rtn


def search_clip(x: np.ndarray, weight: np.ndarray, block: int, ratios: Sequence[float] = CLIP_RATIOS) -> np.ndarray:
    """Return the block amax [K/block, N] that minimises each block's own output error on `x` [T, K].

    Blocks are judged apart, as AWQ does: the error of block b in column n is
    sum_t (x[t, b] @ (Q(w)[b, n] - w[b, n]))^2.
    """
    k, n = weight.shape
    groups = k // block
    amax = int4_block_amax(weight, block)
    # sum_t (x_b[t] . d[:, n])^2 = d[:, n]^T (X_b^T X_b) d[:, n]: one small Gram matrix per block
    # replaces a [G, T, N] product per ratio (100 s of MiniLM's search before, under 1 s now).
    # (2-D products in a loop: numpy's stacked matmul did not reach BLAS for these shapes)
    gram = np.stack([x[:, g * block:(g + 1) * block].T @ x[:, g * block:(g + 1) * block]
                     for g in range(groups)]) / np.float32(x.shape[0])  # [G, block, block]

    def error(diff):  # [G, N]
        diff = diff.reshape(groups, block, n)
        return np.stack([((gram[g] @ diff[g]) * diff[g]).sum(axis=0) for g in range(groups)])

    return _best_clip(weight, block, amax, ratios, error)


def search_clip_mse(weight: np.ndarray, block: int, ratios: Sequence[float] = CLIP_RATIOS) -> np.ndarray:
    """Return the block amax [K/block, N] that minimises each block's squared weight error.

    For a weight whose input is one-hot (an embedding table's looked-up rows), the output error *is*
    the weight error, so no activations are needed.
    """
    k, n = weight.shape
    return _best_clip(weight, block, int4_block_amax(weight, block), ratios,
                      lambda diff: (diff * diff).reshape(k // block, block, n).sum(axis=1))


def _best_clip(weight: np.ndarray, block: int, amax: np.ndarray, ratios: Sequence[float], error) -> np.ndarray:
    """Return per block the amax, among `ratios` of `amax`, whose rounding error `error(Q(w) - w)`
    ([K/block, N]) is least."""
    best_error = np.full(amax.shape, np.inf, np.float64)
    best = amax.copy()
    for ratio in ratios:
        candidate = np.float32(ratio) * amax
        err = error(quantize_int4(weight, block, candidate).dequantize() - weight)
        better = err < best_error
        best_error = np.where(better, err, best_error)
        best = np.where(better, candidate, best)
    return best.astype(np.float32)


def search_layer(x: np.ndarray, x_mean: np.ndarray, weights: Sequence[np.ndarray], block: int,
                 grid: int = ALPHA_GRID, clip: bool = True) -> AwqLayerResult:
    """Return AWQ's scales and clips for the layers in `weights` that read one activation."""
    x = np.asarray(x, np.float32)
    weights = [np.asarray(w, np.float32) for w in weights]
    s, alpha, _, rtn = search_scales(x, x_mean, weights, block, grid)
    xs = x / s
    clips, error = [], 0.0
    for w in weights:
        ws = w * s[:, None]
        amax = search_clip(xs, ws, block) if clip else int4_block_amax(ws, block)
        clips.append(amax)
        error += output_error(xs, ws, quantize_int4(ws, block, amax).dequantize())
    return AwqLayerResult(s, alpha, clips, rtn, error)


def clipped(weight: np.ndarray, amax: np.ndarray, block: int) -> np.ndarray:
    """Return `weight` [K, N] clipped to each block's amax: its round-to-nearest INT4 is the clipped one."""
    limit = np.repeat(amax, block, axis=0)
    return np.clip(weight, -limit, limit).astype(np.float32)
