"""Classification: does the candidate pick the class FP32 picks, above all where FP32 is sure?"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trtpipe.quality.tasks.base import Task

MARGIN = 0.25  # FP32 is "confident" when its top class beats the runner-up by 25 points of probability
FLIPS_KEPT = 8


def probabilities(values: np.ndarray) -> np.ndarray:
    """Return `values` if they already are probabilities (rows in [0, 1] summing to 1), else their softmax."""
    if values.min() >= 0 and values.max() <= 1 and np.allclose(values.sum(-1), 1, atol=1e-3):
        return values
    shifted = np.exp(values - values.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def margins(values: np.ndarray) -> np.ndarray:
    """Return top-1 minus top-2 probability per sample."""
    p = np.sort(probabilities(values), axis=-1)
    return p[..., -1] - p[..., -2] if p.shape[-1] > 1 else p[..., -1]


@dataclass
class Flip:
    """A sample whose top-1 class changed: the classes and probabilities, and a thumbnail when the input is an image."""

    sample: str
    baseline_class: int
    baseline_p: float
    candidate_class: int
    candidate_p: float
    image: np.ndarray | None = None


def thumbnail(inputs, index: int) -> np.ndarray | None:
    """Return sample `index` of the only input as an HxWxC image scaled to [0, 1], when it looks like one."""
    if len(inputs) != 1:
        return None
    array = np.asarray(next(iter(inputs.values()))[index], np.float32)
    if array.ndim != 3:
        return None
    if array.shape[0] in (1, 3):
        array = array.transpose(1, 2, 0)
    if array.shape[-1] not in (1, 3):
        return None
    low, high = float(array.min()), float(array.max())
    return ((array - low) / (high - low if high > low else 1.0)).squeeze()


class ClassificationTask(Task):
    name = "classification"
    judged = ("top1_agreement", "confident_top1_agreement", "top5_agreement", "cosine", "accuracy")
    primary = "top1_agreement"

    def __init__(self, spec):
        super().__init__(spec)
        self.raw.classifier = True
        self.margin = spec.margin if spec.margin is not None else MARGIN
        self.confident = 0
        self.confident_agree = 0
        self.flips: list[Flip] = []
        self.flipped = 0

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        want_class, got_class = baseline.argmax(-1), candidate.argmax(-1)
        sure = margins(baseline) >= self.margin
        self.confident += int(sure.sum())
        self.confident_agree += int((want_class == got_class)[sure].sum())
        flipped = np.flatnonzero(want_class != got_class)
        self.flipped += len(flipped)
        p_want, p_got = probabilities(baseline), probabilities(candidate)
        for i in flipped[:FLIPS_KEPT - len(self.flips)]:
            self.flips.append(Flip(ids[i], int(want_class[i]), float(p_want[i, want_class[i]]), int(got_class[i]),
                                   float(p_got[i, got_class[i]]), thumbnail(inputs, i)))

    def metrics(self) -> dict[str, float]:
        raw = self.raw.summary()
        result = {"top1_agreement": raw.get("top1_agreement", 0.0)}
        if self.confident:
            result["confident_top1_agreement"] = self.confident_agree / self.confident
        result.update(top5_agreement=raw.get("top5_agreement", 0.0), cosine=raw["cosine"])
        if "accuracy" in raw:
            result.update(accuracy=raw["accuracy"], baseline_accuracy=raw["baseline_accuracy"])
        result.update(confident_samples=self.confident, confident_margin=self.margin, top1_flips=self.flipped)
        return result

    def unmeasured(self, metric: str) -> str:
        if metric == "accuracy":
            return ("no sample has a label; give --labels, [data] labels, or a labels.txt in the data directory "
                    "(docs/data.md)")
        if metric == "confident_top1_agreement":
            return (f"FP32's top class beats the runner-up by {self.margin:g} on no sample; lower margin in "
                    "[[outputs]] or use data the model is sure of")
        return super().unmeasured(metric)

    def picture(self):
        from trtpipe.quality.pictures import Flips

        return Flips(self.flips, self.flipped, self.raw.count)
