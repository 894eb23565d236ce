"""Tuning commands: tune (the fastest INT8/FP8 configuration that meets the spec).

Its logic: trtpipe.quality.tune_report.tune_into, over the search in trtpipe.quality.tune; the lines
it prints come from tune_report too (trial_line, outcome_lines).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from trtpipe.cli.options import (
    AT_LEAST_ONE,
    POSITIVE,
    SHARE,
    FiniteFloatRange,
    batch_size_option,
    data_option,
    output_option,
    spec_option,
    target_option,
)


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@spec_option("data directories, thresholds, shapes, task", required=True)
@click.option("--precision", type=click.Choice(["int8", "fp8"]), required=True, help="what the configuration quantizes to")
@target_option("the GPU whose estimated latency is minimized: a name (L4, L40S, A100, H100, H200, RTX4090, RTX5090) or sm_XY (its representative GPU)", default="sm_89")
@click.option("--budget-min", type=POSITIVE, default=10.0, show_default=True,
              help="minutes of search; the fastest passing configuration so far is kept when it runs out")
@data_option()
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
@batch_size_option("samples per run; also the batch of the cost model when the spec has no [shapes]")
@click.option("--report", "report_dir", type=click.Path(path_type=Path),
              help="write <model>.<precision>.tune.json/.md/.png here; default: reports/ beside -o")
@output_option("the tuned cache, e.g. build/m/m.int8.tuned.cache; its exclusions go to the .toml beside it")
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
    from trtpipe.quality.tune_report import meets_spec, outcome_lines, trial_line, tune_into
    from trtpipe.spec import load_spec
    from trtpipe.targets import Precision, Target

    result, written = tune_into(
        output, model, load_spec(spec_path), Precision.parse(precision), Target.parse(target_text), data_dir=data_dir,
        validation_dir=validation_dir, baseline=baseline, report_dir=report_dir, budget_seconds=budget_min * 60,
        tuning_samples=tuning_samples, batch_size=batch_size, slack=slack, search_unquantized=search_unquantized,
        confidence=confidence, ladder=ladder,
        on_trial=lambda trial, best: click.echo(trial_line(trial, best), err=True),
        on_phase=lambda text: click.echo(f"-- {text}", err=True))
    for line, warning in outcome_lines(result, written, ladder):
        click.echo(line, err=warning)
    sys.exit(0 if meets_spec(result) else 1)
