"""Validation: a candidate (engine, or any ONNX simulated in ONNX Runtime) against the FP32 ONNX
Runtime baseline on the same samples, every judged output by its task's metrics, judged by
per-precision thresholds and written as a report that says what ran and where."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trtpipe import data
from trtpipe.errors import TrtpipeError
from trtpipe.files import ensure_dir, json_text, read_text_input, staged_outputs
from trtpipe.progress import progress_bar
from trtpipe.quality.stream import Stream, carried_inputs
from trtpipe.quality.tasks import Task, make_tasks
from trtpipe.runtime.runner import Runner
from trtpipe.spec import ModelSpec, is_float

# Minimums per precision. A metric applies to an output only when its task judges it (top-1
# agreement to a classifier, mAP to a detector...). The cosine and top-1 figures were chosen from
# measurements on the shipped models with margin; the task figures from YOLOv8n (nudenet) and
# PP-OCRv4's text detector on real photos (docs/validation.md lists the measurements).
# A sequence's exact_match is held like top-1 agreement (a decoded string is one decision per sample):
# a CTC captcha recognizer whose INT8 build changed 6.2% of its strings passed the generic cosine.
# The boxes a user gets at the detector's own threshold are held to 0.95 of FP32's each way (recall and
# precision, faces too) at INT8 and FP8, 0.98 above them: an F1 of 0.85, the old INT8 minimum, passed a YOLOv8n FP8
# that lost 3 of NudeNet's 32 boxes (recall 0.906 by NudeNet's own decode). A box whose score crosses
# `conf` is a box the user loses or gains, however close to the line it was.
# An embedding keeps each sample's nearest neighbour (what a retrieval returns first) on 0.95 of the
# samples: 5-neighbour agreement passed a MiniLM-L3 INT8 that moved 4 of 32 sentences' best match.
_LOOSE = {"top1_agreement": 0.98, "confident_top1_agreement": 0.99, "neighbour_agreement": 0.9,
          "nearest_agreement": 0.95, "map50": 0.9, "f1": 0.95, "precision": 0.95, "recall": 0.95, "box_iou": 0.9,
          "iou": 0.9, "pixel_agreement": 0.98, "exact_match": 0.98, "char_agreement": 0.99,
          "face_recall": 0.95, "face_precision": 0.95, "landmark_agreement": 0.98, "decision_agreement": 0.98,
          "within_tolerance": 0.98}
_TIGHT = {"top1_agreement": 0.98, "confident_top1_agreement": 0.995, "neighbour_agreement": 0.95,
          "nearest_agreement": 0.98, "map50": 0.95, "f1": 0.95, "precision": 0.98, "recall": 0.98, "box_iou": 0.95,
          "iou": 0.95, "pixel_agreement": 0.99, "exact_match": 0.99, "char_agreement": 0.995,
          "face_recall": 0.99, "face_precision": 0.99, "landmark_agreement": 0.995, "decision_agreement": 0.99,
          "within_tolerance": 0.99}


def snr_for_cosine(cosine: float) -> float:
    """Return the SNR (dB) at which noise uncorrelated with the signal gives `cosine`: 10·log10(c²/(1−c²)).

    A channel's cosine is blind to its scale (class scores x0.2 keep cosine 1), its SNR is not; held
    to the SNR its cosine minimum implies, honest rounding noise passes both or neither, while a
    scaled, offset or zeroed channel fails the SNR (x0.2 is 1.9 dB, zeroed 0 dB)."""
    return math.floor(100 * math.log10(cosine ** 2 / (1 - cosine ** 2))) / 10  # to 0.1 dB, never stricter


def _generic(cosine: float, channel_cosine: float) -> dict[str, float]:
    # Each sample is one user's input, held as the worst channel is: a mean over 32 recordings of 0.997 passed an
    # NSNet2 INT8 that cut 0.9 s of one recording's speech (its cosine 0.928, 3.3 dB of FP32's waveform).
    return {"cosine": cosine, "cosine_min": channel_cosine, "channel_cosine_min": channel_cosine,
            "channel_snr_db_min": snr_for_cosine(channel_cosine)}


DEFAULT_THRESHOLDS: dict[str, dict[str, float]] = {
    "fp32": {**_generic(0.99999, 0.9999), **_TIGHT},
    "tf32": {**_generic(0.9999, 0.999), **_TIGHT},
    "fp16": {**_generic(0.9999, 0.999), **_TIGHT},
    "bf16": {**_generic(0.999, 0.99), **_TIGHT},
    "int8": {**_generic(0.99, 0.95), **_LOOSE},
    "fp8": {**_generic(0.99, 0.95), **_LOOSE},
    # The low-bit issue's bar; MiniLM does not clear it yet (docs/lowbit.md has the figures).
    "int4": {**_generic(0.99, 0.95), **_LOOSE},
    "fp4": {**_generic(0.99, 0.95), **_LOOSE},
}
CHECKED_METRICS = ("cosine", "cosine_min", "snr_db", "channel_cosine_min", "channel_snr_db_min", "top1_agreement",
                   "confident_top1_agreement", "top5_agreement", "accuracy", "neighbour_agreement", "nearest_agreement",
                   "map50", "f1", "box_iou", "precision", "recall", "iou", "pixel_agreement", "exact_match",
                   "char_agreement", "face_recall", "face_precision", "landmark_agreement", "decision_agreement",
                   "within_tolerance")


def thresholds_for(precision: str, spec: ModelSpec | None = None, overrides: dict[str, float] | None = None) -> dict[str, float]:
    """Return the thresholds for `precision`: defaults, then the spec's, then the command line's."""
    result = dict(DEFAULT_THRESHOLDS.get(precision, DEFAULT_THRESHOLDS["fp16"]))
    if spec is not None:
        result.update(spec.thresholds.get(precision, {}))
    result.update(overrides or {})
    unknown = set(result) - set(CHECKED_METRICS)
    if unknown:
        raise TrtpipeError(f"--threshold {min(unknown)}: unknown metric; use one of {', '.join(CHECKED_METRICS)}")
    for metric, minimum in result.items():
        if metric not in UNBOUNDED_METRICS and minimum > 1:
            where = (f"--threshold {metric}={minimum:g}" if metric in (overrides or {})
                     else f"{spec.path or 'the spec'}: [thresholds.{precision}] {metric} = {minimum:g}")
            raise TrtpipeError(f"{where}: {metric} is at most 1, so no candidate could pass; give a minimum of 1 or less")
    return result


# A cosine, a share of samples or an IoU is at most 1; only SNRs (dB) have no ceiling.
UNBOUNDED_METRICS = ("snr_db", "channel_snr_db_min")


def named_thresholds(precision: str, spec: ModelSpec | None = None, overrides: dict[str, float] | None = None) -> dict[str, str]:
    """Return the metrics the user named for `precision` (not the defaults), each with where it was named:
    those must be judged on every output whose task judges them, or validation stops (`judge`)."""
    named = {}
    if spec is not None:
        named.update({m: f"--spec {spec.path}: [thresholds.{precision}] {m}" for m in spec.thresholds.get(precision, {})})
    named.update({m: f"--threshold {m}" for m in overrides or {}})
    return named


def require_judged(tasks: list[Task], named: dict[str, str], model: str) -> None:
    """Raise naming the first metric in `named` that no task of `tasks` judges, and those they judge."""
    judged = list(dict.fromkeys(m for task in tasks for m in task.judged))
    for metric, where in named.items():
        if metric not in judged:
            raise TrtpipeError(f"{where}: no judged output of {model} has this metric; its outputs' tasks "
                               f"({', '.join(sorted({t.name for t in tasks}))}) judge {', '.join(judged)}")


# Metrics that are a share of samples (a sample agrees or not), and the summary key counting the
# samples each is a share of. With n samples one sample moves such a share by 1/n: when that is more
# than the minimum allows, a single sample decides the check and the report says so (coarse_checks);
# tune judges them by a confidence bound (tune_judge).
SHARES = {"top1_agreement": "samples", "top5_agreement": "samples", "accuracy": "samples",
          "neighbour_agreement": "samples", "confident_top1_agreement": "confident_samples", "exact_match": "samples",
          "face_recall": "baseline_faces", "face_precision": "candidate_faces", "decision_agreement": "samples",
          "within_tolerance": "samples"}


@dataclass
class Check:
    metric: str
    output: str
    value: float
    minimum: float
    task: str = "generic"

    @property
    def passed(self) -> bool:
        return not math.isnan(self.value) and self.value >= self.minimum

    @property
    def used(self) -> float:
        """Return the share of the allowed loss this value uses: 0 is perfect, above 1 fails.

        Metrics in [0, 1] lose from 1; SNR (dB) and others count the minimum against the value."""
        if math.isnan(self.value):
            return math.inf
        if self.metric.startswith(("channel_snr", "snr")):
            return self.minimum / self.value if self.value > 0 else math.inf
        return (1 - self.value) / max(1 - self.minimum, 1e-12)

    def to_json(self) -> dict:
        return {"metric": self.metric, "output": self.output, "task": self.task, "value": self.value,
                "minimum": self.minimum, "passed": self.passed}


def deciding(checks: list[Check]) -> Check | None:
    """Return the check that decided the verdict: the worst failure, else the one nearest to failing."""
    return max(checks, key=lambda c: c.used, default=None)


def one_sample_decides(count: float | None, minimum: float) -> bool:
    """Return True where one sample of `count` is more than the share `minimum` lets fail (32 samples against
    0.98: one is 3.1%, 2.0% is allowed), so that a single sample decides the check."""
    allowed = 1 - minimum
    return bool(count) and 0 < allowed < 1 / float(count or 1)


@dataclass
class Report:
    """What was compared, how, and whether it passed."""

    candidate: str
    baseline: str
    precision: str
    measured: bool  # True only for an engine that ran on its GPU; any ONNX candidate is simulated
    samples: int
    candidate_runner: str = ""  # e.g. "ONNX Runtime CPUExecutionProvider"
    baseline_runner: str = ""
    outputs: dict[str, dict] = field(default_factory=dict)  # name -> {"task": ..., metrics...}
    passthrough: dict[str, float] = field(default_factory=dict)  # integer outputs [[outputs]] leaves out: share equal
    checks: list[Check] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)
    pictures: dict[str, object] = field(default_factory=dict)
    carried: dict[str, str] = field(default_factory=dict)  # input: the output of the step before it was fed from

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def mode(self) -> str:
        return "measured" if self.measured else "simulated"

    def deciding_checks(self) -> str:
        """Return the checks of the output that decided the verdict (`deciding`) as '[output: ]metric value, ...'.

        One line of progress. Not the first output's: silero-vad's speech probability passes while its
        LSTM state fails, and a FAIL next to passing figures reads as a bug."""
        decided = deciding(self.checks)
        if decided is None:
            return ""
        line = ", ".join(f"{c.metric} {c.value:.5f}" for c in self.checks if c.output == decided.output)
        return f"{decided.output}: {line}" if len({c.output for c in self.checks}) > 1 else line

    def coarse_checks(self) -> list[dict]:
        """Return the share checks (SHARES) that one sample decides: {"output", "metric", "samples",
        "minimum", "needed"}, where 1/samples is more than the loss the minimum allows (32 samples
        against top-1 agreement >= 0.98: one flip is 3.1%, 2.0% is allowed) and `needed` is the fewest
        samples on which one disagreeing sample still passes (50 there)."""
        coarse = []
        for check in self.checks:
            count = self.outputs.get(check.output, {}).get(SHARES.get(check.metric, ""))
            if one_sample_decides(count, check.minimum):
                coarse.append({"output": check.output, "metric": check.metric, "samples": int(count),
                               "minimum": check.minimum, "needed": math.ceil(1 / (1 - check.minimum) - 1e-9),
                               "unit": "face" if SHARES[check.metric].endswith("faces") else "sample"})
        return coarse

    def to_json(self) -> dict:
        decided = deciding(self.checks)
        return {
            "candidate": self.candidate, "baseline": self.baseline, "precision": self.precision,
            "mode": self.mode, "measured": self.measured, "baseline_mode": "baseline",
            "candidate_runner": self.candidate_runner, "baseline_runner": self.baseline_runner,
            "samples": self.samples, "passed": self.passed, "decided_by": decided.to_json() if decided else None,
            "thresholds": self.thresholds, "outputs": self.outputs, "passthrough": self.passthrough,
            "checks": [c.to_json() for c in self.checks], "coarse_checks": self.coarse_checks(), "carried": self.carried,
        }

    def markdown(self, pictures: dict[str, str] | None = None) -> str:
        """Return the report as Markdown; `pictures` maps an output to its picture's file name, linked under it."""
        how = (f"measured: the engine ran on its GPU ({self.candidate_runner})" if self.measured else
               f"simulated: the ONNX ran in {self.candidate_runner}; no engine ran")
        decided = deciding(self.checks)
        worst = self.outputs[decided.output].get("worst_sample") if decided and decided.metric == "cosine_min" else None
        lines = [f"# {Path(self.candidate).name} vs {Path(self.baseline).name}", "",
                 f"{self.precision}, {self.samples} samples; {how}. Baseline: the FP32 ONNX in {self.baseline_runner}.", "",
                 f"**{'PASS' if self.passed else 'FAIL'}**" + (f": decided by {_describe(decided)}" if decided else "")
                 + (f", on sample {worst}" if worst else ""), ""]
        if self.carried:
            fed = ", ".join(f"{name} from {output}" for name, output in self.carried.items())
            lines += [(f"Streamed: each data file's samples in order, each runner fed its own outputs of the step before "
                       f"({fed}); cosine and cosine_min are each stream's, its steps together (an embedding's, each step's)."), ""]
        for coarse in self.coarse_checks():
            unit = coarse["unit"]
            lines += [(f"Too few {unit}s for {coarse['metric']} on {coarse['output']}: one {unit} of {coarse['samples']} "
                       f"is {1 / coarse['samples']:.1%}, more than the {1 - coarse['minimum']:.1%} its minimum "
                       f"{coarse['minimum']:g} allows, so a single {unit} decides it; validate on at least "
                       f"{coarse['needed']} {unit}s."), ""]
        for name, metrics in self.outputs.items():
            judged = {c.metric: c for c in self.checks if c.output == name}
            kind = metrics["task"] + (f", layout {metrics['layout']}" if "layout" in metrics else "")
            lines += [f"## {name} ({kind})", ""]
            for key, words in (("why", "Task"), ("layout_why", "Layout"), ("roles", "Maps")):
                if key in metrics:
                    lines += [f"{words}: {metrics[key]}.", ""]
            lines += ["| metric | value | minimum | result |", "|---|---|---|---|"]
            for metric, value in metrics.items():
                if metric in DESCRIBED:
                    continue
                check = judged.get(metric)
                shown = f"{value:.6g}" if isinstance(value, float) else str(value)
                lines.append(f"| {metric} | {shown} | {f'{check.minimum:g}' if check else ''} | "
                             f"{('pass' if check.passed else 'FAIL') if check else 'not judged'} |")
            lines.append("")
            if pictures and name in pictures:
                lines += [f"![{name}]({pictures[name]})", ""]
        for name, equal in self.passthrough.items():
            lines.append(f"- {name}: an integer output the spec's [[outputs]] does not list, not judged; equal to the "
                         f"baseline in {equal:.2%} of elements")
        return "\n".join(lines).rstrip() + "\n"


# The keys of a report's outputs that say how the output was read (Task.described), not what it measured.
DESCRIBED = ("task", "why", "layout", "layout_why", "roles")


def _describe(check: Check) -> str:
    return f"{check.output} ({check.task}) {check.metric} {check.value:.6g} against minimum {check.minimum:g}"


def describe_runner(runner: Runner) -> str:
    """Return what ran: 'ONNX Runtime <provider>' or '<backend> <version> engine on sm<NN>'."""
    provider = getattr(runner, "provider", None)
    if provider:
        return f"ONNX Runtime {provider}"
    info = getattr(runner, "info", None)
    if info is not None:
        capability = getattr(getattr(runner, "ctx", None), "capability", None)
        where = f" on a GPU of compute capability {capability}" if capability else ""
        return f"{info.backend} {info.backend_version} engine{where}"
    return type(runner).__name__


def judge(tasks: list[Task], precision: str, thresholds: dict[str, float],
          named: dict[str, str] | None = None) -> tuple[dict[str, dict], list[Check]]:
    """Return each task's summary (raising Degenerate first) and the checks its thresholds make.

    A default minimum the data cannot measure (accuracy without labels) is left out; one the user
    named (`named_thresholds`) raises instead, saying why: nothing the user wrote is skipped."""
    outputs, checks = {}, []
    for task in tasks:
        task.finish()
        summary = task.summary()
        outputs[task.output] = {"task": task.name, **task.described(), **summary}
        for metric in task.decisive(named or {}):
            if metric in thresholds and metric in summary:
                checks.append(Check(metric, task.output, float(summary[metric]), float(thresholds[metric]), task.name))
            elif metric in (named or {}):
                raise TrtpipeError(f"{named[metric]}: output '{task.output}' ({task.name}) has no {metric} on this "
                                   f"data: {task.unmeasured(metric)}")
        checks.append(Check("finite", task.output, float(summary["finite"]), 1.0, task.name))
    return outputs, checks


def compare(candidate: Runner, baseline: Runner, spec: ModelSpec, directory: str | os.PathLike, precision: str,
            labels: dict[str, int] | None = None, thresholds: dict[str, float] | None = None,
            batch_size: int = 16, limit: int | None = None, show_progress: bool = True,
            named: dict[str, str] | None = None) -> Report:
    """Run both on every sample of `directory` and return the judged report; `named` (metric: where the
    user named it) must each be judged (`require_judged`, `judge`)."""
    names = [o.name for o in baseline.outputs]
    missing = [o for o in names if o not in {c.name for c in candidate.outputs}]
    if missing:
        raise TrtpipeError(f"{candidate.name}: has no output '{missing[0]}' that the baseline has; compare builds of one model")
    tasks = make_tasks(spec, baseline.outputs)
    require_judged(tasks, named or {}, baseline.name)
    read = {name for task in tasks for name in task.reads}
    passthrough = {o.name: [0, 0] for o in baseline.outputs if not is_float(o.dtype) and o.name not in read}
    carried = carried_inputs(spec, baseline.outputs)
    run_candidate, run_baseline = Stream(candidate, carried), Stream(baseline, carried)
    samples = 0
    with progress_bar(data.count_samples(directory, limit), f"validating {candidate.name}", "samples", show_progress) as bar:
        for batch in data.iter_batches(spec, directory, batch_size, limit):
            got = run_candidate(batch)
            want = run_baseline(batch)
            batch_labels = np.array([labels.get(i, -1) for i in batch.ids]) if labels is not None else None
            for task in tasks:
                task.update(got, want, batch.ids, batch.arrays, batch_labels)
            for name, counts in passthrough.items():
                counts[0] += int((np.asarray(got[name]) == np.asarray(want[name])).sum())
                counts[1] += np.asarray(want[name]).size
            samples += len(batch)
            bar.update(len(batch))
    thresholds = thresholds if thresholds is not None else thresholds_for(precision)
    outputs, checks = judge(tasks, precision, thresholds, named)
    return Report(candidate.name, baseline.name, precision, candidate.measured, samples,
                  describe_runner(candidate), describe_runner(baseline), outputs,
                  {n: c[0] / max(c[1], 1) for n, c in passthrough.items()}, checks, thresholds,
                  {task.output: task.picture() for task in tasks}, carried)


def open_candidate(path: Path) -> tuple[Runner, str]:
    """Return a runner of the engine (this GPU) or ONNX (ONNX Runtime) at `path`, and the precision it runs in."""
    from trtpipe.runtime.onnxrt import OnnxRunner

    if path.suffix == ".onnx":
        runner = OnnxRunner(path)
        return runner, runner.precision
    from trtpipe.runtime.engine import Engine

    engine = Engine(path)
    return engine, engine.info.precision


def validate(candidate: Path, baseline: Path, spec: ModelSpec | None = None, data_dir: Path | None = None,
             labels: Path | None = None, overrides: dict[str, float] | None = None, batch_size: int = 16,
             limit: int | None = None, report_dir: Path | None = None) -> Report:
    """Return the report of `candidate` (an engine or any ONNX) judged against the FP32 ONNX `baseline`.

    `spec`: a loaded model.toml, checked against the baseline's inputs; None: the baseline's own
    inputs, generic thresholds. `data_dir`, `labels`: default the spec's (labels, else labels.txt in
    the data directory). `overrides`: {metric: minimum} over the precision's thresholds. The report is
    written into `report_dir` when given (`write_report`); every check on the inputs runs before anything does.
    """
    from trtpipe.files import check_output, sidecar_path
    from trtpipe.graph import onnxio
    from trtpipe.runtime.onnxrt import OnnxRunner
    from trtpipe.spec import spec_for

    baseline_model = onnxio.load_float(baseline, "--baseline", built=False)
    spec_path = spec.path if spec is not None else None
    spec = spec_for(spec, baseline_model, baseline)
    data_dir = data.chosen_directory(data_dir, spec.validation, "validation")
    labels = data.labels_path(labels, spec.labels, data_dir)
    if report_dir:
        json_path, *others = report_paths(report_dir, candidate.name)
        # An engine's sidecar is part of it, and named as the report of a candidate of that name is: <name>.json.
        engine_sidecar = sidecar_path(candidate) if candidate.suffix != ".onnx" else None
        check_output(json_path, [candidate, engine_sidecar, baseline, spec_path, data_dir, labels], "--report",
                     siblings=others)
    label_map = data.read_labels(labels) if labels else None
    runner, precision = open_candidate(candidate)
    limits = thresholds_for(precision, spec, overrides)  # unknown metric names fail here, before anything runs
    with runner, OnnxRunner(baseline, model=baseline_model) as base:
        report = compare(runner, base, spec, data_dir, precision, label_map, limits, batch_size, limit,
                         named=named_thresholds(precision, spec, overrides))
    if report_dir:
        write_report(report, report_dir, candidate.name)
    return report


def report_paths(directory: str | os.PathLike, stem: str) -> list[Path]:
    """Return the report files validate writes for `stem`: `<stem>.json` and `<stem>.md` (pictures besides)."""
    return [Path(directory) / f"{stem}.json", Path(directory) / f"{stem}.md"]


def write_report(report: Report, directory: str | os.PathLike, stem: str) -> list[Path]:
    """Write `<stem>.json`, `<stem>.md` and one picture per judged output, all or none; return the paths."""
    directory = ensure_dir(directory, "--report")
    written = report_paths(directory, stem)
    pictures = {}
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        plt = None
    with staged_outputs() as staged:
        staged.write(written[0], json_text(report.to_json()), "--report")
        for name, picture in (report.pictures.items() if plt is not None else ()):
            fig = picture.draw(plt, f"{name}: {report.precision}, {report.mode}")
            if fig is None:
                continue
            path = directory / f"{stem}.{_safe(name)}.png"
            fig.savefig(staged.stage(path, "--report"), format="png", dpi=90)
            plt.close(fig)
            written.append(path)
            pictures[name] = path.name
        staged.write(written[1], report.markdown(pictures), "--report", last=True)
    return written


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def shortfall(metric: str, value: float, minimum: float) -> str:
    """Return 'metric value < minimum' with the fewest digits (at least 4) that keep the two apart.

    At a fixed 4 digits a cosine of 0.999996 against 0.999999 read 'cosine 1 < 1'."""
    least = f"{minimum:.12g}"  # as the user wrote it
    for digits in range(4, 18):
        shown = f"{value:.{digits}g}"
        if math.isnan(value) or float(shown) < minimum:
            break
    return f"{metric} {shown} < {least}"


def headline(report: dict) -> str:
    """Return the summary's words for one report: the metric that decided the verdict, then any failures."""
    checks = [Check(c["metric"], c["output"], c["value"], c["minimum"], c.get("task", "generic")) for c in report["checks"]]
    decided = deciding(checks)
    if decided is None:
        return "nothing judged"
    words = f"{decided.metric} {decided.value:.6g} (min {decided.minimum:g})"
    if len(report["outputs"]) > 1:
        words = f"{decided.output}: {words}"
    metrics = report["outputs"].get(decided.output, {})
    if "accuracy" in metrics and decided.metric != "accuracy":
        words += f"; accuracy {metrics['accuracy']:.2%} (FP32 {metrics['baseline_accuracy']:.2%})"
    failed = [shortfall(c.metric, c.value, c.minimum) for c in checks if not c.passed]
    if failed:
        words += f"; below minimum: {', '.join(failed)}"
    return words


def summary_rows(report_paths: list[Path]) -> list[dict]:
    """Return one row per report: model, precision, engine size, deciding metric, pass, mode."""
    rows = []
    for path in report_paths:
        text = read_text_input(path, str(path), "pass the .json reports 'trtpipe validate --report' writes")
        try:
            report = json.loads(text)
            rows.append(_summary_row(path, report))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, StopIteration, IndexError, RecursionError):
            raise TrtpipeError(f"{path}: not a validation report; rerun 'trtpipe validate --report'") from None
    return rows


def _summary_row(path: Path, report: dict) -> dict:
    """Return the summary row of one parsed report; KeyError or TypeError when it is not a report."""
    if not isinstance(report["passed"], bool):  # the string "false" is truthy: only a JSON bool is a verdict
        raise TrtpipeError(f"{path}: 'passed' is {json.dumps(report['passed'])}, not true or false, so it is not a "
                           "verdict; rerun 'trtpipe validate --report' rather than editing the report")
    stem, precision = Path(report["candidate"]).name, report["precision"]
    # a candidate is MODEL.PRECISION.onnx, and MODEL may hold dots of its own (resnet.v2)
    model = stem.removesuffix(".onnx").removesuffix(f".{precision}")
    engines = sorted(Path(path).parent.parent.glob(f"{model}.{precision}.*.engine"))
    return {"model": model, "precision": precision,
            "engine_mb": engines[0].stat().st_size / 1e6 if engines else None,
            "against_fp32": headline(report), "samples": report["samples"],
            "result": "pass" if report["passed"] else "FAIL", "mode": report["mode"]}


def summary_markdown(rows: list[dict]) -> str:
    lines = ["| model | precision | engine | against FP32 (deciding metric) | samples | result | how |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        size = f"{r['engine_mb']:.1f} MB" if r["engine_mb"] is not None else "-"
        lines.append(f"| {r['model']} | {r['precision']} | {size} | {r['against_fp32']} | {r['samples']} | {r['result']} | {r['mode']} |")
    return "\n".join(lines)
