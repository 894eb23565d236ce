"""Tuning commands: tune (the fastest INT8/FP8 configuration that meets the spec) and cost."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from trtpipe.cli import AT_LEAST_ONE, POSITIVE, SHARE, FiniteFloatRange, _data_dir, main
from trtpipe.errors import TrtpipeError


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4f} ms"


def _metrics(trial) -> str:
    return ", ".join(f"{k} {v:.5f}" for k, v in trial.metrics.items())


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), required=True,
              help="model.toml: data directories, thresholds, shapes, task")
@click.option("--precision", type=click.Choice(["int8", "fp8"]), required=True, help="what the configuration quantizes to")
@click.option("--target", "target_text", default="sm_89", show_default=True,
              help="the GPU whose estimated latency is minimized: a name (L4, L40S, A100, H100, H200, RTX4090, "
                   "RTX5090) or sm_XY (its representative GPU)")
@click.option("--budget-min", type=POSITIVE, default=10.0, show_default=True,
              help="minutes of search; the fastest passing configuration so far is kept when it runs out")
@click.option("--data", "data_dir", type=click.Path(path_type=Path), help="calibration data; default: the spec's")
@click.option("--validation", "validation_dir", type=click.Path(path_type=Path),
              help="confirmation data, never searched on; default: the spec's validation directory")
@click.option("--baseline", type=click.Path(path_type=Path),
              help="the FP32 ONNX to compare with; default: MODEL (pass the original for a smoothed MODEL)")
@click.option("--tuning-samples", type=AT_LEAST_ONE,
              help="calibration samples that judge each configuration; default: all of them")
@click.option("--confidence", type=FiniteFloatRange(0, 1, max_open=True), default=0.9, show_default=True,
              help="share metrics (top-1 agreement...) pass on the tuning split only when their lower bound at this "
                   "confidence does (Wilson score), so luck on a small split does not choose; 0: the share itself")
@click.option("--ladder/--no-ladder", default=True, show_default=True,
              help="when the search's choice fails on validation, keep more of the most sensitive layers in FP16 "
                   "until it passes there, and write that (the report says validation chose it)")
@click.option("--slack", type=SHARE, default=0.1, show_default=True,
              help="share of quantization's estimated saving the search may give back for accuracy, and at least "
                   "one kernel launch (2 us: estimates closer than that are ties); 0: the fastest estimate only")
@click.option("--search-unquantized", type=click.Choice(["fp32", "fp16"]), default="fp32", show_default=True,
              help="what the search simulates unquantized layers in (fp32 runs twice as fast on a CPU); "
                   "the validation confirmation always runs the graph as built, in FP16")
@click.option("--batch-size", type=AT_LEAST_ONE, default=16, show_default=True,
              help="samples per run; also the batch of the cost model when the spec has no [shapes]")
@click.option("--report", "report_dir", type=click.Path(path_type=Path),
              help="write <model>.<precision>.tune.json/.md/.png here; default: reports/ beside -o")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="the tuned cache, e.g. build/m/m.int8.tuned.cache; its exclusions go to the .toml beside it")
def tune(model, spec_path, precision, target_text, budget_min, data_dir, validation_dir, baseline, tuning_samples,
         confidence, ladder, slack, search_unquantized, batch_size, report_dir, output):
    """Find the fastest INT8/FP8 configuration whose accuracy meets the spec, and confirm it.

    Searches per-tensor calibration methods and the layers kept in FP16 for the lowest estimated
    latency on --target, judged on calibration data; then confirms the choice on the validation set.
    Build with it: trtpipe build MODEL --cache OUT.cache --exclude @OUT.toml ...

    Exit 0 when what is written meets the thresholds (on the validation set, when there is one), 1
    when nothing tried does: the closest is written all the same, and stderr says so.

    \b
    Examples:
      trtpipe tune model.onnx --spec model.toml --precision int8 --target L4 --budget-min 0.5 -o model.int8.tuned.cache
      trtpipe build model.onnx --precision int8 --target sm_89 --cache model.int8.tuned.cache --exclude @model.int8.tuned.toml --spec model.toml -o engines/
    """
    from trtpipe import data
    from trtpipe.files import check_output, staged_outputs
    from trtpipe.quality.tune import TuneOptions
    from trtpipe.quality.tune import tune as run
    from trtpipe.quality.tune_report import exclusions_path, report_paths, write_report, write_tuned
    from trtpipe.spec import load_spec
    from trtpipe.targets import Precision, Target

    if output.suffix != ".cache":
        raise TrtpipeError(f"-o {output}: name the tuned cache <name>.cache (its exclusions go to <name>.toml)")
    precision = Precision.parse(precision)  # the enum from here on; its text only in files and messages
    spec = load_spec(spec_path)
    target = Target.parse(target_text)
    data_dir = _data_dir(data_dir, spec.calibration, "calibration")
    validation_dir = validation_dir or spec.validation
    report_dir = report_dir or output.parent / "reports"
    inputs = [model, spec_path, data_dir, validation_dir, baseline, spec.labels]
    check_output(output, inputs, siblings=[exclusions_path(output)])
    for path in report_paths(spec, precision, report_dir):
        check_output(path, [*inputs, output, exclusions_path(output)], "--report")
    labels = data.labels_path(None, spec.labels if validation_dir == spec.validation else None, validation_dir)
    labels = data.read_labels(labels) if labels else None

    def on_phase(text):
        click.echo(f"-- {text}", err=True)

    def on_trial(trial, best):
        verdict = "pass" if trial.passed else "fail"
        click.echo(f"[{trial.index:3}] {trial.step[:60]:60} {_ms(trial.seconds)}  {_metrics(trial)}  {verdict}"
                   f"  | best: #{best.index} {_ms(best.seconds)}{'' if best.passed else ' (none passes yet)'}", err=True)

    with data.model_runs_on(data_dir):
        options = TuneOptions(validation_dir=validation_dir, baseline_path=baseline, labels=labels,
                              budget_seconds=budget_min * 60, tuning_samples=tuning_samples, batch_size=batch_size,
                              slack=slack, search_unquantized=search_unquantized, confidence=confidence, ladder=ladder)
        result = run(model, spec, precision, target, data_dir, options, on_trial=on_trial,
                     on_phase=on_phase)
    with staged_outputs() as outputs:  # the cache, its exclusions and the report, all or none
        written = write_tuned(result, output, precision, outputs)
        written += write_report(result, spec, precision, report_dir, outputs)
    chosen = result.chosen
    click.echo(f"chosen: #{chosen.index} {chosen.step}: {len(chosen.config.exclude)} of "
               f"{chosen.quantized + len(chosen.config.exclude)} layers kept in FP16, method {chosen.config.method}"
               f"{f' (+{len(chosen.config.overrides)} tensors otherwise)' if chosen.config.overrides else ''}, "
               f"{_ms(chosen.seconds)} estimated on the {result.gpu}")
    fastest = min((t for t in result.trials if t.passed), key=lambda t: t.seconds, default=None)
    if chosen.passed and fastest is not None and fastest.seconds < chosen.seconds:
        click.echo(f"  more accurate than the fastest that passes (#{fastest.index}, {_ms(fastest.seconds)}), and within "
                   f"--slack of quantization's estimated saving or one kernel launch of it")
    click.echo(f"  tuning split ({result.tuning_samples} samples): {_metrics(chosen)}"
               f" -> {'meets' if chosen.passed else 'does NOT meet'} "
               f"{ {k: v for k, v in result.thresholds.items() if k in chosen.metrics} }")  # the judged metrics' minimums
    if result.validation is not None:
        report = result.validation
        click.echo(f"  validation ({report.samples} samples, simulated): {report.deciding_checks()} -> "
                   f"{'PASS' if report.passed else 'FAIL'}")
    if result.confirmed is not None:
        rung = result.confirmed
        click.echo(f"written instead: {rung.kept} more of the most sensitive layers kept in FP16 ({rung.quantized} quantized), "
                   f"{_ms(rung.seconds)} estimated; validation {rung.report.deciding_checks()} -> PASS (validation chose this among "
                   f"{len(result.rungs)} rungs: not an unseen test)")
    elif result.rungs:
        click.echo(f"no rung of {len(result.rungs)} met the spec on validation; the search's choice is written", err=True)
    elif chosen.passed and result.validation is not None and not result.validation.passed:
        why = "--no-ladder" if not ladder else "keeping more in FP16 would leave nothing quantized"
        click.echo(f"the search's choice fails on validation and no rung was tried ({why}): it is written, "
                   f"and does not meet the spec", err=True)
    for path in written:
        click.echo(f"wrote {path}")
    if not chosen.passed:
        click.echo("no configuration tried meets the thresholds; the one closest is written", err=True)
    # What is written must meet the spec where it was last judged: validation when there is a validation set.
    confirmed = result.validation is None or result.validation.passed or result.confirmed is not None
    sys.exit(0 if chosen.passed and confirmed else 1)
