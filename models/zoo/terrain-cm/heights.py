"""terrain-cm's answer as its users read it: heights in metres, as adaptive-terrain-diffusion 0.4.2's
TerrainGenerator._from_model_space makes them from the UNet's -1..1 output (asinh-compressed: at the top of
its 22.2 m range a step of 0.001 is 6.7 cm), floored at 0 as generate() returns them."""

import numpy as np

HEIGHT_RANGE, ASINH_SCALE = 22.16864013671875, 0.1  # TerrainGenerator's class constants


def metres(denoised: np.ndarray) -> np.ndarray:
    """[N, 1, H, W] in the model's space -> [N, 1, H*W]: one point a terrain, its coordinates the cells'
    heights, so that validate's distance between FP32's point and the candidate's is sqrt(H*W) times the
    terrain's RMS height difference (128 times it at 128x128)."""
    unit = np.clip((np.asarray(denoised, np.float64)[:, 0] + 1.0) * 0.5, 0.0, 1.0)
    heights = np.clip(ASINH_SCALE * np.sinh(unit * np.arcsinh(HEIGHT_RANGE / ASINH_SCALE)), 0.0, HEIGHT_RANGE)
    heights -= heights.min(axis=(-2, -1), keepdims=True)
    return heights.reshape(len(heights), 1, -1)
