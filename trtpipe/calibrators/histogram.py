"""A streaming histogram of |x| in TensorRT's layout: the first batch sets the bin width, later
batches that reach further add bins of the same width, so memory never grows with the samples.

Nor with the range, beyond MAX_BINS: a sample far out of scale (raw 0-65535 pixels among normalized
ones, a stray 1e30) would otherwise ask for billions of bins of the first batch's width (a 1e30 one
stopped calibrate, blamed on the data). Past MAX_BINS neighbouring bins merge in pairs, exactly,
until the range fits: coarser than TensorRT only where TensorRT's own would not fit in memory."""

from __future__ import annotations

import math

import numpy as np

DEFAULT_BINS = 2048
MAX_BINS = 1 << 18  # 2 MB of counts a tensor: 128 times the first batch's range at the default width


class StreamingHistogram:
    """Counts of |x| in bins of one width from 0, and the exact max, updated batch by batch."""

    def __init__(self, bins: int = DEFAULT_BINS):
        self.initial_bins = bins
        self.counts: np.ndarray | None = None
        self.width: float | None = None
        self.max = 0.0
        self.total = 0
        self._zeros_before_width = 0

    @property
    def edges(self) -> np.ndarray:
        """Bin edges: len(counts) + 1 values from 0."""
        assert self.counts is not None and self.width is not None, "no bins before a non-zero value is seen"
        return np.arange(len(self.counts) + 1, dtype=np.float64) * self.width

    def update(self, x: np.ndarray) -> None:
        magnitudes = np.abs(np.asarray(x, dtype=np.float32).ravel())  # a fresh array: the steps below reuse it
        if magnitudes.size == 0:
            return
        batch_max = float(magnitudes.max())
        if not math.isfinite(batch_max):  # max propagates NaN and infinity
            raise ValueError("the tensor holds NaN or infinity")
        self.total += magnitudes.size
        self.max = max(self.max, batch_max)
        if self.width is None:
            if batch_max == 0.0:
                self._zeros_before_width += magnitudes.size  # no width can be set from zeros
                return
            self.width = batch_max / self.initial_bins
            self.counts = np.zeros(self.initial_bins, dtype=np.int64)
            self.counts[0] += self._zeros_before_width
        assert self.counts is not None  # made with the width
        needed = math.ceil(batch_max / self.width)
        while needed > MAX_BINS:
            self._merge_pairs()
            needed = math.ceil(batch_max / self.width)
        if needed > len(self.counts):
            self.counts = np.concatenate([self.counts, np.zeros(needed - len(self.counts), np.int64)])
        # Bins are closed on the right, (a, b], so each batch's max lands in a bin of its own
        # and streaming gives exactly the one-shot counts; zero goes to bin 0.
        np.divide(magnitudes, np.float32(self.width), out=magnitudes)
        np.ceil(magnitudes, out=magnitudes)
        index = magnitudes.astype(np.int64)
        index -= 1
        np.clip(index, 0, len(self.counts) - 1, out=index)
        self.counts += np.bincount(index, minlength=len(self.counts))

    def _merge_pairs(self) -> None:
        """Double the bin width: bins (2k w, (2k+1) w] and ((2k+1) w, (2k+2) w] are (k 2w, (k+1) 2w]."""
        assert self.counts is not None and self.width is not None
        counts = self.counts if len(self.counts) % 2 == 0 else np.append(self.counts, 0)
        self.counts = counts.reshape(-1, 2).sum(axis=1)
        self.width *= 2

    @property
    def empty(self) -> bool:
        return self.counts is None
