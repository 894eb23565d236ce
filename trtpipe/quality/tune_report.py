"""What `trtpipe tune` writes and says: the tuned cache and its exclusions beside it (what `build`
reads), a report of every configuration tried with a plot of accuracy against estimated latency,
and the lines the command prints (`trial_line`, `outcome_lines`). `tune_into` runs the search
(trtpipe.quality.tune) and writes all of it; the command only parses and prints."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trtpipe import data
from trtpipe.calibrators.cache import render
from trtpipe.errors import TrtpipeError
from trtpipe.files import Outputs, check_output, ensure_dir, json_text, sidecar_path, staged_outputs
from trtpipe.quality.tune import Trial, TuneOptions, TuneResult, tune
from trtpipe.spec import ModelSpec, toml_string
from trtpipe.targets import Precision, Target


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


def tuned_sidecar(result: TuneResult, precision: Precision, text: str) -> dict:
    """Return the sidecar of the tuned cache `text`, as calibrate's records what readers of a cache use: the
    grid its amax are for (a tuned INT8 cache given to an FP8 build is refused), its sha256 (inspect refuses
    an edited cache), each tensor's method, and FP8's weight grid positions, which TensorRT's cache has no
    place for: without them `build --cache` would build other weights than the search judged."""
    from trtpipe.calibrate import weight_steps_text

    config = result.written[0]
    return {"options": {"grid": str(precision), "method": "tuned"}, "cache_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "tensors": len(result.table.amax), "methods": {t: config.method_of(t) for t in result.table.amax},
            **({"weight_steps": weight_steps_text(result.table.weight_steps)} if result.table.weight_steps else {})}


def write_tuned(result: TuneResult, cache: str | os.PathLike, precision: Precision, outputs: Outputs | None = None) -> list[Path]:
    """Write the tuned cache, its sidecar and its exclusions file (with `outputs`: staged there); return their
    paths. The cache is renamed last: it is what make waits for, so it only appears once all are whole."""
    cache = Path(cache)
    toml, text = exclusions_path(cache), render(result.table)
    with staged_outputs(outputs) as staged:
        staged.write(toml, exclusions_toml(result, precision))
        staged.write(sidecar_path(cache), json_text(tuned_sidecar(result, precision, text)))
        staged.write(cache, text, last=True)
    return [cache, sidecar_path(cache), toml]


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





def tune_into(output: Path, model: Path, spec: ModelSpec, precision: Precision, target: Target, *,
              data_dir: Path | None = None, validation_dir: Path | None = None, baseline: Path | None = None,
              report_dir: Path | None = None, budget_seconds: float = 600.0, tuning_samples: int | None = None,
              batch_size: int = 16, slack: float = 0.1, search_unquantized: str = "fp32", confidence: float = 0.9,
              ladder: bool = True, on_trial=None, on_phase=None) -> tuple[TuneResult, list[Path]]:
    """Return the search's result and the files written: the tuned cache `output`, its exclusions and the report.

    `data_dir`, `validation_dir`: default the spec's calibration and validation directories;
    `report_dir`: default reports/ beside `output`. Every output is checked against every input
    before the search starts, and the cache, its exclusions and the report are written all or none.
    """
    if output.suffix != ".cache":
        raise TrtpipeError(f"-o {output}: name the tuned cache <name>.cache (its exclusions go to <name>.toml)")
    data_dir = data.chosen_directory(data_dir, spec.calibration, "calibration")
    validation_dir = validation_dir or spec.validation
    report_dir = report_dir or output.parent / "reports"
    inputs = [model, spec.path, data_dir, validation_dir, baseline, spec.labels]
    check_output(output, inputs, siblings=[exclusions_path(output), sidecar_path(output)])
    for path in report_paths(spec, precision, report_dir):
        check_output(path, [*inputs, output, exclusions_path(output), sidecar_path(output)], "--report")
    labels = data.labels_path(None, spec.labels if validation_dir == spec.validation else None, validation_dir)
    labels = data.read_labels(labels) if labels else None
    with data.model_runs_on(data_dir):
        options = TuneOptions(validation_dir=validation_dir, baseline_path=baseline, labels=labels,
                              budget_seconds=budget_seconds, tuning_samples=tuning_samples, batch_size=batch_size,
                              slack=slack, search_unquantized=search_unquantized, confidence=confidence, ladder=ladder)
        result = tune(model, spec, precision, target, data_dir, options, on_trial=on_trial, on_phase=on_phase)
    with staged_outputs() as outputs:  # the cache, its exclusions and the report, all or none
        written = write_tuned(result, output, precision, outputs)
        written += write_report(result, spec, precision, report_dir, outputs)
    return result, written


def meets_spec(result: TuneResult) -> bool:
    """Return whether what tune wrote meets the thresholds where it was last judged: validation, when there is a set."""
    confirmed = result.validation is None or result.validation.passed or result.confirmed is not None
    return result.chosen.passed and confirmed


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4f} ms"


def _metrics(trial: Trial) -> str:
    return ", ".join(f"{k} {v:.5f}" for k, v in trial.metrics.items())


def trial_line(trial: Trial, best: Trial) -> str:
    """Return the progress line of one configuration tried, with the best so far."""
    verdict = "pass" if trial.passed else "fail"
    return (f"[{trial.index:3}] {trial.step[:60]:60} {_ms(trial.seconds)}  {_metrics(trial)}  {verdict}"
            f"  | best: #{best.index} {_ms(best.seconds)}{'' if best.passed else ' (none passes yet)'}")


def outcome_lines(result: TuneResult, written: Sequence[Path], ladder: bool = True) -> list[tuple[str, bool]]:
    """Return what tune says of its result, in order, as (line, whether it is a warning for stderr)."""
    lines: list[tuple[str, bool]] = []

    def say(text: str, warning: bool = False) -> None:
        lines.append((text, warning))

    chosen = result.chosen
    say(f"chosen: #{chosen.index} {chosen.step}: {len(chosen.config.exclude)} of "
        f"{chosen.quantized + len(chosen.config.exclude)} layers kept in FP16, method {chosen.config.method}"
        f"{f' (+{len(chosen.config.overrides)} tensors otherwise)' if chosen.config.overrides else ''}, "
        f"{_ms(chosen.seconds)} estimated on the {result.gpu}")
    fastest = min((t for t in result.trials if t.passed), key=lambda t: t.seconds, default=None)
    if chosen.passed and fastest is not None and fastest.seconds < chosen.seconds:
        say(f"  more accurate than the fastest that passes (#{fastest.index}, {_ms(fastest.seconds)}), and "
            f"within --slack of quantization's estimated saving or one kernel launch of it")
    judged = {k: v for k, v in result.thresholds.items() if k in chosen.metrics}  # the judged metrics' minimums
    say(f"  tuning split ({result.tuning_samples} samples): {_metrics(chosen)}"
        f" -> {'meets' if chosen.passed else 'does NOT meet'} {judged}")
    if result.validation is not None:
        report = result.validation
        say(f"  validation ({report.samples} samples, simulated): {report.deciding_checks()} -> "
            f"{'PASS' if report.passed else 'FAIL'}")
    if result.confirmed is not None:
        rung = result.confirmed
        say(f"written instead: {rung.kept} more of the most sensitive layers kept in FP16 ({rung.quantized} "
            f"quantized), {_ms(rung.seconds)} estimated; validation {rung.report.deciding_checks()} -> PASS "
            f"(validation chose this among {len(result.rungs)} rungs: not an unseen test)")
    elif result.rungs:
        say(f"no rung of {len(result.rungs)} met the spec on validation; the search's choice is written", warning=True)
    elif chosen.passed and result.validation is not None and not result.validation.passed:
        why = "--no-ladder" if not ladder else "keeping more in FP16 would leave nothing quantized"
        say(f"the search's choice fails on validation and no rung was tried ({why}): it is written, "
            f"and does not meet the spec", warning=True)
    for path in written:
        say(f"wrote {path}")
    if not chosen.passed:
        say("no configuration tried meets the thresholds; the one closest is written", warning=True)
    return lines
