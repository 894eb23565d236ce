"""What `trtpipe tune` writes: the tuned cache and its exclusions beside it (what `build` reads),
and a report of every configuration tried with a plot of accuracy against estimated latency."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trtpipe.calibrators.cache import render
from trtpipe.files import Outputs, ensure_dir, json_text, staged_outputs
from trtpipe.quality.tune import Trial, TuneResult
from trtpipe.spec import ModelSpec, toml_string
from trtpipe.targets import Precision


def exclusions_path(cache: str | os.PathLike) -> Path:
    """Return the exclusions file beside a tuned cache: `<name>.toml` for `<name>.cache`."""
    cache = Path(cache)
    return cache.with_name((cache.name.removesuffix(".cache")) + ".toml")


def exclusions_toml(result: TuneResult, precision: Precision) -> str:
    """Return the TOML `build --exclude @FILE` reads: [quantize] exclude, then what the search found."""
    chosen = result.chosen
    config, seconds, _ = result.written
    lines = ["# Written by 'trtpipe tune'; build reads [quantize] exclude with --exclude @this-file.",
             "[quantize]", "exclude = [" + ", ".join(toml_string(n) for n in config.exclude) + "]", "",
             "[tune]", f"precision = {toml_string(str(precision))}", f"gpu = {toml_string(result.gpu)}",
             f"estimated_ms = {seconds * 1e3:.6g}  # estimated: trtpipe.quality.cost, not measured",
             f"method = {toml_string(config.method)}", f"passed_on_tuning_split = {str(chosen.passed).lower()}",
             f"tuning_samples = {result.tuning_samples}", f"confidence = {result.confidence:g}",
             f"trials = {len(result.trials)}"]
    if result.confirmed is not None:
        lines += [(f"chosen_by = {toml_string('validation ladder')}  # the search's choice failed on validation; "
                   f"{result.confirmed.kept} more layers kept in FP16 meet the spec there"),
                  f"passed_on_validation = {str(result.confirmed.report.passed).lower()}"]
    elif result.validation is not None:
        lines.append(f"passed_on_validation = {str(result.validation.passed).lower()}")
    lines += ["", "[tune.tuning_metrics]  # the search's choice"] + [f"{k} = {v:.6g}" for k, v in chosen.metrics.items()]
    if config.overrides:
        lines += ["", "[tune.methods]  # tensors calibrated with another method than tune.method"]
        lines += [f"{toml_string(t)} = {toml_string(m)}" for t, m in config.overrides]
    return "\n".join(lines) + "\n"


def write_tuned(result: TuneResult, cache: str | os.PathLike, precision: Precision, outputs: Outputs | None = None) -> list[Path]:
    """Write the tuned cache and its exclusions file (with `outputs`: staged there); return their paths.
    The cache is renamed last: it is what make waits for, so it only appears once both are whole."""
    cache = Path(cache)
    toml = exclusions_path(cache)
    with staged_outputs(outputs) as staged:
        staged.write(toml, exclusions_toml(result, precision))
        staged.write(cache, render(result.table), last=True)
    return [cache, toml]


def plot(trials: Sequence[Trial], chosen: Trial, thresholds: dict[str, float], title: str, path,
         outputs: Outputs | None = None) -> bool:
    """Write each thresholded metric against estimated latency for every trial (one panel per metric),
    the default and the chosen one marked; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    metrics = [m for m in thresholds if m in chosen.metrics] or ["cosine"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.2), squeeze=False)
    default = next((t for t in trials if t.step == "default"), None)
    for ax, metric in zip(axes[0], metrics):
        for passed, color, label in ((False, "#c44e52", "fails a threshold"), (True, "#4c72b0", "passes")):
            points = [t for t in trials if t.passed == passed]
            ax.scatter([t.seconds * 1e3 for t in points], [t.metrics.get(metric, np.nan) for t in points],
                       s=18, color=color, alpha=0.7, label=label)
        if default is not None:
            ax.scatter([default.seconds * 1e3], [default.metrics.get(metric, np.nan)], s=90, facecolors="none",
                       edgecolors="black", label="default")
        ax.scatter([chosen.seconds * 1e3], [chosen.metrics.get(metric, np.nan)], s=160, marker="*",
                   color="#dd8452", edgecolors="black", zorder=5, label="chosen")
        if metric in thresholds:
            ax.axhline(thresholds[metric], color="gray", linestyle="--", linewidth=1, label=f"minimum {thresholds[metric]:g}")
        ax.set_xlabel("estimated latency (ms)")
        ax.set_ylabel(f"{metric.replace('_', ' ')} (tuning split)")
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with staged_outputs(outputs) as staged:
        fig.savefig(staged.stage(path, "--report"), format="png", dpi=90)
    plt.close(fig)
    return True


def _row(trial: Trial, chosen: Trial) -> str:
    mark = " **chosen**" if trial is chosen else ""
    metrics = ", ".join(f"{k} {v:.5g}" for k, v in trial.metrics.items())
    return (f"| {trial.index} | {trial.step}{mark} | {trial.config.method}"
            f"{f' +{len(trial.config.overrides)}' if trial.config.overrides else ''} | {len(trial.config.exclude)} | "
            f"{trial.seconds * 1e3:.4f} | {metrics} | {'pass' if trial.passed else 'fail'} |")


def report_paths(spec: ModelSpec, precision: Precision, directory: str | os.PathLike) -> list[Path]:
    """Return the report files tune writes: `<model>.<precision>.tune.json`, `.md` and `.png`."""
    stem = f"{spec.name}.{precision}.tune"
    return [Path(directory) / f"{stem}.{suffix}" for suffix in ("json", "md", "png")]


def write_report(result: TuneResult, spec: ModelSpec, precision: Precision, directory: str | os.PathLike,
                 outputs: Outputs | None = None) -> list[Path]:
    """Write `<model>.<precision>.tune.json`, `.md` and `.png` (accuracy against estimated latency);
    with `outputs`: staged there, committed with the tuned cache."""
    directory = ensure_dir(directory, "--report")
    chosen = result.chosen
    default = next((t for t in result.trials if t.step == "default"), None)
    body = {"model": spec.name, "precision": str(precision), "gpu": result.gpu, "estimated": True,
            "batch": {k: list(v) for k, v in result.batch.items()}, "thresholds": result.thresholds,
            "tuning_samples": result.tuning_samples, "calibration_samples": result.calibration_samples,
            "search_unquantized": result.search_unquantized, "confidence": result.confidence,
            "chosen": chosen.to_json(), "default": default.to_json() if default else None,
            "validation": result.validation.to_json() if result.validation is not None else None,
            "default_validation": result.default_validation.to_json() if result.default_validation is not None else None,
            "rungs": [r.to_json() for r in result.rungs],
            "confirmed": result.confirmed.to_json() if result.confirmed is not None else None,
            "stopped": result.stopped or None,
            "trials": [t.to_json() for t in result.trials]}
    paths = report_paths(spec, precision, directory)
    with staged_outputs(outputs) as staged:
        _write_report_files(result, spec, precision, body, paths, staged)
    return paths


def _write_report_files(result: TuneResult, spec: ModelSpec, precision: Precision, body: dict, paths: list[Path],
                        staged: Outputs) -> None:
    chosen = result.chosen
    staged.write(paths[0], json_text(body), "--report")
    lines = [f"# tune {spec.name} {precision}", "",
             (f"Estimated latency on the {result.gpu} at batch {_batch_text(result.batch)} (trtpipe.quality.cost: "
              "a roofline per layer, not a measurement). Metrics on the tuning split "
              f"({result.tuning_samples} calibration samples, unquantized layers simulated in "
              f"{result.search_unquantized.upper()}); thresholds {result.thresholds}. The validation rows run the "
              "graph as built (FP16 where not quantized)."), ""]
    if result.validation is not None:
        shown = [m for m in result.thresholds if any(c.metric == m for c in result.validation.checks)]
        lines += ["| on the validation set | " + " | ".join(shown) + " | passed |", "|---|" + "---|" * (len(shown) + 1)]
        for name, report in (("default", result.default_validation), ("tuned", result.validation)):
            if report is not None:
                values = [min((c.value for c in report.checks if c.metric == m), default=math.nan) for m in shown]
                lines.append(f"| {name} | " + " | ".join(f"{v:.5g}" for v in values) + f" | {report.passed} |")
        for rung in result.rungs:
            values = [min((c.value for c in rung.report.checks if c.metric == m), default=math.nan) for m in shown]
            lines.append(f"| tuned + {rung.kept} more kept in FP16 ({rung.seconds * 1e3:.4f} ms estimated) | "
                         + " | ".join(f"{v:.5g}" for v in values) + f" | {rung.report.passed} |")
        if result.rungs:
            lines += ["", "The search's choice failed on the validation set, so the confirmation kept more of "
                      "the most sensitive layers in FP16 (the search's ranking, fixed before validation was read). "
                      + (f"Written: {result.confirmed.kept} more kept, {result.confirmed.seconds * 1e3:.4f} ms "
                         "estimated. The validation set chose among these rungs: its figures for the written "
                         "one are the best of several looks, not an unseen test."
                         if result.confirmed is not None else "No rung met the spec; the search's choice is written.")]
        lines.append("")
    if result.stopped:
        lines += [f"Not finished: {result.stopped}.", ""]
    lines += [f"Chosen by the search: {len(chosen.config.exclude)} layers kept in FP16 ({', '.join(chosen.config.exclude) or 'none'}), "
              f"method {chosen.config.method}"
              + (f" with {len(chosen.config.overrides)} tensors otherwise ({', '.join(f'{t}: {m}' for t, m in chosen.config.overrides)})"
                 if chosen.config.overrides else "") + ".", "",
              "| # | step | method | kept FP16 | estimated ms | metrics (tuning split) | result |",
              "|---|---|---|---|---|---|---|"]
    lines += [_row(t, chosen) for t in result.trials]
    staged.write(paths[1], "\n".join(lines) + "\n", "--report")
    title = f"{spec.name} {precision}: {len(result.trials)} configurations, latency estimated on the {result.gpu}"
    if not plot(result.trials, chosen, result.thresholds, title, paths[2], staged):
        paths.pop()


def _batch_text(batch) -> str:
    return ", ".join(f"{k} {'x'.join(str(d) for d in v)}" for k, v in batch.items())



