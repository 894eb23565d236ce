"""Embeddings: cosine per sample, and whether each sample keeps its nearest neighbours within the set
(what retrieval and clustering see)."""

from __future__ import annotations

import numpy as np

from trtpipe.quality.metrics import cosine_per_sample
from trtpipe.quality.tasks import Task

NEIGHBOURS = 5  # k of the k-nearest-neighbour sets compared; one neighbour flips on near-ties


def unit_rows(values: np.ndarray) -> np.ndarray:
    flat = values.reshape(len(values), -1)
    return flat / np.maximum(np.linalg.norm(flat, axis=1, keepdims=True), 1e-12)


def nearest(embeddings: np.ndarray, k: int, chunk: int = 1024) -> np.ndarray:
    """Return the indices of each row's k most cosine-similar other rows (N x k), in chunks of rows."""
    unit = unit_rows(embeddings).astype(np.float32)
    result = np.empty((len(unit), k), np.int64)
    for start in range(0, len(unit), chunk):
        similarity = unit[start:start + chunk] @ unit.T
        rows = np.arange(len(similarity))
        similarity[rows, rows + start] = -np.inf  # a sample is not its own neighbour
        result[start:start + chunk] = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    return result


def neighbour_agreement(candidate: np.ndarray, baseline: np.ndarray, k: int) -> float:
    """Return the mean share of each sample's k nearest neighbours (baseline) that the candidate also finds."""
    k = min(k, len(baseline) - 1)
    if k < 1:
        return float("nan")
    got, want = nearest(candidate, k), nearest(baseline, k)
    return float(np.mean([len(np.intersect1d(g, w)) / k for g, w in zip(got, want)]))


class EmbeddingTask(Task):
    name = "embedding"
    judged = ("cosine", "cosine_min", "neighbour_agreement")
    primary = "cosine"

    def __init__(self, spec):
        super().__init__(spec)
        self.k = spec.neighbours if spec.neighbours is not None else NEIGHBOURS
        self.got: list[np.ndarray] = []
        self.want: list[np.ndarray] = []
        self.cosines: list[np.ndarray] = []

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        candidate = np.nan_to_num(candidate)
        self.got.append(candidate.reshape(len(candidate), -1).astype(np.float32))
        self.want.append(baseline.reshape(len(baseline), -1).astype(np.float32))
        self.cosines.append(cosine_per_sample(candidate, baseline))

    def metrics(self) -> dict[str, float]:
        cosines = np.concatenate(self.cosines) if self.cosines else np.zeros(0)
        result = {"cosine": float(cosines.mean()) if cosines.size else 0.0,
                  "cosine_min": float(cosines.min()) if cosines.size else 0.0}
        if len(cosines) > 1:
            result["neighbour_agreement"] = neighbour_agreement(np.concatenate(self.got), np.concatenate(self.want), self.k)
            result["neighbours"] = min(self.k, len(cosines) - 1)
        return result

    def picture(self):
        from trtpipe.quality.pictures import CosineHistogram

        return CosineHistogram(np.concatenate(self.cosines) if self.cosines else np.zeros(0))
