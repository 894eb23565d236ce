"""The base every task builds on: Task (the raw-tensor metrics, the baseline checks, the summary),
Degenerate, and the checks of baseline outputs and inputs for NaN or Inf.

Each task module (classification, embedding, ...) subclasses Task from here; the package imports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.quality.metrics import OutputMetrics
from trtpipe.spec import OutputSpec


class Degenerate(TrtpipeError):
    """The data cannot judge an output (constant or non-finite baseline): the CLI exits 2 with the cause."""


class Task:
    """Base of every task: the raw-tensor metrics of the output, the baseline checks, the summary.

    `judged` lists the metrics thresholds may check, the most telling first; `primary` is the one
    that ranks layers in `sensitivity`.
    """

    name = "generic"
    judged: tuple[str, ...] = ("cosine",)
    primary = "cosine"
    # Each row on the batch axis is one sample, read beside that sample's inputs and label; so the rows must be
    # as many as the batch's samples. The generic task reads values, and takes any rows (a batch-1 model's
    # waveform [samples] is judged as it always was).
    rows_are_samples = True

    def __init__(self, spec: OutputSpec):
        self.spec = spec
        self.why = ""  # where the task came from: the spec, or what it was inferred from (make_tasks)
        self.raw = OutputMetrics()
        self.baseline_min = np.inf
        self.baseline_max = -np.inf
        self.finite = 0
        self.elements = 0
        self.first: np.ndarray | None = None  # the baseline's first sample, and whether any other differs
        self.varies = False

    @property
    def output(self) -> str:
        return self.spec.name

    def by_stream(self, stream: Callable[[str], str]) -> None:
        """Take each stream (`stream` of a sample id) as one sample of the cosines: a streamed spec's samples are
        steps (OutputMetrics.stream)."""
        self.raw.stream = stream

    def decisive(self, named) -> tuple[str, ...]:
        """Return the metrics of `judged` whose minimums decide the verdict; `named`, the metrics the user
        named in [thresholds] or --threshold, are judged wherever measured."""
        return self.judged

    @property
    def reads(self) -> list[str]:
        """Return the outputs this task consumes (detection may read three)."""
        return [self.spec.name]

    def update(self, got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray], ids: Sequence[str],
               inputs: Mapping[str, np.ndarray], labels: np.ndarray | None = None) -> None:
        """Add one batch: the candidate's outputs `got`, the baseline's `want`, the sample ids and inputs,
        and the labels (-1: unknown) where there are any."""
        if self.spec.batch_axis is None:  # no batch axis: the whole tensor is one sample of this run, as are those read beside it
            got, want = ({**arrays, **{name: np.asarray(arrays[name])[None] for name in self.reads}} for arrays in (got, want))
            ids, labels = [ids[0] if len(ids) == 1 else f"{ids[0]}..{ids[-1]}"], None
        elif self.spec.batch_axis:  # samples first, as every metric below reads them
            shape = np.shape(want[self.output])
            if not 0 < self.spec.batch_axis < len(shape):
                raise TrtpipeError(f"--spec: [[outputs]] {self.output}: batch_axis {self.spec.batch_axis} is not an axis "
                                   f"of its shape {list(shape)}; fix it")
            got, want = ({**arrays, self.output: np.moveaxis(arrays[self.output], self.spec.batch_axis, 0)}
                         for arrays in (got, want))
        if self.rows_are_samples and self.spec.batch_axis is not None:
            count = np.shape(want[self.output])[:1]
            if count != (len(ids),):  # the metrics below take each row for a sample, and pair it with the sample's inputs
                held = f"{count[0]} on its batch axis ({self.spec.batch_axis})" if count else "no axis"
                raise TrtpipeError(
                    f"output '{self.output}': {held} for a batch of {len(ids)} samples, so that axis does not count "
                    "samples (a list of detections after NMS?); say where they stack with [[outputs]] batch_axis, or "
                    "batch_axis = \"none\" for an output without one")
        for name in self.reads:
            check_baseline(name, want[name], ids)
            values = np.asarray(got[name])
            if values.dtype.kind == "f":  # every output the task reads: a NaN in a map beside the main one counts
                self.finite += int(np.isfinite(values).sum())
                self.elements += values.size
        candidate = np.asarray(got[self.output], np.float64)
        baseline = np.asarray(want[self.output], np.float64)
        if candidate.shape != baseline.shape and self.compares_elements:
            raise TrtpipeError(f"output '{self.output}': the candidate gives shape {list(candidate.shape)}, the baseline "
                               f"{list(baseline.shape)}; compare builds of one model")
        self.baseline_min = min(self.baseline_min, float(baseline.min(initial=np.inf)))
        self.baseline_max = max(self.baseline_max, float(baseline.max(initial=-np.inf)))
        if self.first is None and len(baseline):
            self.first = baseline[0]
        if not self.varies and self.first is not None:
            # Samples of their own lengths (one phrase a run) differ in shape, and so vary.
            self.varies = baseline.shape[1:] != self.first.shape or not np.allclose(
                baseline, self.first[None], rtol=1e-5, atol=1e-6 * max(1.0, abs(self.baseline_max)))
        if self.compares_elements:
            finite = np.isfinite(candidate)
            self.raw.update(np.where(finite, candidate, 0.0), baseline, labels, ids)  # labels count for classifiers only
        self.add(candidate, baseline, got, want, ids, inputs)

    @property
    def compares_elements(self) -> bool:
        """Whether `update` compares the main output element by element (the raw metrics); a task that
        answers False pairs what it compares itself, in `add`."""
        return True

    def add(self, candidate: np.ndarray, baseline: np.ndarray, got, want, ids, inputs) -> None:
        """The task's own part of `update`, on the main output as float64."""

    def finish(self) -> None:
        """Raise Degenerate when the whole run cannot judge this output."""
        span = self.baseline_max - self.baseline_min
        if self.raw.count and span <= 1e-6 * max(1.0, abs(self.baseline_max), abs(self.baseline_min)):
            raise Degenerate(
                f"output '{self.output}': the FP32 baseline is {self.baseline_min:.3g} (to 1e-6) in every element of all "
                f"{self.raw.count} samples, so no metric can tell a good candidate from a bad one; likely cause: "
                f"{constant_cause(self)}; validate on data where this output varies")
        if self.raw.count > 1 and not self.varies:
            raise Degenerate(
                f"output '{self.output}': the FP32 baseline is the same for every one of the {self.raw.count} samples, "
                "so they are one sample judged many times; likely cause: inputs that are all alike (blank images, "
                "padding only) or an output that does not depend on the inputs; validate on varied data, or, where it "
                "is alike by design (a decoder's cache of a prompt every sample shares), list the outputs to judge in "
                "the spec's [[outputs]] without it")

    def metrics(self) -> dict[str, float]:
        """Return the task's metrics (judged ones first), then the raw-tensor ones."""
        return {}

    def summary(self) -> dict[str, float]:
        raw = self.raw.summary()
        result = self.metrics()
        if "cosine_min" not in result and "worst_sample" in raw:  # named with the cosine_min it is the sample of
            result["worst_sample"] = raw["worst_sample"]
        for key in ("cosine", "cosine_min", "snr_db", "max_abs_error", "mean_abs_error", "values_per_sample"):
            result.setdefault(key, raw[key])
        result["finite"] = self.finite_share
        result["samples"] = raw["samples"]
        return result

    @property
    def finite_share(self) -> float:
        """Return the share of the float values read that are finite: 1 where none is a float (an ArgMax's ids)."""
        return self.finite / self.elements if self.elements else 1.0

    def described(self) -> dict[str, str]:
        """Return how this output was read, for the report: why this task (and a detector's layout)."""
        return {"why": self.why} if self.why else {}

    def unmeasured(self, metric: str) -> str:
        """Return why this run gave no `metric` (one of `judged`), and what would give one."""
        return "this data gives no value for it; remove the threshold"

    def picture(self):
        """Return what the report draws for this output (a small dataclass of trtpipe.quality.pictures)."""
        from trtpipe.quality.pictures import ErrorHistogram

        return ErrorHistogram(np.asarray(self.raw.error_sample))


def check_baseline(name: str, values: np.ndarray, ids: Sequence[str]) -> None:
    """Raise Degenerate naming the output and sample when the baseline holds NaN or Inf."""
    values = np.asarray(values)
    if values.dtype.kind != "f":
        return
    bad = ~np.isfinite(values.reshape(len(values), -1)).all(axis=1) if values.ndim else ~np.isfinite(values)
    if bad.any():
        sample = ids[int(np.argmax(bad))] if values.ndim else "?"
        raise Degenerate(f"output '{name}': the FP32 baseline holds NaN or Inf on sample {sample}; likely cause: "
                         "that sample is out of the range the model expects (preprocessing, scale) or the FP32 "
                         "model itself overflows; fix or remove the sample")


def constant_cause(task: Task) -> str:
    if abs(task.baseline_min) < 1e-6:
        return ("the data holds nothing this output responds to (a detector or a text map on images without "
                "objects or text), or the preprocessing blanks the inputs")
    return "an output that does not depend on the inputs (a constant or a passthrough), or inputs that are all alike"
