"""Quality commands: validate, summary, sensitivity.

Where their logic lives: validate and summary trtpipe.quality.validate; sensitivity trtpipe.quality.sensitivity.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import click

from trtpipe.cli.common import model_spec
from trtpipe.cli.options import (
    AT_LEAST_ONE,
    UNQUANTIZED_OPTION,
    batch_size_option,
    data_option,
    json_option,
    limit_option,
    spec_option,
)
from trtpipe.errors import TrtpipeError


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--precision", type=click.Choice(["int8", "fp8"]), default="int8", show_default=True,
              help="the precision each layer is quantized to in turn")
@click.option("--cache", type=click.Path(path_type=Path), required=True, help="the calibration cache for --precision")
@data_option()
@spec_option("needed for images; its task and [[outputs]] choose the metric")
@limit_option(64, help="samples; every layer runs on all of them")
@batch_size_option()
@UNQUANTIZED_OPTION
@click.option("--top", type=AT_LEAST_ONE, default=10, show_default=True, help="rows to print")
@json_option("print every layer as JSON (node, op, score, metric, cosine)")
def sensitivity(model, precision, cache, data_dir, spec_path, limit, batch_size, unquantized, top, as_json):
    """Quantize one layer at a time and rank the layers by the spec's task metric (--exclude candidates).

    \b
    Examples:
      trtpipe calibrate model.onnx --spec model.toml -o model.int8.cache
      trtpipe sensitivity model.onnx --cache model.int8.cache --spec model.toml --limit 32 --top 5
    """
    from trtpipe import data
    from trtpipe.calibrate import calibrated_graph, load_table, refuse_no_layer
    from trtpipe.graph import onnxio
    from trtpipe.progress import progress_bar
    from trtpipe.quality.sensitivity import layer_sensitivity, quantizable_layers
    from trtpipe.targets import Precision

    original = onnxio.load_float(model)
    spec = model_spec(spec_path, original, model)
    graph = calibrated_graph(original, spec)  # the graph the cache's names and the typed passes refer to
    data_dir = data.chosen_directory(data_dir, spec.calibration, "calibration")
    table = load_table(cache, [precision])
    refuse_no_layer(graph, model, Precision.parse(precision), spec)
    layers = len(quantizable_layers(graph, table, spec.min_weights, Precision.parse(precision)))
    if not layers:
        raise TrtpipeError(f"--cache {cache}: no Conv, MatMul or Gemm of {model} has scales in it; "
                           f"calibrate this model with 'trtpipe calibrate {model}'")
    batches = data.iter_batches(spec, data_dir, batch_size, limit)
    with progress_bar(layers, f"quantizing {Path(model).name} one layer at a time", "layers") as bar, \
            data.model_runs_on(data_dir):
        rows = layer_sensitivity(graph, table, Precision.parse(precision), batches, unquantized=unquantized,
                                 on_layer=bar.update, spec=spec)
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(row) for row in rows], indent=2))
        return
    metrics = sorted({row.metric for row in rows})
    distance = any(row.distance_max is not None for row in rows)
    ties = "the farthest answer from FP32's, then " if distance else ""
    click.echo(f"{precision} one layer at a time, against FP32, most sensitive first; score: the lowest of "
               f"{', '.join(metrics)} (ties by {ties}the lowest raw cosine of the judged outputs):")
    click.echo(f"{'score':>9} {'cosine':>9}" + (f" {'farthest':>9}" if distance else "") + "  node")
    for row in rows[:top]:
        farthest = f" {row.distance_max:9.4g}" if distance else ""
        click.echo(f"{row.score:9.5f} {row.cosine:9.5f}{farthest}  {row.node} ({row.op})")


def _thresholds(_ctx, _param, items) -> dict[str, float]:
    """Return --threshold METRIC=MIN items as {metric: minimum}; a minimum that is no finite number is refused."""
    parsed = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            parsed[key] = float(value)
            if not math.isfinite(parsed[key]):
                raise ValueError(value)
        except ValueError:
            raise TrtpipeError(f"--threshold {item}: write METRIC=NUMBER with a finite number, e.g. cosine=0.995") from None
    return parsed


@click.command()
@click.argument("candidate", type=click.Path(path_type=Path))
@click.option("--baseline", type=click.Path(path_type=Path), required=True, help="the FP32 ONNX")
@data_option("validation")
@click.option("--labels", type=click.Path(path_type=Path),
              help="'<sample id> <class>' lines; default: the spec's, else labels.txt in the data directory")
@spec_option("inputs, preprocessing, data, thresholds, task and [[outputs]] to judge")
@click.option("--report", "report_dir", type=click.Path(path_type=Path),
              help="write JSON, Markdown and one picture per judged output here")
@click.option("--threshold", "overrides", multiple=True, callback=_thresholds,
              help="METRIC=MIN, e.g. cosine=0.995 (repeatable)")
@batch_size_option()
@limit_option(help="judge only the first N samples (default: all)")
@json_option("print the report as JSON instead of Markdown")
def validate(candidate, baseline, data_dir, labels, spec_path, report_dir, overrides, batch_size, limit, as_json):
    """Judge an engine or any ONNX against the FP32 baseline, every output by its task.

    Exit 0 on pass, 1 on fail, 2 on bad input or data that cannot judge (a constant or non-finite
    baseline).

    \b
    Examples:
      trtpipe quantize model.onnx --precision fp16 -o model.fp16.onnx
      trtpipe validate model.fp16.onnx --baseline model.onnx --spec model.toml --report reports/
      trtpipe validate model.fp16.onnx --baseline model.onnx --spec model.toml --threshold cosine=0.999 --json
    """
    from trtpipe.quality.validate import validate as run
    from trtpipe.spec import load_spec

    report = run(candidate, baseline, load_spec(spec_path) if spec_path else None, data_dir, labels, overrides,
                 batch_size, limit, report_dir)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(report.markdown())
    sys.exit(0 if report.passed else 1)


@click.command()
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--fail/--no-fail", default=True, help="exit 1 when a report failed (default)")
def summary(reports, fail):
    """Print one table of validation reports: model, precision, engine size, the deciding metric, pass/fail.

    \b
    Examples:
      trtpipe quantize model.onnx --precision fp16 -o model.fp16.onnx
      trtpipe validate model.fp16.onnx --baseline model.onnx --spec model.toml --report reports/
      trtpipe summary reports/model.fp16.onnx.json
    """
    from trtpipe.quality.validate import summary_markdown, summary_rows

    rows = summary_rows(list(reports))
    click.echo(summary_markdown(rows))
    if fail and any(r["result"] != "pass" for r in rows):
        sys.exit(1)
