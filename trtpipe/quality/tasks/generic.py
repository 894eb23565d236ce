"""Generic outputs: cosine and SNR over the tensor, and the worst channel's, so that a small
channel (a class score next to box coordinates, a rarely active feature) cannot hide behind a large one,
and with a threshold the decisions read from the values (bits, same-or-not).
The channel's cosine sees its direction, its SNR its magnitude: a channel scaled by 0.2, offset or
zeroed keeps a high cosine or none at all, but its SNR falls to a few dB."""

from __future__ import annotations

import numpy as np

from trtpipe.quality.metrics import snr_db
from trtpipe.quality.tasks.base import Task


def channel_axis(layout: str | None, rank: int) -> int | None:
    """Return the channel axis: where C stands in `layout` (NCHW, NHWC, NTC...), None for a layout without
    one (NT: a value per token), else 1 (None for rank 1)."""
    if layout:
        if len(layout) != rank:
            from trtpipe.errors import TrtpipeError

            raise TrtpipeError(f"--spec: [[outputs]] layout {layout} has {len(layout)} axes, the output has {rank}; fix it")
        return layout.upper().index("C") if "C" in layout.upper() else None
    return 1 if rank >= 2 else None


class ChannelSums:
    """Per-channel sums that stream: dot products, energies and noise of each channel."""

    def __init__(self):
        self.dot = self.cand = self.base = self.noise = None

    def update(self, candidate: np.ndarray, baseline: np.ndarray, axis: int) -> None:
        a = np.moveaxis(candidate, axis, 0).reshape(candidate.shape[axis], -1)
        b = np.moveaxis(baseline, axis, 0).reshape(baseline.shape[axis], -1)
        sums = [(a * b).sum(1), (a * a).sum(1), (b * b).sum(1), ((a - b) ** 2).sum(1)]
        if self.dot is None:
            self.dot, self.cand, self.base, self.noise = sums
        else:
            for total, part in zip((self.dot, self.cand, self.base, self.noise), sums):
                total += part

    def worst(self) -> dict[str, float]:
        """Return the worst channel's cosine and the worst channel's SNR, with the index of each (channels
        silent in the baseline are skipped)."""
        if self.dot is None:
            return {}
        live = self.base > 0
        if not live.any():
            return {}
        cosine = np.where(live, self.dot / np.sqrt(np.maximum(self.cand * self.base, 1e-300)), np.inf)
        snr = np.array([snr_db(s, n) if s > 0 else np.inf for s, n in zip(self.base, self.noise)])
        return {"channel_cosine_min": float(cosine.min()), "channel_snr_db_min": float(snr.min()),
                "worst_channel": int(cosine.argmin()), "worst_snr_channel": int(snr.argmin()), "channels": len(self.dot)}


class GenericTask(Task):
    name = "generic"
    judged = ("cosine", "cosine_min", "snr_db", "channel_cosine_min", "channel_snr_db_min", "decision_agreement")
    primary = "cosine"

    def __init__(self, spec):
        super().__init__(spec)
        self.channels = ChannelSums()
        # With a `threshold`, each value is a decision read above it (a watermark's bit, a same-or-not
        # probability): rounding that moves a value across it changes the answer, which no cosine shows.
        self.decided = self.agreed = self.flipped = self.values = 0

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        axis = channel_axis(self.spec.layout, candidate.ndim)
        if axis is not None and self.channels.dot is not None and candidate.shape[axis] != len(self.channels.dot):
            from trtpipe.errors import TrtpipeError

            raise TrtpipeError(f"output '{self.output}': axis {axis}, read as its channels, is {len(self.channels.dot)} "
                               f"long in one batch and {candidate.shape[axis]} in another; set layout in its "
                               "[[outputs]] to say where C is (NTC: a state per token)")
        if axis is not None:
            self.channels.update(np.nan_to_num(candidate), baseline, axis)
        if self.spec.threshold is not None:
            same = (np.nan_to_num(candidate) > self.spec.threshold) == (baseline > self.spec.threshold)
            same = same.reshape(len(same), -1)
            self.decided += len(same)
            self.agreed += int(same.all(axis=1).sum())
            self.flipped += int((~same).sum())
            self.values += same.size

    def unmeasured(self, metric: str) -> str:
        if metric == "decision_agreement":
            return "it has no threshold; set threshold in [[outputs]] to the value above which the model's answer is yes"
        if metric.startswith("channel_"):
            return ("it has no channel axis (rank 1) or every channel is 0 in the FP32 baseline; set layout in "
                    "[[outputs]] to say where C is, or drop the channel minimum")
        return super().unmeasured(metric)

    def metrics(self) -> dict[str, float]:
        raw = self.raw.summary()
        decisions = {"decision_agreement": self.agreed / self.decided, "decisions_flipped": self.flipped,
                     "decisions": self.values} if self.decided else {}
        return {"cosine": raw["cosine"], "cosine_min": raw["cosine_min"], "snr_db": raw["snr_db"], **self.channels.worst(),
                **decisions}
