"""How `trtpipe tune` judges a configuration on the tuning split: the spec's task metrics, the same
definitions validation uses, and a margin against the thresholds that counts share metrics (top-1
agreement...) by a lower confidence bound, so that luck on a small split does not choose."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist

import numpy as np

from trtpipe.data import Batch
from trtpipe.quality.validate import SHARES
from trtpipe.spec import ModelSpec

# A share metric (SHARES: a sample agrees or not) on a tuning split of n samples is an estimate that
# moves by about sqrt(p(1-p)/n), and a search that keeps the fastest configuration that passes picks
# the one whose luck on those n samples was best: EfficientNet-lite0 INT8 met 98% top-1 agreement on
# 128 calibration samples and reached 96.25% on the validation set. So the search judges a share
# by a lower confidence bound on it, not by the share itself (`confidence`).


def lower_bound(share: float, samples: int, confidence: float) -> float:
    """Return the one-sided lower bound at `confidence` of a proportion seen as `share` of `samples`
    (Wilson's score interval: sound at a share of 1, where the normal approximation gives no room);
    `share` itself when `confidence` is 0 or nothing was counted."""
    if confidence <= 0 or samples <= 0 or math.isnan(share):
        return share
    z = NormalDist().inv_cdf(confidence)
    n = float(samples)
    centre = share + z * z / (2 * n)
    spread = z * math.sqrt(max(share * (1 - share), 0.0) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def supported_confidence(samples: int, minimum: float) -> float:
    """Return the highest confidence at which `samples` samples, all agreeing, show a share of at
    least `minimum` (Wilson's bound at a share of 1 is 1 / (1 + z^2/n)); 1 for a minimum of 0."""
    if minimum <= 0:
        return 1.0
    if minimum >= 1:
        return 0.0
    return NormalDist().cdf(math.sqrt(samples * (1 - minimum) / minimum))


def margins(metrics: Mapping[str, float], thresholds: Mapping[str, float], counts: Mapping[str, int] | None = None,
            confidence: float = 0.0) -> tuple[float, ...]:
    """Return every check's (value - minimum), scaled by the room below 1 (or by |minimum| for
    metrics beyond 1, such as SNR in dB), the worst first: negative when a threshold fails. A share
    metric with its sample count in `counts` is judged by its lower bound at `confidence`
    (`lower_bound`), or at the highest confidence its samples support when that is lower
    (`supported_confidence`).

    Compared as tuples, the worst check decides and ties go to the next worst: two configurations
    whose top-1 agreement bounds are equal (every sample agreeing) are told apart by their cosine."""
    values = []
    for metric, minimum in thresholds.items():
        if metric not in metrics:
            continue
        value = metrics[metric]
        if counts and metric in counts:
            # Capped at what the samples can show: when all of them agree, the share passes (else a
            # small count, such as FP32's confident samples, could never pass at all).
            bound = lower_bound(value, counts[metric], min(confidence, supported_confidence(counts[metric], minimum)))
            value = max(bound, minimum) if value >= 1.0 else bound  # (exactly: rounding may put it below)
        room = (1.0 - minimum) if minimum < 1.0 else max(abs(minimum), 1.0)
        values.append((value - minimum) / max(room, 1e-9) if not math.isnan(value) else -math.inf)
    return tuple(sorted(values)) or (0.0,)


def task_metrics(typed, spec: ModelSpec, batches: Sequence[Batch], wanted: Sequence[Mapping[str, np.ndarray]],
                 thresholds: Mapping[str, float], named: Mapping[str, str] | None = None,
                 ) -> tuple[dict[str, float], dict[str, int]]:
    """Return the typed model's judged metrics on `batches` against the baseline's outputs, each at its
    worst over the outputs that judge it, and the count behind each share metric (SHARES).

    The checks are validation's own (validate.judge on the tasks validation makes): a metric counts on an
    output only where its task judges it (a detector's raw cosine does not), and a `named` metric the
    data cannot measure raises as it does there. So the search and the confirmation on the validation
    set apply one definition of each metric and one rule for which thresholds apply.
    """
    from trtpipe.quality.tasks import judge_model, make_tasks
    from trtpipe.quality.validate import judge

    judged = judge_model(typed, lambda outputs: make_tasks(spec, outputs), batches, wanted, "tuning", spec)
    summaries, checks = judge([task for task, _ in judged], "", dict(thresholds), dict(named or {}))
    result: dict[str, float] = {}
    counts: dict[str, int] = {}
    for metric in dict.fromkeys(c.metric for c in checks if c.metric in thresholds):
        worst = min((c for c in checks if c.metric == metric), key=lambda c: (not math.isnan(c.value), c.value))
        result[metric] = worst.value
        count = int(summaries[worst.output].get(SHARES.get(metric, ""), 0))
        if metric in SHARES and count:
            counts[metric] = count
    return result, counts
