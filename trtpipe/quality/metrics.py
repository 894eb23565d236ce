"""Accuracy metrics between a candidate's outputs and the baseline's: pure functions on arrays,
and an accumulator that streams them over batches."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

EPS = 1e-12


def cosine_per_sample(candidate: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Return the cosine similarity of each sample (first axis) with everything else flattened."""
    a = candidate.reshape(len(candidate), -1).astype(np.float64)
    b = baseline.reshape(len(baseline), -1).astype(np.float64)
    dot = (a * b).sum(axis=1)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    both_zero = norms == 0
    return np.where(both_zero, np.where((a == b).all(axis=1), 1.0, 0.0), dot / np.where(both_zero, 1.0, norms))


def snr_db(signal_energy: float, noise_energy: float) -> float:
    """Return 10·log10(signal / noise) in dB; infinite when the noise is zero."""
    if noise_energy == 0:
        return float("inf")
    if signal_energy == 0:
        return float("-inf")
    return float(10.0 * np.log10(signal_energy / noise_energy))


def topk_agreement(candidate_logits: np.ndarray, baseline_logits: np.ndarray, k: int) -> np.ndarray:
    """Return, per sample, whether the baseline's top-1 class is among the candidate's top k."""
    baseline_top1 = baseline_logits.argmax(axis=-1)
    top_k = np.argsort(-candidate_logits, axis=-1, kind="stable")[..., :k]
    return (top_k == baseline_top1[..., None]).any(axis=-1)


@dataclass
class OutputMetrics:
    """Streaming metrics of one output; `summary()` gives the finished numbers."""

    classifier: bool = False
    count: int = 0
    max_abs: float = 0.0
    sum_abs: float = 0.0
    elements: int = 0
    max_rel: float = 0.0
    signal: float = 0.0
    noise: float = 0.0
    cosine_sum: float = 0.0  # running sum and minimum: memory stays flat however many samples
    cosine_min: float = 1.0
    worst_sample: str | None = None  # the id of the sample of cosine_min, where rows are samples
    dot: float = 0.0  # candidate . baseline and the candidate's energy, over every sample: the cosine across them
    energy: float = 0.0
    # A streamed spec's samples are steps: `stream` names the stream a sample id is of, and the cosines (mean and
    # worst) are each stream's, its steps together. A step's own is decided by its loudness: GTCRN's FP8 read 0.71
    # on a quiet frame (1/1300 of a typical frame's energy) of an utterance whose cosine is 0.9987.
    stream: Callable[[str], str] | None = None
    streams: dict = field(default_factory=dict)  # stream: [candidate . baseline, candidate², baseline², error²]
    unstreamed: bool = False  # a batch whose rows are not its samples: the streams' sums miss it, and are not used
    top1: int = 0
    top5: int = 0
    correct_candidate: int = 0
    correct_baseline: int = 0
    labelled: int = 0
    error_sample: list = field(default_factory=list)  # |error| values kept for the plot

    def update(self, candidate: np.ndarray, baseline: np.ndarray, labels: np.ndarray | None = None,
               ids: Sequence[str] | None = None) -> None:
        candidate = np.asarray(candidate, np.float64)
        baseline = np.asarray(baseline, np.float64)
        if candidate.shape != baseline.shape:
            raise ValueError(f"candidate shape {candidate.shape} differs from baseline {baseline.shape}")
        error = np.abs(candidate - baseline)
        self.count += len(candidate)
        self.elements += error.size
        self.max_abs = max(self.max_abs, float(error.max(initial=0.0)))
        self.sum_abs += float(error.sum())
        self.max_rel = max(self.max_rel, float((error / np.maximum(np.abs(baseline), 1e-6)).max(initial=0.0)))
        self.signal += float((baseline ** 2).sum())
        self.noise += float(((candidate - baseline) ** 2).sum())
        self.dot += float((candidate * baseline).sum())
        self.energy += float((candidate ** 2).sum())
        cosines = cosine_per_sample(candidate, baseline)
        self.cosine_sum += float(cosines.sum())
        self.unstreamed |= self.stream is not None and (ids is None or len(ids) != len(candidate))
        if self.stream is not None and not self.unstreamed:
            a, b = candidate.reshape(len(candidate), -1), baseline.reshape(len(baseline), -1)
            rows = np.stack([(a * b).sum(1), (a * a).sum(1), (b * b).sum(1), ((a - b) ** 2).sum(1)], axis=1)
            for sample, row in zip(ids, rows):
                sums = self.streams.setdefault(self.stream(str(sample)), np.zeros(4))
                sums += row
        if ids is not None and len(ids) == len(cosines) and len(cosines) and (
                self.worst_sample is None or cosines.min() < self.cosine_min):
            self.worst_sample = str(ids[int(cosines.argmin())])
        self.cosine_min = min(self.cosine_min, float(cosines.min(initial=1.0)))
        if len(self.error_sample) < 200_000:
            self.error_sample.extend(error.ravel()[:: max(1, error.size // 20_000)].tolist())
        if self.classifier:
            self.top1 += int(topk_agreement(candidate, baseline, 1).sum())
            self.top5 += int(topk_agreement(candidate, baseline, min(5, candidate.shape[-1])).sum())
            if labels is not None:
                known = labels >= 0
                self.labelled += int(known.sum())
                self.correct_candidate += int((candidate.argmax(-1) == labels)[known].sum())
                self.correct_baseline += int((baseline.argmax(-1) == labels)[known].sum())

    def summary(self) -> dict:
        result = {
            "samples": self.count,
            "max_abs_error": self.max_abs,
            "mean_abs_error": self.sum_abs / max(self.elements, 1),
            "max_rel_error": self.max_rel,
            "cosine": self.cosine_sum / self.count if self.count else 0.0,
            "cosine_min": self.cosine_min if self.count else 0.0,
            **({"worst_sample": self.worst_sample} if self.worst_sample is not None else {}),
            "snr_db": snr_db(self.signal, self.noise),
            # 1: each sample is one number (a same-or-not probability), whose cosine is only its sign
            "values_per_sample": self.elements / self.count if self.count else 0.0,
        }
        if self.streams and not self.unstreamed:
            cosines = {name: (dot / np.sqrt(aa * bb) if aa * bb > 0 else float(noise == 0))
                       for name, (dot, aa, bb, noise) in self.streams.items()}
            worst = min(cosines, key=cosines.__getitem__)
            result.update(cosine=float(np.mean(list(cosines.values()))), cosine_min=float(cosines[worst]), worst_sample=worst)
        if self.count and self.elements == self.count:
            # One number a sample (a probability, a frame's confidence): its cosine is only its sign, 0 where
            # FP32 gives exactly 0 and the candidate 1e-6 (SwiftF0's FP16 read 0.957 on unvoiced frames'
            # confidences). The cosine of the samples' values together is the one that measures.
            across = (self.dot / np.sqrt(self.energy * self.signal) if self.energy * self.signal > 0
                      else float(self.noise == 0))
            result["cosine"] = result["cosine_min"] = float(across)
            result.pop("worst_sample", None)
        if self.classifier and self.count:
            result["top1_agreement"] = self.top1 / self.count
            result["top5_agreement"] = self.top5 / self.count
            if self.labelled:
                result["accuracy"] = self.correct_candidate / self.labelled
                result["baseline_accuracy"] = self.correct_baseline / self.labelled
        return result
