"""spindle-eeg's answer: the spindles of a 30 s window, each segment's [start, end] in seconds, for validate's
`transform` (the spec's [[outputs]]). OpenSpindleNet's `detection` [batch, 30, 3] holds, for each 1 s segment
of the window, three logits: a spindle's confidence, its centre's offset within the segment, and its
duration over 2 s. brainmaze-eeg-models decodes them as read here: the sigmoid of each, a segment's spindle
kept at confidence >= 0.5, centre (segment + offset) s, duration 2 s x sigmoid, clipped to the window; then
non-maximum suppression, the most confident first, drops a spindle overlapping a kept one at IoU >= 0.3 (a
spindle across a segment boundary is often found by both segments, and the less confident copy, read by no
one, comes and goes at 0.5). A segment without a spindle is read as an empty interval at its middle, so a
spindle found on one side only is as far from the other's as its own edges are from its middle (0.35 s for
a 0.5 s spindle). The answer is one row of 60 numbers a window: validate's distance is then the root of every
edge's squared move summed over the window, in seconds."""

import numpy as np

SEGMENTS, WINDOW_S, LONGEST_S = 30, 30.0, 2.0  # brainmaze_eeg_models.spindles._decode: SEGMENTS, 7500 / 250 Hz, MAX_DURATION_S
KEPT, OVERLAP = 0.5, 0.3  # SpindleDetector's confidence_threshold and nms_iou_threshold


def suppressed(start: np.ndarray, end: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """Return which of one window's spindles non-maximum suppression drops (greedy, the most confident first)."""
    order = np.argsort(-confidence, kind="stable")
    dropped = np.zeros(len(start), bool)
    for at, i in enumerate(order):
        rest = order[at + 1:]
        if dropped[i] or not len(rest):
            continue
        overlap = np.maximum(0.0, np.minimum(end[i], end[rest]) - np.maximum(start[i], start[rest]))
        union = (end[i] - start[i]) + (end[rest] - start[rest]) - overlap
        dropped[rest[overlap >= OVERLAP * np.maximum(union, 1e-12)]] = True
    return dropped


def edges(detection: np.ndarray) -> np.ndarray:
    """Return each window's spindles as [samples, 60]: every segment's start and end in seconds."""
    confidence, offset, duration = (1 / (1 + np.exp(-np.asarray(detection, np.float64)))).transpose(2, 0, 1)
    middle = np.arange(SEGMENTS) + 0.5
    rows = []
    for conf, off, dur in zip(confidence, offset, duration):
        centre, half = np.arange(SEGMENTS) + off, dur * LONGEST_S / 2
        start, end = np.clip(centre - half, 0, WINDOW_S), np.clip(centre + half, 0, WINDOW_S)
        found = np.flatnonzero((conf >= KEPT) & (end > start))
        kept = np.zeros(SEGMENTS, bool)
        kept[found[~suppressed(start[found], end[found], conf[found])]] = True
        rows.append(np.stack([np.where(kept, start, middle), np.where(kept, end, middle)], axis=-1).reshape(-1))
    return np.array(rows)
