"""Validation: a candidate (engine, or typed ONNX simulated on the CPU) against the FP32 ONNX
Runtime baseline on the same samples, judged by per-precision thresholds, written as a report."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trtpipe import data
from trtpipe.config import ModelSpec
from trtpipe.errors import TrtpipeError
from trtpipe.files import ensure_dir, write_json, write_text
from trtpipe.progress import progress_bar
from trtpipe.quality.metrics import OutputMetrics
from trtpipe.runtime.runner import Runner

# Minimums per precision; chosen from measurements on the shipped models (README) with margin.
# A metric the model does not have (top-1 agreement for an embedding model) is not checked.
DEFAULT_THRESHOLDS: dict[str, dict[str, float]] = {
    "fp32": {"cosine": 0.99999},
    "tf32": {"cosine": 0.9999},
    "fp16": {"cosine": 0.9999},
    "bf16": {"cosine": 0.999},
    "int8": {"cosine": 0.99, "top1_agreement": 0.98},
    "fp8": {"cosine": 0.99, "top1_agreement": 0.98},
    # The low-bit issue's bar; MiniLM does not clear it yet (docs/lowbit.md has the figures).
    "int4": {"cosine": 0.99, "top1_agreement": 0.98},
    "fp4": {"cosine": 0.99, "top1_agreement": 0.98},
}
CHECKED_METRICS = ("cosine", "cosine_min", "snr_db", "top1_agreement", "top5_agreement", "accuracy")


def thresholds_for(precision: str, spec: ModelSpec | None = None, overrides: dict[str, float] | None = None) -> dict[str, float]:
    """Return the thresholds for `precision`: defaults, then the spec's, then the command line's."""
    result = dict(DEFAULT_THRESHOLDS.get(precision, DEFAULT_THRESHOLDS["fp16"]))
    if spec is not None:
        result.update(spec.thresholds.get(precision, {}))
    result.update(overrides or {})
    unknown = set(result) - set(CHECKED_METRICS)
    if unknown:
        raise TrtpipeError(f"--threshold {min(unknown)}: unknown metric; use one of {', '.join(CHECKED_METRICS)}")
    return result


@dataclass
class Check:
    metric: str
    output: str
    value: float
    minimum: float

    @property
    def passed(self) -> bool:
        return not math.isnan(self.value) and self.value >= self.minimum


@dataclass
class Report:
    """What was compared, how, and whether it passed."""

    candidate: str
    baseline: str
    precision: str
    measured: bool  # True: a real engine ran; False: the typed ONNX was simulated on the CPU
    samples: int
    outputs: dict[str, dict] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)
    error_samples: dict[str, list] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def mode(self) -> str:
        return "measured" if self.measured else "simulated"

    def to_json(self) -> dict:
        return {
            "candidate": self.candidate, "baseline": self.baseline, "precision": self.precision,
            "mode": self.mode, "measured": self.measured, "samples": self.samples, "passed": self.passed,
            "thresholds": self.thresholds, "outputs": self.outputs,
            "checks": [{"metric": c.metric, "output": c.output, "value": c.value, "minimum": c.minimum,
                        "passed": c.passed} for c in self.checks],
        }

    def markdown(self) -> str:
        how = ("a real engine on its GPU" if self.measured else
               "the typed ONNX in ONNX Runtime on the CPU (simulated: the engine itself did not run)")
        lines = [f"# {Path(self.candidate).name} vs {Path(self.baseline).name}", "",
                 f"{self.precision}, {self.samples} samples, measured {how}.", "",
                 f"**{'PASS' if self.passed else 'FAIL'}**", "",
                 "| output | metric | value | minimum | result |", "|---|---|---|---|---|"]
        lines += [f"| {c.output} | {c.metric} | {c.value:.6g} | {c.minimum:g} | {'pass' if c.passed else 'FAIL'} |"
                  for c in self.checks]
        lines += ["", "| output | " + " | ".join(next(iter(self.outputs.values()), {}).keys()) + " |"]
        lines += ["|---|" + "---|" * len(next(iter(self.outputs.values()), {}))]
        for name, metrics in self.outputs.items():
            lines.append(f"| {name} | " + " | ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in metrics.values()) + " |")
        return "\n".join(lines) + "\n"


def compare(candidate: Runner, baseline: Runner, spec: ModelSpec, directory: str | os.PathLike, precision: str,
            labels: dict[str, int] | None = None, thresholds: dict[str, float] | None = None,
            batch_size: int = 16, limit: int | None = None, show_progress: bool = True) -> Report:
    """Run both on every sample of `directory` and return the judged report."""
    outputs = [o.name for o in baseline.outputs]
    missing = [o for o in outputs if o not in {c.name for c in candidate.outputs}]
    if missing:
        raise TrtpipeError(f"{candidate.name}: has no output '{missing[0]}' that the baseline has; compare builds of one model")
    classifier = spec.task == "classification"
    metrics = {name: OutputMetrics(classifier=classifier and i == 0) for i, name in enumerate(outputs)}
    samples = 0
    with progress_bar(data.count_samples(directory, limit), f"validating {candidate.name}", "samples", show_progress) as bar:
        for batch in data.iter_batches(spec, directory, batch_size, limit):
            got = candidate(batch.arrays)
            want = baseline(batch.arrays)
            batch_labels = None
            if labels is not None:
                batch_labels = np.array([labels.get(i, -1) for i in batch.ids])
            for name in outputs:
                metrics[name].update(got[name], want[name], batch_labels)
            samples += len(batch)
            bar.update(len(batch))
    thresholds = thresholds if thresholds is not None else thresholds_for(precision)
    report = Report(candidate.name, baseline.name, precision, candidate.measured, samples, thresholds=thresholds)
    for name, m in metrics.items():
        report.outputs[name] = m.summary()
        report.error_samples[name] = m.error_sample
        for metric, minimum in thresholds.items():
            if metric in report.outputs[name]:
                report.checks.append(Check(metric, name, float(report.outputs[name][metric]), float(minimum)))
    return report


def write_report(report: Report, directory: str | os.PathLike, stem: str) -> list[Path]:
    """Write `<stem>.json`, `<stem>.md` and one error-distribution PNG per output; return the paths."""
    directory = ensure_dir(directory, "--report")
    written = [directory / f"{stem}.json", directory / f"{stem}.md"]
    write_json(written[0], report.to_json(), "--report")
    write_text(written[1], report.markdown(), "--report")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    from trtpipe.files import atomic_path

    for name, errors in report.error_samples.items():
        path = directory / f"{stem}.{_safe(name)}.png"
        fig, ax = plt.subplots(figsize=(6, 3.5))
        values = np.asarray(errors, np.float64)
        positive = values[values > 0]
        if positive.size:
            ax.hist(np.log10(positive), bins=60, color="#4c72b0")
        ax.set_xlabel("log10 |candidate − baseline|")
        ax.set_ylabel("elements (sampled)")
        ax.set_title(f"{name}: {report.precision}, {report.mode}")
        fig.tight_layout()
        with atomic_path(path, "--report") as tmp:
            fig.savefig(tmp, format="png", dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def summary_rows(report_paths: list[Path]) -> list[dict]:
    """Return one row per report: model, precision, engine size, headline metric, pass, mode."""
    import json

    rows = []
    for path in report_paths:
        try:
            report = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            raise TrtpipeError(f"{path}: not a validation report; rerun 'trtpipe validate --report'") from None
        stem = Path(report["candidate"]).name
        model, precision = stem.split(".")[0], report["precision"]
        engines = sorted(Path(path).parent.parent.glob(f"{model}.{precision}.*.engine"))
        first = next(iter(report["outputs"].values()))
        if "accuracy" in first:
            headline = f"accuracy {first['accuracy']:.2%} (FP32 {first['baseline_accuracy']:.2%}), top-1 agreement {first['top1_agreement']:.2%}"
        elif "top1_agreement" in first:
            headline = (f"top-1 agreement {first['top1_agreement']:.2%}, top-5 {first['top5_agreement']:.2%}, "
                        f"cosine {first['cosine']:.4f}")
        else:
            headline = f"cosine {first['cosine']:.5f} (min {first['cosine_min']:.5f})"
        failed = [f"{c['metric']} {c['value']:.4g} < {c['minimum']:g}" for c in report["checks"] if not c["passed"]]
        if failed:
            headline += f"; below minimum: {', '.join(failed)}"
        rows.append({"model": model, "precision": precision,
                     "engine_mb": engines[0].stat().st_size / 1e6 if engines else None,
                     "against_fp32": headline, "samples": report["samples"],
                     "result": "pass" if report["passed"] else "FAIL", "mode": report["mode"]})
    return rows


def summary_markdown(rows: list[dict]) -> str:
    lines = ["| model | precision | engine | against FP32 | samples | result | how |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        size = f"{r['engine_mb']:.1f} MB" if r["engine_mb"] is not None else "-"
        lines.append(f"| {r['model']} | {r['precision']} | {size} | {r['against_fp32']} | {r['samples']} | {r['result']} | {r['mode']} |")
    return "\n".join(lines)
