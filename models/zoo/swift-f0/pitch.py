"""SwiftF0's pitch as its package's users read it: in cents, on the frames FP32 calls voiced.

validate calls voiced_cents with the pitch output (its frames first: [[outputs]] batch_axis = 1) and FP32's
outputs of the batch. A frame is voiced at confidence >= 0.5 (swift_f0's rule); an unvoiced frame's pitch is
read by no one, and is 0 here on both sides. Cents (1200 log2 of the ratio), since a pitch is heard by its
ratio: 50 cents is a quarter tone at any height."""

import numpy as np

VOICED = 0.5  # swift_f0.SwiftF0: a frame is voiced when its confidence is at least 0.5


def voiced_cents(pitch, fp32):
    voiced = np.asarray(fp32["confidence"]).reshape(-1) >= VOICED  # [1, frames] as the model gives it
    cents = 1200 * np.log2(np.maximum(pitch.reshape(-1), 1e-3) / 10.0)
    return np.where(voiced, cents, 0.0)
