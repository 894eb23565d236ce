"""Integer and bool outputs: what the model decided itself (an ArgMax's classes, TopK's or NonZero's
indices, a count, a comparison's mask), judged by whether the candidate decides as FP32 does: the share
of samples whose output is FP32's in every element (exact_match), and the share of elements that agree.

A model that reads its answer out in the graph (TrueOCR's recognizer: its text is an ArgMax beside the
chosen class's probability) changes the answer where the best two scores swap, which moves the
probability beside it too little for any float metric to see. An integer output that copies an input
agrees by construction and passes."""

from __future__ import annotations

import numpy as np

from trtpipe.quality.tasks.base import Task
from trtpipe.quality.tasks.sequence import CHANGES_KEPT, Change

SHOWN = 24  # the values of a changed sample the picture shows


def _shown(values: np.ndarray) -> tuple[int, ...]:
    return tuple(int(v) for v in values.ravel()[:SHOWN])


class ExactTask(Task):
    name = "exact"
    judged = ("exact_match",)
    primary = "exact_match"
    # An output whose first axis is not the batch (NonMaxSuppression's selected indices, a count of one run)
    # is compared whole, the batch's run as one decision.
    rows_are_samples = False

    def __init__(self, spec):
        super().__init__(spec)
        self.count = self.exact = self.agreeing = self.elements_compared = 0
        self.changes: list[Change] = []

    @property
    def compares_elements(self) -> bool:
        return False  # shapes may differ (NonZero), and a cosine of class indices means nothing

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        rows = len(ids) if (self.spec.batch_axis is not None and baseline.shape[:1] == (len(ids),)
                            and candidate.shape[:1] == (len(ids),)) else 0
        pairs = zip(ids, candidate, baseline) if rows else [(ids[0] if len(ids) == 1 else f"{ids[0]}..{ids[-1]}",
                                                             candidate, baseline)]
        for sample, got_one, want_one in pairs:
            self.count += 1
            same_shape = got_one.shape == want_one.shape
            equal = got_one == want_one if same_shape else np.zeros(want_one.shape, bool)
            kept = same_shape and bool(equal.all())
            self.exact += kept
            self.agreeing += int(equal.sum())
            self.elements_compared += want_one.size
            if not kept and len(self.changes) < CHANGES_KEPT:
                self.changes.append(Change(sample, _shown(want_one), _shown(got_one), max(1, int(equal.size - equal.sum()))))

    def finish(self) -> None:
        """An integer output constant over the data still has an answer to keep: nothing is degenerate."""

    def metrics(self) -> dict[str, float]:
        return {"exact_match": self.exact / max(self.count, 1),
                "element_agreement": self.agreeing / max(self.elements_compared, 1),
                "changed_samples": self.count - self.exact}

    def picture(self):
        from trtpipe.quality.pictures import SequenceChanges

        return SequenceChanges(self.changes, self.count - self.exact, self.count, "output", "changed value", "values")

    def summary(self) -> dict[str, float]:
        # No raw metrics: a cosine or SNR of indices is not a measure of them.
        return {**self.metrics(), "finite": self.finite_share, "samples": self.count}
