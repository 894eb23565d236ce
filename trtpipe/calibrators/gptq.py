"""GPTQ's error compensation (Frantar et al., 2023), in numpy, for INT4 weights in blocks along K.

A layer computes y = x @ W with W [K, N]. Round-to-nearest rounds every weight on its own. GPTQ
quantizes W's rows (input channels) one after another and, after each, moves that row's rounding
error onto the rows not yet quantized, weighted by the inverse Hessian of the layer's output error,
H = X^T X over the calibration rows of x: where input channels are correlated, a later channel can
undo much of an earlier one's error, which rounding each alone never does. The block scales are
fixed before it starts (AWQ's clipped ones, or each block's max), so the result is an ordinary
INT4 weight with the same scales.

Rows are taken in order of decreasing H's diagonal (GPTQ's "act order"): channels the output is
most sensitive to are rounded first, while the most rows are left to absorb their error. Fixed
scales make the order free to choose.
"""

from __future__ import annotations

import numpy as np

from trtpipe.calibrators.lowbit import INT4_MAX, Int4Weight, fp16_scale_up, int4_block_amax

DEFAULT_DAMP = 0.01  # of H's mean diagonal, added to it: GPTQ's default; keeps H invertible
LAZY_ROWS = 128  # rows whose updates are applied together to the rest (GPTQ's lazy batch)


def gram(x: np.ndarray) -> np.ndarray:
    """Return X^T X [K, K] in float64 of activation rows `x` [..., K] (sum it over batches for H)."""
    flat = np.asarray(x, np.float32).reshape(-1, x.shape[-1])
    return (flat.T @ flat).astype(np.float64)


def inverse_hessian_factor(hessian: np.ndarray, damp: float = DEFAULT_DAMP) -> np.ndarray:
    """Return the upper Cholesky factor U of H^-1 (H^-1 = U^T U), H damped and dead channels made inert.

    Row i of U holds what GPTQ needs when row i of W is quantized: U[i, i] scales its error, U[i, j>i]
    spreads it onto row j. A channel never seen non-zero (H[i, i] = 0) gets H[i, i] = 1, so its
    error moves nowhere.
    """
    h = np.array(hessian, np.float64)
    diag = np.diag(h).copy()
    dead = diag <= 0
    h[dead, dead] = 1.0
    mean = float(np.mean(np.diag(h)))
    h[np.diag_indices_from(h)] += damp * mean
    lower = np.linalg.cholesky(h)
    lower_inv = np.linalg.inv(lower)  # triangular, so H^-1 = L^-T L^-1 costs two small products
    h_inv = lower_inv.T @ lower_inv
    return np.linalg.cholesky(h_inv).T


def gptq_int4(weight: np.ndarray, hessian: np.ndarray, block: int, amax: np.ndarray | None = None,
              damp: float = DEFAULT_DAMP, act_order: bool = True) -> Int4Weight:
    """Return `weight` [K, N] in INT4 blocks of `block` rows, rounded by GPTQ against `hessian` [K, K].

    `amax` [K/block, N] sets each block's scale amax/7 as round-to-nearest's would (default: the
    block's max |w|); values beyond it saturate at +-7 and their error is compensated like any other.
    """
    weight = np.asarray(weight, np.float32)
    k, n = weight.shape
    if k % block:
        raise ValueError(f"{k} rows do not split into blocks of {block}")
    if hessian.shape != (k, k):
        raise ValueError(f"the Hessian is {hessian.shape}; a weight of {k} rows needs ({k}, {k})")
    amax = int4_block_amax(weight, block) if amax is None else np.asarray(amax, np.float32)
    scales = fp16_scale_up(np.where(amax > 0, amax / INT4_MAX, 1.0))
    step = np.repeat(scales.astype(np.float64), block, axis=0)  # [K, N]
    order = np.argsort(-np.diag(hessian), kind="stable") if act_order else np.arange(k)
    w = weight.astype(np.float64)[order]
    step = step[order]
    u = inverse_hessian_factor(np.asarray(hessian, np.float64)[np.ix_(order, order)], damp)
    values = np.zeros((k, n), np.int8)
    for start in range(0, k, LAZY_ROWS):
        stop = min(start + LAZY_ROWS, k)
        part = w[start:stop].copy()
        errors = np.zeros_like(part)
        for i in range(stop - start):
            row = start + i
            q = np.clip(np.round(part[i] / step[row]), -INT4_MAX, INT4_MAX)
            values[row] = q
            error = (part[i] - q * step[row]) / u[row, row]
            part[i + 1:] -= np.outer(u[row, row + 1:stop], error)
            errors[i] = error
        w[stop:] -= u[start:stop, stop:].T @ errors
    restored = np.empty_like(values)
    restored[order] = values
    return Int4Weight(restored, scales, block)
