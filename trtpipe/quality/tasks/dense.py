"""Dense maps (segmentation, text probability maps): threshold (one channel) or argmax (several)
both maps, then IoU and pixel agreement of the masks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.quality.tasks.base import Degenerate, Task
from trtpipe.quality.tasks.generic import channel_axis

THRESHOLD = 0.5  # a probability map's foreground; PP-OCR's DB post-processing uses 0.3


def masks(values: np.ndarray, axis: int | None, threshold: float) -> np.ndarray:
    """Return per-pixel labels: value > threshold for one channel, else the argmax over the channel axis."""
    if axis is None or values.shape[axis] == 1:
        single = values if axis is None else np.take(values, 0, axis=axis)
        return (single > threshold).astype(np.int64)
    return values.argmax(axis=axis)


@dataclass
class MaskSample:
    """The sample with the lowest IoU: both masks, for the report's picture."""

    sample: str
    baseline: np.ndarray
    candidate: np.ndarray
    iou: float


class DenseTask(Task):
    name = "dense"
    judged = ("iou", "pixel_agreement")
    primary = "iou"

    def __init__(self, spec):
        super().__init__(spec)
        self.threshold = spec.threshold if spec.threshold is not None else THRESHOLD
        self.intersection: dict[int, int] = {}
        self.union: dict[int, int] = {}
        self.agree = 0
        self.baseline_foreground = 0
        self.pixels = 0
        self.worst: MaskSample | None = None

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        if baseline.ndim not in (3, 4):
            raise TrtpipeError(f"output '{self.output}' has shape {list(baseline.shape)}; a dense map is "
                               "[batch, channels, height, width] (or NHWC via layout, or [batch, height, width])")
        axis = channel_axis(self.spec.layout, baseline.ndim) if baseline.ndim == 4 else None
        got_mask = masks(np.nan_to_num(candidate), axis, self.threshold)
        want_mask = masks(baseline, axis, self.threshold)
        self.agree += int((got_mask == want_mask).sum())
        self.pixels += want_mask.size
        self.baseline_foreground += int((want_mask > 0).sum())
        binary = axis is None or baseline.shape[axis] == 1
        for cls in ([1] if binary else np.union1d(np.unique(want_mask), np.unique(got_mask)).tolist()):
            a, b = got_mask == cls, want_mask == cls
            self.intersection[cls] = self.intersection.get(cls, 0) + int((a & b).sum())
            self.union[cls] = self.union.get(cls, 0) + int((a | b).sum())
        for i, sample in enumerate(ids):
            fg_got, fg_want = got_mask[i] > 0, want_mask[i] > 0
            union = int((fg_got | fg_want).sum())
            iou = int((fg_got & fg_want).sum()) / union if union else 1.0
            if self.worst is None or iou < self.worst.iou:
                self.worst = MaskSample(sample, want_mask[i], got_mask[i], iou)

    def finish(self) -> None:
        super().finish()
        if not self.baseline_foreground:
            raise Degenerate(f"output '{self.output}': no pixel of the FP32 baseline is foreground (above threshold "
                             f"{self.threshold:g}, or a class other than 0) in {self.raw.count} samples, so IoU cannot "
                             "judge the candidate; likely "
                             "cause: data without what this map marks (text, objects) or a threshold set too high "
                             "for this output; use such data or set threshold in [[outputs]]")

    def metrics(self) -> dict[str, float]:
        ious = [self.intersection[c] / self.union[c] for c in self.union if self.union[c]]
        return {"iou": float(np.mean(ious)) if ious else float("nan"),
                "pixel_agreement": self.agree / max(self.pixels, 1), "threshold": self.threshold,
                "baseline_foreground": self.baseline_foreground / max(self.pixels, 1)}

    def picture(self):
        from trtpipe.quality.pictures import MaskPair

        return MaskPair(self.worst)
