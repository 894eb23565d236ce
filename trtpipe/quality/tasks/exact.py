"""Integer and bool outputs: what the model decided itself (an ArgMax's classes, TopK's or NonZero's
indices, a count, a comparison's mask), judged by whether the candidate decides as FP32 does: the share
of samples whose output is FP32's in every element (exact_match), and the share of elements that agree.

A model that reads its answer out in the graph (TrueOCR's recognizer: its text is an ArgMax beside the
chosen class's probability) changes the answer where the best two scores swap, which moves the
probability beside it too little for any float metric to see. An integer output that copies an input
agrees by construction and passes."""

from __future__ import annotations

from trtpipe.quality.tasks.base import Task


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

    @property
    def compares_elements(self) -> bool:
        return False  # shapes may differ (NonZero), and a cosine of class indices means nothing

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        rows = len(ids) if (self.spec.batch_axis is not None and baseline.shape[:1] == (len(ids),)
                            and candidate.shape[:1] == (len(ids),)) else 0
        pairs = zip(candidate, baseline) if rows else [(candidate, baseline)]
        for got_one, want_one in pairs:
            self.count += 1
            if got_one.shape == want_one.shape:
                equal = got_one == want_one
                self.exact += bool(equal.all())
                self.agreeing += int(equal.sum())
            self.elements_compared += want_one.size

    def finish(self) -> None:
        """An integer output constant over the data still has an answer to keep: nothing is degenerate."""

    def metrics(self) -> dict[str, float]:
        return {"exact_match": self.exact / max(self.count, 1),
                "element_agreement": self.agreeing / max(self.elements_compared, 1),
                "changed_samples": self.count - self.exact}

    def summary(self) -> dict[str, float]:
        # No raw metrics: a cosine or SNR of indices is not a measure of them.
        return {**self.metrics(), "finite": self.finite_share, "samples": self.count}
