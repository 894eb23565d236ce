"""The `trtpipe` command: parse, call the library, print. Errors are one line and exit code 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from trtpipe.errors import TrtpipeError

PRECISION_CHOICES = ["fp32", "tf32", "fp16", "bf16", "int8", "fp8", "fp4"]
UNQUANTIZED_OPTION = click.option(
    "--unquantized", type=click.Choice(["fp16", "fp32"]), default="fp16", show_default=True,
    help="what INT8/FP8 engines compute their unquantized layers in")


class Group(click.Group):
    """Turns TrtpipeError into one line on stderr and exit code 2, never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TrtpipeError as exc:
            click.echo(f"trtpipe: error: {exc}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("trtpipe: interrupted; no partial files were left", err=True)
            sys.exit(130)


def _exclude(given, spec) -> list[str]:
    """--exclude as given, else the spec's [quantize] exclude."""
    return list(given) or (spec.exclude if spec else [])


def _data_dir(given, from_spec, kind: str):
    if given is None and from_spec is None:
        raise TrtpipeError(f"--data DIR is needed (or a --spec with data.{kind})")
    return given or from_spec


def _spec(spec_path, model=None, model_path=None):
    """Return the spec at `spec_path`; without one, the inputs of `model` (loaded from `model_path`), else None."""
    from trtpipe.config import load_spec, spec_from_onnx

    if spec_path:
        return load_spec(spec_path)
    return spec_from_onnx(model, model_path) if model is not None else None


@click.group(cls=Group)
@click.version_option(package_name="trtpipe")
def main():
    """TensorRT deployment pipeline: calibrate, quantize, build, validate and run engines."""


@main.command()
@click.option("--target", "target_text", default="auto", show_default=True, help="sm_89, 8.9, a GPU name (L4), or auto")
@click.option("--backend", "backend_name", type=click.Choice(["auto", "tensorrt", "tensorrt-rtx"]), default="auto", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def plan(target_text, backend_name, as_json):
    """Print which precisions the target runs with the backend, and why not."""
    from trtpipe.backend import choose_spec
    from trtpipe.build import plan_precisions, precision_support
    from trtpipe.targets import Precision, Target

    target = Target.parse(target_text)
    spec = choose_spec(backend_name, target)
    rows = []
    for precision in Precision:
        ok, why = precision_support(spec, target, precision)
        rows.append({"precision": str(precision), "supported": ok, "reason": why})
    result = {"target": target.sm, "compute_capability": f"{target.major}.{target.minor}", "name": target.name,
              "backend": spec.name, "backend_installed": spec.installed(), "builds_without_gpu": spec.builds_without_gpu,
              "precisions": rows, "auto": [str(p) for p in plan_precisions(["auto"], target, spec)]}
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    installed = "installed" if result["backend_installed"] else f"not installed: pip install 'trtpipe[{spec.extra}]'"
    click.echo(f"target  {target}\nbackend {spec.name} ({installed})")
    for row in rows:
        click.echo(f"  {row['precision']:5} {'yes' if row['supported'] else 'no ':3}  {row['reason']}")
    click.echo(f"--precision auto builds: {' '.join(result['auto']) or 'nothing'}")


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--precision", type=click.Choice(["fp16", "bf16", "int8", "fp8"]), required=True)
@click.option("--cache", type=click.Path(path_type=Path), help="calibration cache (int8, fp8)")
@click.option("--exclude", multiple=True, help="node name, regex or op type to keep unquantized (repeatable); default: the spec's")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="model.toml: [quantize] exclude comes from it")
@UNQUANTIZED_OPTION
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def quantize(model, precision, cache, exclude, spec_path, unquantized, output):
    """Write the typed ONNX for a precision (FP16/BF16 casts or INT8/FP8 Q/DQ)."""
    from trtpipe import onnxio
    from trtpipe.build import load_table, write_typed_onnx
    from trtpipe.targets import Precision

    table = load_table(cache) if cache is not None else None
    exclude = _exclude(exclude, _spec(spec_path))
    path = write_typed_onnx(onnxio.load(model), Precision.parse(precision), output, table, exclude,
                            unquantized=unquantized)
    click.echo(f"wrote {path}")


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--data", "data_dir", type=click.Path(path_type=Path), help="samples; default: the spec's calibration directory")
@click.option("--alpha", type=float, help="how much of the outliers moves into the weights, 0..1; default: the spec's [quantize] smooth, else 0.5")
@click.option("--batch-size", type=int, default=16, show_default=True)
@click.option("--limit", type=int, help="use at most N samples")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="model.toml (needed for images)")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def smooth(model, data_dir, alpha, batch_size, limit, spec_path, output):
    """Write an FP32 ONNX with SmoothQuant scales folded in; calibrate and build from it for INT8."""
    from trtpipe import data, onnxio
    from trtpipe.progress import progress_bar
    from trtpipe.smooth import DEFAULT_ALPHA
    from trtpipe.smooth import smooth as run

    graph = onnxio.load(model)
    spec = _spec(spec_path, graph, model)
    data_dir = _data_dir(data_dir, spec.calibration, "calibration")
    alpha = alpha if alpha is not None else spec.smooth if spec.smooth is not None else DEFAULT_ALPHA
    batches = (b.arrays for b in data.iter_batches(spec, data_dir, batch_size, limit))
    with progress_bar(data.count_samples(data_dir, limit), f"smoothing {Path(model).name}", "samples") as bar, \
            data.model_runs_on(data_dir):
        smoothed, activations = run(graph, batches, alpha, on_batch=bar.update)
    onnxio.save(smoothed, output)
    click.echo(f"wrote {output} ({len(activations)} activations smoothed, alpha {alpha:g})")


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--data", "data_dir", type=click.Path(path_type=Path), help="samples; default: the spec's calibration directory")
@click.option("--precision", type=click.Choice(["int8", "fp8"]), default="int8", show_default=True,
              help="what the scales are for: picks the default method and the grid")
@click.option("--method", type=click.Choice(["entropy", "max", "percentile", "mse"]),
              help="default: entropy for int8 (TensorRT's), max for fp8 (its range needs no clipping)")
@click.option("--percentile", type=float, default=99.99, show_default=True)
@click.option("--batch-size", type=int, default=16, show_default=True)
@click.option("--limit", type=int, help="use at most N samples")
@click.option("--shuffle/--no-shuffle", default=False, help="shuffle file order (with --seed)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="model.toml (needed for images)")
@click.option("--force", is_flag=True, help="recalibrate even if the cache is up to date")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def calibrate(model, data_dir, precision, method, percentile, batch_size, limit, shuffle, seed, spec_path, force, output):
    """Calibrate on a data directory and write a TensorRT calibration cache."""
    from trtpipe.calibrate import DEFAULT_METHOD, CalibrationOptions
    from trtpipe.calibrate import calibrate as run

    spec = _spec(spec_path)
    data_dir = _data_dir(data_dir, spec.calibration if spec else None, "calibration")
    method = method or DEFAULT_METHOD[precision]
    options = CalibrationOptions(method, batch_size, limit, shuffle, seed, percentile=percentile, grid=precision)
    table, fresh = run(model, data_dir, output, options, spec, force=force)
    click.echo(f"{'wrote' if fresh else 'up to date:'} {output} ({len(table.amax)} tensors, {table.header})")


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--precision", "precisions", multiple=True, default=["auto"], show_default=True,
              help=f"one of {', '.join(PRECISION_CHOICES)} or auto (repeatable)")
@click.option("--target", "target_text", default="auto", show_default=True)
@click.option("--backend", "backend_name", type=click.Choice(["auto", "tensorrt", "tensorrt-rtx"]), default="auto", show_default=True)
@click.option("--cache", type=click.Path(path_type=Path), help="calibration cache for int8/fp8")
@click.option("--shapes", multiple=True, help="NAME:MIN/OPT/MAX, dims joined by x (repeatable)")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="model.toml: shapes come from it too")
@click.option("--timing-cache", type=click.Path(path_type=Path))
@click.option("--calibration", type=click.Choice(["explicit", "implicit"]), default="explicit", show_default=True)
@click.option("--data", "data_dir", type=click.Path(path_type=Path), help="implicit calibration data")
@click.option("--exclude", multiple=True, help="node name, regex or op type to keep in higher precision; default: the spec's")
@UNQUANTIZED_OPTION
@click.option("--verbose", is_flag=True)
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def build(model, precisions, target_text, backend_name, cache, shapes, spec_path, timing_cache, calibration,
          data_dir, exclude, unquantized, verbose, output):
    """Build strongly typed engines: DIR/<model>.<precision>.<sm>.engine and a sidecar .json."""
    from trtpipe.build import BuildOptions, parse_shapes
    from trtpipe.build import build as run
    from trtpipe.targets import Target

    spec = _spec(spec_path)
    all_shapes = parse_shapes([f"{k}:{v}" for k, v in (spec.shapes if spec else {}).items()], "--spec shapes")
    all_shapes.update(parse_shapes(shapes))
    options = BuildOptions(target=Target.parse(target_text), backend=backend_name, cache=cache, shapes=all_shapes,
                           timing_cache=timing_cache, calibration=calibration,
                           exclude=_exclude(exclude, spec), unquantized=unquantized,
                           calibration_data=data_dir, spec=spec, verbose=verbose)

    def report(result):
        size = result.engine.stat().st_size / 1e6
        click.echo(f"built {result.engine} ({size:.1f} MB, {result.info.build_seconds:.1f} s, "
                   f"{result.info.backend} {result.info.backend_version})")

    run(model, output, list(precisions), options, on_engine=report)


@main.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--precision", type=click.Choice(["int8", "fp8"]), default="int8", show_default=True)
@click.option("--cache", type=click.Path(path_type=Path), required=True, help="the calibration cache for --precision")
@click.option("--data", "data_dir", type=click.Path(path_type=Path), help="default: the spec's calibration directory")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path), help="model.toml (needed for images)")
@click.option("--limit", type=int, default=64, show_default=True, help="samples; every layer runs on all of them")
@click.option("--batch-size", type=int, default=16, show_default=True)
@UNQUANTIZED_OPTION
@click.option("--top", type=int, default=10, show_default=True, help="rows to print")
@click.option("--json", "as_json", is_flag=True, help="print every layer as JSON")
def sensitivity(model, precision, cache, data_dir, spec_path, limit, batch_size, unquantized, top, as_json):
    """Quantize one layer at a time and rank the layers by how far the outputs move (--exclude candidates)."""
    from trtpipe import data, onnxio
    from trtpipe.build import load_table
    from trtpipe.progress import progress_bar
    from trtpipe.sensitivity import layer_sensitivity, quantizable_layers
    from trtpipe.targets import Precision

    graph = onnxio.load(model)
    spec = _spec(spec_path, graph, model)
    data_dir = _data_dir(data_dir, spec.calibration, "calibration")
    table = load_table(cache)
    layers = len(quantizable_layers(graph, table))
    if not layers:
        raise TrtpipeError(f"--cache {cache}: no Conv, MatMul or Gemm of {model} has scales in it; "
                           f"calibrate this model with 'trtpipe calibrate {model}'")
    batches = (b.arrays for b in data.iter_batches(spec, data_dir, batch_size, limit))
    with progress_bar(layers, f"quantizing {Path(model).name} one layer at a time", "layers") as bar, \
            data.model_runs_on(data_dir):
        rows = layer_sensitivity(graph, table, Precision.parse(precision), batches,
                                 classifier=spec.task == "classification", unquantized=unquantized, on_layer=bar.update)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(f"{precision} one layer at a time, against FP32 (first output; lowest cosine first):")
    click.echo(f"{'cosine':>9} {'top-1':>7}  node")
    for row in rows[:top]:
        top1 = f"{row['top1_agreement']:7.2%}" if row["top1_agreement"] is not None else f"{'-':>7}"
        click.echo(f"{row['cosine']:9.5f} {top1}  {row['node']} ({row['op']})")


@main.command(name="inspect")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True)
def inspect_command(path, as_json):
    """Describe an engine (its sidecar), an ONNX (ops, dtypes, Q/DQ) or a calibration cache."""
    from trtpipe.describe import describe, render

    description = describe(path)
    click.echo(json.dumps(description, indent=2) if as_json else render(description))


@main.command()
@click.argument("candidate", type=click.Path(path_type=Path))
@click.option("--baseline", type=click.Path(path_type=Path), required=True, help="the FP32 ONNX")
@click.option("--data", "data_dir", type=click.Path(path_type=Path), help="default: the spec's validation directory")
@click.option("--labels", type=click.Path(path_type=Path), help="'<sample id> <class>' lines; default: the spec's")
@click.option("--spec", "spec_path", type=click.Path(path_type=Path))
@click.option("--report", "report_dir", type=click.Path(path_type=Path), help="write JSON, Markdown and PNGs here")
@click.option("--threshold", "overrides", multiple=True, help="METRIC=MIN, e.g. cosine=0.995 (repeatable)")
@click.option("--batch-size", type=int, default=16, show_default=True)
@click.option("--limit", type=int)
@click.option("--json", "as_json", is_flag=True)
def validate(candidate, baseline, data_dir, labels, spec_path, report_dir, overrides, batch_size, limit, as_json):
    """Compare an engine or typed ONNX with the FP32 baseline; exit 0 on pass, 1 on fail."""
    from trtpipe import data, onnxio
    from trtpipe.runtime.onnxrt import OnnxRunner
    from trtpipe.validate import compare, thresholds_for, write_report

    baseline_model = onnxio.load(baseline)
    spec = _spec(spec_path, baseline_model, baseline)
    data_dir = _data_dir(data_dir, spec.validation, "validation")
    labels = labels or spec.labels
    label_map = data.read_labels(labels) if labels else None
    parsed = {}
    for item in overrides:
        key, _, value = item.partition("=")
        try:
            parsed[key] = float(value)
        except ValueError:
            raise TrtpipeError(f"--threshold {item}: write METRIC=NUMBER, e.g. cosine=0.995") from None
    if candidate.suffix == ".onnx":
        runner = OnnxRunner(candidate)
        precision = runner.precision
    else:
        from trtpipe.runtime.engine import Engine

        runner = Engine(candidate)
        precision = runner.info.precision
    with runner, OnnxRunner(baseline, model=baseline_model) as base:
        report = compare(runner, base, spec, data_dir, precision, label_map,
                         thresholds_for(precision, spec, parsed), batch_size, limit)
    if report_dir:
        write_report(report, report_dir, candidate.name)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(report.markdown())
    sys.exit(0 if report.passed else 1)


@main.command()
@click.argument("reports", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--fail/--no-fail", default=True, help="exit 1 when a report failed (default)")
def summary(reports, fail):
    """Print one table of validation reports: model, precision, engine size, accuracy, pass/fail."""
    from trtpipe.validate import summary_markdown, summary_rows

    rows = summary_rows(list(reports))
    click.echo(summary_markdown(rows))
    if fail and any(r["result"] != "pass" for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
