"""The low-bit weight formats, in numpy: INT4 with FP16 block scales, and NVFP4 (E2M1 values with
FP8 E4M3 block scales and an FP32 global scale).

These are the references the typed graphs and their CPU simulation are tested against. Rounding is
to nearest, ties to even, everywhere (numpy's round and ml_dtypes' casts both do that); FP8 block
scales saturate at 448 as TensorRT's and ONNX's saturating casts do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INT4_MAX = 7.0  # symmetric: -8 is never used, so zero stays exact and no zero point is needed
INT4_BLOCK_SIZES = (32, 64, 128)  # what TensorRT takes for block-quantized weights
DEFAULT_INT4_BLOCK = 128
E2M1_MAX = 6.0
E4M3_MAX = 448.0
FP4_BLOCK = 16  # NVFP4's block: TensorRT takes no other for activations


def fp16_scale_up(scale: np.ndarray) -> np.ndarray:
    """Return `scale` rounded up to a positive FP16 value (as float16): a rounded-down scale would clip."""
    scale = np.asarray(scale, np.float32)
    half = scale.astype(np.float16)
    half = np.where(half.astype(np.float32) < scale, np.nextafter(half, np.float16(np.inf)), half)
    return np.maximum(half, np.float16(2.0**-24))


@dataclass
class Int4Weight:
    """A weight [K, N] quantized in blocks of `block` rows: values in [-7, 7] and FP16 scales [K/block, N]."""

    values: np.ndarray  # int8 holding int4 values, [K, N]
    scales: np.ndarray  # float16, [K/block, N]
    block: int

    def dequantize(self) -> np.ndarray:
        """Return values * scales in float32, as DequantizeLinear computes them."""
        return self.values.astype(np.float32) * np.repeat(self.scales.astype(np.float32), self.block, axis=0)

    def packed(self) -> np.ndarray:
        import ml_dtypes

        return self.values.astype(ml_dtypes.int4)


def int4_block_amax(weight: np.ndarray, block: int) -> np.ndarray:
    """Return max |w| of each block of `block` rows of a [K, N] weight: [K/block, N]."""
    k, n = weight.shape
    return np.abs(weight.reshape(k // block, block, n)).max(axis=1)


def quantize_int4(weight: np.ndarray, block: int = DEFAULT_INT4_BLOCK, amax: np.ndarray | None = None) -> Int4Weight:
    """Return `weight` [K, N] rounded to nearest in INT4 blocks along K (axis 0).

    `amax` per block (default: the block's max |w|) sets the scale amax/7; AWQ passes a clipped one.
    """
    weight = np.asarray(weight, np.float32)
    k = weight.shape[0]
    if k % block:
        raise ValueError(f"{k} rows do not split into blocks of {block}")
    amax = int4_block_amax(weight, block) if amax is None else np.asarray(amax, np.float32)
    scales = fp16_scale_up(np.where(amax > 0, amax / INT4_MAX, 1.0))
    full = np.repeat(scales.astype(np.float32), block, axis=0)
    values = np.clip(np.round(weight / full), -INT4_MAX, INT4_MAX).astype(np.int8)
    return Int4Weight(values, scales, block)


def e2m1_round(x: np.ndarray) -> np.ndarray:
    """Return `x` rounded to FP4 E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6), ties to even, saturating at 6."""
    import ml_dtypes

    return np.asarray(x, np.float32).astype(ml_dtypes.float4_e2m1fn).astype(np.float32)


def e4m3_round(x: np.ndarray) -> np.ndarray:
    """Return `x` rounded to FP8 E4M3FN, ties to even, saturating at 448 (ml_dtypes alone would give NaN)."""
    import ml_dtypes

    return np.clip(np.asarray(x, np.float32), -E4M3_MAX, E4M3_MAX).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)


def fp4_global_scale(amax: float) -> np.float32:
    """Return the per-tensor scale that maps `amax` to the largest block scale (448) times E2M1's 6.

    The graph stores it in FP16 (the type of the FP16 tensors it dequantizes to), so it is the FP16
    value at or above amax / 2688: every block scale stays within FP8's 448, and the quantization
    uses exactly the value the graph holds.
    """
    if not amax > 0:
        return np.float32(1.0)
    return np.float32(fp16_scale_up(np.float32(amax / (E2M1_MAX * E4M3_MAX))))


def fp4_block_scales(x: np.ndarray, global_scale: np.float32) -> np.ndarray:
    """Return the FP8-rounded block scales of `x`'s last axis (blocks of 16), before the global scale."""
    blocks = np.asarray(x, np.float32).reshape(*x.shape[:-1], x.shape[-1] // FP4_BLOCK, FP4_BLOCK)
    amax = np.abs(blocks).max(axis=-1)
    return e4m3_round(amax / np.float32(E2M1_MAX) / np.float32(global_scale))


def fp4_quantize_dequantize(x: np.ndarray, global_scale: float) -> np.ndarray:
    """Return `x` through NVFP4 along its last axis and back, in float32: the numpy reference.

    Per block of 16: scale = e4m3(amax / 6 / global) * global; value = e2m1(x / scale) * scale; a
    block whose FP8 scale underflows to zero dequantizes to zero.
    """
    x = np.asarray(x, np.float32)
    global32 = np.float32(global_scale)
    scale = fp4_block_scales(x, global32) * global32
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // FP4_BLOCK, FP4_BLOCK)
    safe = np.where(scale == 0, np.float32(1.0), scale)[..., None]
    out = e2m1_round(blocks / safe) * scale[..., None]
    return out.reshape(x.shape)


@dataclass
class Fp4Weight:
    """A weight [N, K] in NVFP4: E2M1 values, FP8 E4M3 scales [N, K/16] and a float32 global scale."""

    values: np.ndarray  # float32 holding E2M1 values, [N, K]
    scales: np.ndarray  # float32 holding E4M3 values, [N, K/16]
    global_scale: np.float32

    def dequantize(self) -> np.ndarray:
        """Return values * (scales * global) in float32, as the two DequantizeLinear nodes compute them."""
        block = self.scales * self.global_scale
        return self.values * np.repeat(block, FP4_BLOCK, axis=-1)


def quantize_fp4(weight_nk: np.ndarray) -> Fp4Weight:
    """Return a weight [N, K] (blocks along K) in NVFP4, its global scale from its own max |w|."""
    weight_nk = np.asarray(weight_nk, np.float32)
    if weight_nk.shape[-1] % FP4_BLOCK:
        raise ValueError(f"{weight_nk.shape[-1]} input channels do not split into blocks of {FP4_BLOCK}")
    global_scale = fp4_global_scale(float(np.abs(weight_nk).max()))
    scales = fp4_block_scales(weight_nk, global_scale)
    full = np.repeat(scales * global_scale, FP4_BLOCK, axis=-1)
    values = np.where(full == 0, np.float32(0.0), e2m1_round(weight_nk / np.where(full == 0, np.float32(1.0), full)))
    return Fp4Weight(values, scales, global_scale)
