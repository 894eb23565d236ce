"""Generic outputs: cosine and SNR over the tensor, and the worst channel's, so that a small
channel (a class score next to box coordinates, a rarely active feature) cannot hide behind a large one,
and with a threshold the decisions read from the values (bits, same-or-not).
The channel's cosine sees its direction, its SNR its magnitude: a channel scaled by 0.2, offset or
zeroed keeps a high cosine or none at all, but its SNR falls to a few dB. A channel of one value a sample
(a score, a rating, a regressed parameter: [batch, C]) has its SNR taken about FP32's mean over the
samples: what the samples share is no answer, and beside it an error hides. DNSMOS's three quality
scores sit at 1 to 4 with a spread of about 0.9; INT8 moved them by 0.36 to 0.41 (root mean square), 17.3
to 18.1 dB against the scores and 7.0 to 8.3 dB against their spread, and its package's ratings moved by
0.2 on average.

With a `transform` (the user's function, from the spec) every metric is of what it returns: what the
answer is read from. Each value is weighed by its own size otherwise, and a value small beside its
spread can still move the answer most: 3DDFA's 62 face parameters passed at 18.9 dB on the worst,
while its package's landmarks moved past 1% of the face on 7 faces of 128, all from the 12 camera
entries, which rate best. With a `tolerance` too, within_tolerance is the share of samples whose
answer stays within that distance of FP32's. A transform of two arguments also gets FP32's outputs of the
batch, by name: an answer that exists only where another output says so (a pitch where FP32 hears one)
is read on both sides where FP32's says so."""

from __future__ import annotations

import functools
import importlib.util
import inspect
from collections.abc import Callable

import numpy as np

from trtpipe.errors import TrtpipeError, first_line
from trtpipe.quality.metrics import OutputMetrics, snr_db
from trtpipe.quality.tasks.base import Task


def channel_axis(layout: str | None, rank: int) -> int | None:
    """Return the channel axis: where C stands in `layout` (NCHW, NHWC, NTC...), None for a layout without
    one (NT: a value per token), else 1 (None for rank 1)."""
    if layout:
        if len(layout) != rank:
            raise TrtpipeError(f"--spec: [[outputs]] layout {layout} has {len(layout)} axes, the output has {rank}; fix it")
        return layout.upper().index("C") if "C" in layout.upper() else None
    return 1 if rank >= 2 else None


# A channel whose FP32 energy is under this share of the median channel's (an RMS under 2^-16 of a typical
# channel's: FP32's own rounding residue, nothing a layer reading the whole output could tell from zero) is
# silent: its own cosine and SNR measure rounding, not the model, as a channel of zeros does. atspm-pair's
# embedding holds such channels, 1e-12 of the median's, which INT8 returned as exact zeros: cosine 0, a FAIL
# of values no reader could see. A small channel above it is judged (one at 1e-4 of another's size,
# inverted, fails). The output's own cosine still weighs them.
SILENT_ENERGY = 2.0 ** -32


class ChannelSums:
    """Per-channel sums that stream: dot products, energies and noise of each channel, and FP32's sum and
    count of values, for the spread of a channel of one value a sample."""

    def __init__(self):
        self.dot = self.cand = self.base = self.noise = self.total = None
        self.count = 0
        self.one_a_sample = True  # every batch gave each channel one value a sample ([batch, C])

    def update(self, candidate: np.ndarray, baseline: np.ndarray, axis: int) -> None:
        a = np.moveaxis(candidate, axis, 0).reshape(candidate.shape[axis], -1)
        b = np.moveaxis(baseline, axis, 0).reshape(baseline.shape[axis], -1)
        sums = [(a * b).sum(1), (a * a).sum(1), (b * b).sum(1), ((a - b) ** 2).sum(1), b.sum(1)]
        self.one_a_sample &= axis != 0 and b.shape[1] == len(baseline)
        self.count += b.shape[1]
        if self.dot is None:
            self.dot, self.cand, self.base, self.noise, self.total = sums
        else:
            for total, part in zip((self.dot, self.cand, self.base, self.noise, self.total), sums):
                total += part

    def spread(self) -> np.ndarray:
        """Return each channel's energy the SNR is taken against: FP32's squares about its mean over the
        samples for a channel of one value a sample that varies, else about zero (a map's values, a constant)."""
        if not self.one_a_sample:
            return self.base
        about_mean = self.base - self.total ** 2 / max(self.count, 1)
        varies = about_mean > 1e-9 * np.maximum(self.base, 1e-300)  # not FP32's rounding of a constant
        return np.where(varies, np.maximum(about_mean, 0.0), self.base)

    def worst(self) -> dict[str, float]:
        """Return the worst channel's cosine and the worst channel's SNR, with the index of each (channels
        silent in the baseline are skipped: SILENT_ENERGY); a channel of one value a sample has its SNR about
        FP32's mean."""
        if self.dot is None:
            return {}
        live = self.base > 0
        if not live.any():
            return {}
        silent = live & (self.base < SILENT_ENERGY * np.median(self.base[live]))
        live &= ~silent
        cosine = np.where(live, self.dot / np.sqrt(np.maximum(self.cand * self.base, 1e-300)), np.inf)
        snr = np.array([snr_db(s, n) if judged else np.inf for s, n, judged in zip(self.spread(), self.noise, live)])
        about_mean = {"channel_snr_about_mean": 1} if self.one_a_sample else {}
        quiet = {"silent_channels": int(silent.sum())} if silent.any() else {}
        return {"channel_cosine_min": float(cosine.min()), "channel_snr_db_min": float(snr.min()),
                "worst_channel": int(cosine.argmin()), "worst_snr_channel": int(snr.argmin()), "channels": len(self.dot),
                **about_mean, **quiet}


@functools.cache  # tune and auto judge many candidates in one process: the file runs once
def load_transform(text: str, output: str) -> Callable[[np.ndarray], np.ndarray]:
    """Return the function "FILE.py:FUNCTION" names (the spec loader made FILE absolute); raise naming it."""
    file, _, function = text.rpartition(":")
    where = f"--spec: [[outputs]] {output}: transform {file}:{function}"
    try:
        module_spec = importlib.util.spec_from_file_location(f"trtpipe_transform_{output}", file)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file: any error it raises is theirs to fix
        raise TrtpipeError(f"{where}: the file does not run ({named(exc)}); fix it") from None
    found = getattr(module, function, None)
    if not callable(found):
        raise TrtpipeError(f"{where}: the file has no function {function}; name one it defines")
    return found


def takes_reference(function: Callable) -> bool:
    """Return whether the user's transform takes a second argument: FP32's outputs of the batch, by name."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: called with the output alone
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


def named(exc: BaseException) -> str:
    """Return "KeyError: its first line", as a user's function raised it."""
    line = first_line(exc)
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


class GenericTask(Task):
    name = "generic"
    judged = ("cosine", "cosine_min", "snr_db", "channel_cosine_min", "channel_snr_db_min", "decision_agreement",
              "within_tolerance")
    rows_are_samples = False  # values, whatever axis 0 counts (Task.rows_are_samples)

    def __init__(self, spec):
        super().__init__(spec)
        self.channels = ChannelSums()
        # With a `threshold`, each value is a decision read above it (a watermark's bit, a same-or-not
        # probability): rounding that moves a value across it changes the answer, which no cosine shows.
        self.decided = self.agreed = self.flipped = self.values = 0
        self.transform = load_transform(spec.transform, spec.name) if spec.transform else None
        self.answers = OutputMetrics()  # of what the transform returns
        self.within = self.measured = 0
        self.distance_max = 0.0

    def by_stream(self, stream: Callable[[str], str]) -> None:
        super().by_stream(stream)
        self.answers.stream = stream

    @property
    def readings(self) -> list[str]:
        """The metrics of how the spec says the answer is read: within a `tolerance` through its transform,
        at a `threshold`; none when it says neither."""
        return [metric for metric, given in (("within_tolerance", self.spec.transform and self.spec.tolerance is not None),
                                             ("decision_agreement", self.spec.threshold is not None)) if given]

    @property
    def primary(self) -> str:  # type: ignore[override]
        """The metric `sensitivity` ranks by: an answer read within a distance or at a threshold is judged
        so, where a cosine near 1 ranks nothing (UVDoc's unwarping grid: every layer at 1.00000)."""
        return (self.readings or ["cosine"])[0]

    def decisive(self, named) -> tuple[str, ...]:
        """A spec that says how the answer is read is judged by that reading (`readings`): the cosines and SNRs
        beside it are reported, and judged only where the user names them. Judged too, they failed what the
        package's users read as FP32's: SwiftF0's FP16 on a cosine of 0.9998 with 2812 of 2813 pitches within
        50 cents, OpenSpindleNet's tuned INT8 on a segment's SNR of 9.0 dB with its spindles FP32's on 127 of
        128 windows."""
        read = self.readings
        return tuple(m for m in self.judged if m in read or m in named) if read else self.judged

    def _answer(self, values: np.ndarray, of: str, reference: dict) -> np.ndarray:
        """Return the transform of `values` (of: "FP32's" or "the candidate's"), checked to be a row per sample;
        a transform of two arguments gets `reference`, FP32's outputs of the batch, too."""
        where = f"--spec: [[outputs]] {self.output}: transform {self.spec.transform}"
        try:
            given = (values.copy(), {k: np.array(v) for k, v in reference.items()}) if takes_reference(self.transform) \
                else (values.copy(),)
            answer = np.asarray(self.transform(*given), np.float64)
        except Exception as exc:  # noqa: BLE001 - the user's function: any error it raises is theirs to fix
            raise TrtpipeError(f"{where} raised {named(exc)} on {of} output; fix the function") from None
        if answer.ndim == 0 or len(answer) != len(values):
            raise TrtpipeError(f"{where} returned shape {list(answer.shape)} for {len(values)} samples; return one row "
                               "per sample, samples first")
        return answer

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        if self.transform is not None:
            baseline = self._answer(baseline, "FP32's", want)
            if not np.isfinite(baseline).all():
                raise TrtpipeError(f"--spec: [[outputs]] {self.output}: transform {self.spec.transform} returned NaN "
                                   "or Inf for FP32's output; return finite answers")
            candidate = self._answer(np.nan_to_num(candidate), "the candidate's", want)
            if candidate.shape != baseline.shape:
                raise TrtpipeError(f"--spec: [[outputs]] {self.output}: transform {self.spec.transform} returned "
                                   f"{list(candidate.shape)} for the candidate and {list(baseline.shape)} for FP32; "
                                   "return the same shape for both")
            self.answers.update(np.nan_to_num(candidate), baseline, None, ids)
            if self.spec.tolerance is not None:
                gap = np.nan_to_num(candidate - baseline, nan=np.inf)
                points = gap.reshape(len(gap), -1, gap.shape[-1] if gap.ndim > 1 else 1)
                distance = np.sqrt((points ** 2).sum(axis=-1)).mean(axis=1)
                self.within += int((distance <= self.spec.tolerance).sum())
                self.measured += len(distance)
                self.distance_max = max(self.distance_max, float(distance.max(initial=0.0)))
        axis = channel_axis(self.spec.layout, candidate.ndim)
        if axis is not None and self.channels.dot is not None and candidate.shape[axis] != len(self.channels.dot):
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
        if metric == "within_tolerance":
            return ("it has no tolerance; set transform and tolerance in [[outputs]]: the function that reads the "
                    "answer, and the distance within which an answer is FP32's")
        if metric == "decision_agreement":
            return "it has no threshold; set threshold in [[outputs]] to the value above which the model's answer is yes"
        if metric.startswith("channel_"):
            return ("it has no channel axis (rank 1) or every channel is 0 in the FP32 baseline; set layout in "
                    "[[outputs]] to say where C is, or drop the channel minimum")
        return super().unmeasured(metric)

    def metrics(self) -> dict[str, float]:
        raw = self.answers.summary() if self.transform is not None else self.raw.summary()
        decisions = {"decision_agreement": self.agreed / self.decided, "decisions_flipped": self.flipped,
                     "decisions": self.values} if self.decided else {}
        within = {"within_tolerance": self.within / self.measured, "tolerance": self.spec.tolerance,
                  "distance_max": self.distance_max} if self.measured else {}
        worst = {"worst_sample": raw["worst_sample"]} if "worst_sample" in raw else {}
        return {"cosine": raw["cosine"], "cosine_min": raw["cosine_min"], **worst, "snr_db": raw["snr_db"], **self.channels.worst(),
                **decisions, **within}
