"""Embeddings: cosine per sample, and whether each sample keeps its nearest neighbours within the set
(what retrieval and clustering see): its k nearest as a set, and its nearest one."""

from __future__ import annotations

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.quality.metrics import cosine_per_sample
from trtpipe.quality.tasks.base import Task

NEIGHBOURS = 5  # k of the k-nearest-neighbour sets compared
# A neighbour the candidate finds counts as kept when FP32 puts it within this much cosine similarity
# of FP32's own k-th neighbour: the order of near-ties is not the model's. Google's speech embedding
# (zoo: speech-embedding) on 32 alike windows has its 5th and 6th neighbours a median 0.003 apart, and
# its FP8 moves similarities by 0.006: without the tolerance its neighbours "changed" (agreement 0.87)
# at a cosine of 0.996 with FP32, while each window's nearest neighbours were as near as FP32's.
NEAR_TIE = 0.01


def unit_rows(values: np.ndarray) -> np.ndarray:
    flat = values.reshape(len(values), -1)
    return flat / np.maximum(np.linalg.norm(flat, axis=1, keepdims=True), 1e-12)


def similarities(embeddings: np.ndarray, chunk: int = 1024):
    """Yield (first row, cosine similarities of rows first.. to every row), a row's own set to -inf."""
    unit = unit_rows(embeddings).astype(np.float32)
    for start in range(0, len(unit), chunk):
        similarity = unit[start:start + chunk] @ unit.T
        rows = np.arange(len(similarity))
        similarity[rows, rows + start] = -np.inf  # a sample is not its own neighbour
        yield start, similarity


def nearest(embeddings: np.ndarray, k: int) -> np.ndarray:
    """Return the indices of each row's k most cosine-similar other rows (N x k)."""
    result = np.empty((len(embeddings), k), np.int64)
    for start, similarity in similarities(embeddings):
        result[start:start + len(similarity)] = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    return result


def neighbour_agreement(candidate: np.ndarray, baseline: np.ndarray, k: int, near_tie: float = NEAR_TIE) -> float:
    """Return the mean share of each sample's k nearest neighbours the candidate keeps: a neighbour it
    finds is kept when it is one of FP32's k, or FP32 has it within `near_tie` of its k-th (a near-tie)."""
    k = min(k, len(baseline) - 1)
    if k < 1:
        return float("nan")
    got = nearest(candidate, k)
    kept = np.empty(len(baseline))
    for start, similarity in similarities(baseline):
        kth = -np.sort(-similarity, axis=1)[:, k - 1]
        found = np.take_along_axis(similarity, got[start:start + len(similarity)], axis=1)
        kept[start:start + len(similarity)] = (found >= kth[:, None] - near_tie).mean(axis=1)
    return float(kept.mean())


class EmbeddingTask(Task):
    name = "embedding"
    judged = ("cosine", "cosine_min", "neighbour_agreement", "nearest_agreement")
    primary = "cosine"

    def __init__(self, spec):
        super().__init__(spec)
        self.k = spec.neighbours if spec.neighbours is not None else NEIGHBOURS
        self.got: list[np.ndarray] = []
        self.want: list[np.ndarray] = []
        self.cosines: list[np.ndarray] = []
        self.ids: list[str] = []

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        candidate = np.nan_to_num(candidate)
        size = candidate[0].size if len(candidate) else None
        if self.got and size is not None and size != self.got[0].shape[1]:
            raise TrtpipeError(f"output '{self.output}': samples give embeddings of {self.got[0].shape[1]} and {size} "
                               "values (samples of their own lengths); an embedding is one vector a sample, so pad "
                               "the samples to one length or set task = \"generic\" in the spec")
        self.got.append(candidate.reshape(len(candidate), -1).astype(np.float32))
        self.want.append(baseline.reshape(len(baseline), -1).astype(np.float32))
        self.cosines.append(cosine_per_sample(candidate, baseline))
        self.ids.extend(ids)

    def metrics(self) -> dict[str, float]:
        cosines = np.concatenate(self.cosines) if self.cosines else np.zeros(0)
        result: dict = {"cosine": float(cosines.mean()) if cosines.size else 0.0,
                  "cosine_min": float(cosines.min()) if cosines.size else 0.0}
        if cosines.size and len(self.ids) == cosines.size:
            result["worst_sample"] = self.ids[int(cosines.argmin())]
        if len(cosines) > 1:
            got, want = np.concatenate(self.got), np.concatenate(self.want)
            result["neighbour_agreement"] = neighbour_agreement(got, want, self.k)
            result["neighbours"] = min(self.k, len(cosines) - 1)
            result["nearest_agreement"] = neighbour_agreement(got, want, 1)  # the first a retrieval returns
        return result

    def picture(self):
        from trtpipe.quality.pictures import CosineHistogram

        return CosineHistogram(np.concatenate(self.cosines) if self.cosines else np.zeros(0))
