"""Pipeline commands: init, plan, calibrate, smooth, quantize, build, inspect.

Where their logic lives: init trtpipe.starting_spec; plan trtpipe.backend; calibrate
trtpipe.calibrate; smooth trtpipe.graph.smooth; quantize trtpipe.quantize (which build shares for
its typed ONNX); build trtpipe.build; inspect trtpipe.describe.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from trtpipe.cli.common import exclude_patterns, exclusion_files, min_weights_or_spec, model_spec
from trtpipe.cli.options import (
    BACKEND_OPTION,
    BLOCK_SIZE_OPTION,
    MIN_WEIGHTS_OPTION,
    PRECISION_CHOICES,
    SHARE,
    UNQUANTIZED_OPTION,
    FiniteFloatRange,
    batch_size_option,
    data_option,
    json_option,
    limit_option,
    output_option,
    spec_option,
    target_option,
    verbose_option,
)
from trtpipe.errors import TrtpipeError


@click.command()
@target_option("sm_89, 8.9, a GPU name (L4), or auto")
@BACKEND_OPTION
@json_option()
def plan(target_text, backend_name, as_json):
    """Print which precisions the target runs with the backend, and why not.

    \b
    Examples:
      trtpipe plan --target L4
      trtpipe plan --target sm_120 --backend tensorrt-rtx --json
    """
    from trtpipe.backend import choose_spec, plan_precisions, precision_support
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


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--precision", type=click.Choice(["fp16", "bf16", "int8", "fp8", "int4", "fp4"]), required=True,
              help="int4: weight-only, from an AWQ-scaled model ('trtpipe awq') or round-to-nearest; fp4: NVFP4")
@click.option("--cache", type=click.Path(path_type=Path), help="calibration cache (int8, fp8; fp4 takes the fp8 one)")
@click.option("--exclude", multiple=True, help="node name, regex or op type to keep unquantized (repeatable); default: the spec's")
@spec_option("[quantize] exclude comes from it")
@UNQUANTIZED_OPTION
@BLOCK_SIZE_OPTION
@MIN_WEIGHTS_OPTION
@data_option(help="samples: nodes whose activations on them leave FP16's range stay FP32 (default: the spec's calibration directory where it exists, else constants only)")
@output_option("the typed ONNX to write")
def quantize(model, precision, cache, exclude, spec_path, unquantized, block_size, min_weights, data_dir, output):
    """Write the typed ONNX for a precision (FP16/BF16 casts, INT8/FP8 Q/DQ, INT4/NVFP4 block-quantized).

    \b
    Examples:
      trtpipe quantize model.onnx --precision fp16 -o model.fp16.onnx
      trtpipe calibrate model.onnx --spec model.toml -o model.int8.cache
      trtpipe quantize model.onnx --precision int8 --cache model.int8.cache --spec model.toml -o model.int8.onnx
    """
    from trtpipe.quantize import quantize as run
    from trtpipe.spec import load_spec

    spec = load_spec(spec_path) if spec_path else None
    result = run(model, precision, output, cache=cache, spec=spec, exclude=exclude_patterns(exclude, spec),
                 unquantized=unquantized, block_size=block_size, min_weights=min_weights_or_spec(min_weights, spec),
                 data_dir=data_dir, reads=exclusion_files(exclude))
    click.echo(f"wrote {result.path}" + kept_note(result.kept, result.left_out, result.path))


def kept_note(kept: list, left_out: list, path) -> str:
    """Return " (N nodes kept in FP32, M layers left unquantized: trtpipe inspect PATH)", or "" when none:
    an engine asked for in FP16 or INT8 that computes much in FP32 must say so where it is made."""
    notes = ([f"{len(kept)} node{'s' * (len(kept) > 1)} kept in FP32"] * bool(kept)
             + [f"{len(left_out)} layer{'s' * (len(left_out) > 1)} left unquantized"] * bool(left_out))
    return f" ({', '.join(notes)}: trtpipe inspect {path})" if notes else ""


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@data_option()
@click.option("--alpha", type=SHARE, help="how much of the outliers moves into the weights, 0..1; default: the spec's [quantize] smooth, else 0.5")
@batch_size_option()
@limit_option()
@spec_option("needed for images")
@output_option("the smoothed FP32 ONNX to write")
def smooth(model, data_dir, alpha, batch_size, limit, spec_path, output):
    """Write an FP32 ONNX with SmoothQuant scales folded in; calibrate and build from it for INT8.

    \b
    Examples:
      trtpipe smooth model.onnx --spec model.toml --alpha 0.5 -o smoothed/model.onnx
    """
    from trtpipe import data
    from trtpipe.files import check_output
    from trtpipe.graph import onnxio
    from trtpipe.graph.smooth import DEFAULT_ALPHA
    from trtpipe.graph.smooth import smooth as run
    from trtpipe.progress import progress_bar

    check_output(output, [model, spec_path, data_dir])
    graph = onnxio.load_float(model)
    spec = model_spec(spec_path, graph, model)
    data_dir = data.chosen_directory(data_dir, spec.calibration, "calibration")
    check_output(output, [data_dir])  # the spec's
    alpha = alpha if alpha is not None else spec.smooth if spec.smooth is not None else DEFAULT_ALPHA
    batches = data.iter_batches(spec, data_dir, batch_size, limit)
    with progress_bar(data.count_samples(data_dir, limit), f"smoothing {Path(model).name}", "samples") as bar, \
            data.model_runs_on(data_dir):
        smoothed, activations = run(graph, data.feeds(batches, bar.update), alpha)
    onnxio.save(smoothed, output)
    click.echo(f"wrote {output} ({len(activations)} activations smoothed, alpha {alpha:g})")


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@data_option()
@click.option("--precision", type=click.Choice(["int8", "fp8"]), default="int8", show_default=True,
              help="what the scales are for: the grid (INT8 or FP8 E4M3) every method measures against")
@click.option("--method", type=click.Choice(["auto", "entropy", "max", "percentile", "mse"]), default="auto",
              show_default=True,
              help="auto: per tensor, the method whose error at its layer's output is least "
                   "(INT8: never under percentile 99.99), or if that fails the spec's checks at the outputs "
                   "and one method alone does better, that one; in FP8 each weight channel's scale too, at the "
                   "one of 16 grid positions of least error at its output; entropy is TensorRT's own (its implicit "
                   "calibrator)")
@click.option("--percentile", type=FiniteFloatRange(0, 100, min_open=True), default=99.99, show_default=True,
              help="percentile method: the share of |x| kept, in (0, 100]")
@batch_size_option()
@limit_option()
@click.option("--shuffle/--no-shuffle", default=False, help="shuffle file order (with --seed)")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="shuffle seed")
@spec_option("needed for images")
@click.option("--force", is_flag=True, help="recalibrate even if the cache is up to date")
@output_option("the cache to write (TensorRT's format; a .json sidecar records what it was made from)")
def calibrate(model, data_dir, precision, method, percentile, batch_size, limit, shuffle, seed, spec_path, force, output):
    """Calibrate on a data directory and write a TensorRT calibration cache.

    \b
    Examples:
      trtpipe calibrate model.onnx --spec model.toml -o model.int8.cache
      trtpipe calibrate model.onnx --spec model.toml --precision fp8 -o model.fp8.cache
      trtpipe calibrate model.onnx --spec model.toml --method percentile --percentile 99.9 -o model.p999.cache
    """
    from trtpipe.calibrate import CalibrationOptions, method_summary
    from trtpipe.calibrate import calibrate as run
    from trtpipe.data import chosen_directory

    spec = model_spec(spec_path)
    data_dir = chosen_directory(data_dir, spec.calibration if spec else None, "calibration")
    options = CalibrationOptions(method, batch_size, limit, shuffle, seed, percentile=percentile, grid=precision)
    table, fresh = run(model, data_dir, output, options, spec, force=force)
    chosen = method_summary(output) if method == "auto" else None
    click.echo(f"{'wrote' if fresh else 'up to date:'} {output} ({len(table.amax)} tensors, {table.header})"
               + (f"; {chosen}" if chosen else ""))


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--precision", "precisions", multiple=True, default=["auto"], show_default=True,
              help=f"one of {', '.join(PRECISION_CHOICES)} or auto (repeatable)")
@target_option("the GPU to build for: sm_89, 8.9, a GPU name (L4, H100), or auto (this machine's GPU)")
@BACKEND_OPTION
@click.option("--cache", type=click.Path(path_type=Path),
              help="calibration cache for int8/fp8 (fp4 takes the fp8 one); default: calibrated from --data or the "
                   "spec's calibration directory into DIR/<model>.<int8|fp8>.cache")
@click.option("--shapes", multiple=True, help="NAME:MIN/OPT/MAX, dims joined by x (repeatable, or joined by commas as trtexec writes them)")
@spec_option("shapes come from it too")
@click.option("--timing-cache", type=click.Path(path_type=Path),
              help="TensorRT's tactic timing cache: read if it exists, written after the build (not on TensorRT-RTX)")
@click.option("--calibration", type=click.Choice(["explicit", "implicit"]), default="explicit", show_default=True,
              help="explicit Q/DQ from --cache, or TensorRT 10's own IInt8EntropyCalibrator2 (implicit)")
@data_option(help="samples: what int8/fp8 calibrate from when no --cache fits (default: the spec's calibration "
                  "directory); implicit calibration data; nodes whose activations on them leave FP16's range stay FP32")
@click.option("--exclude", multiple=True, help="node name, regex or op type to keep in higher precision; default: the spec's")
@UNQUANTIZED_OPTION
@BLOCK_SIZE_OPTION
@MIN_WEIGHTS_OPTION
@verbose_option("TensorRT's")
@output_option("directory for <model>.<precision>.onnx, <model>.<precision>.<sm>.engine and its .json sidecar")
def build(model, precisions, target_text, backend_name, cache, shapes, spec_path, timing_cache, calibration,
          data_dir, exclude, unquantized, block_size, min_weights, verbose, output):
    """Build strongly typed engines: DIR/<model>.<precision>.<sm>.engine and a sidecar .json.

    \b
    Examples:
      trtpipe build model.onnx --precision fp16 --target sm_89 --spec model.toml -o engines/
      trtpipe calibrate model.onnx --spec model.toml -o model.int8.cache
      trtpipe build model.onnx --precision int8 --target L4 --cache model.int8.cache --spec model.toml -o engines/
      trtpipe build model.onnx --precision auto --target sm_89 --spec model.toml -o engines/

    --precision auto (and int8/fp8 without --cache) calibrate from --data or the spec's calibration
    directory first; every precision's needs are checked before the first engine is written.
    """
    from trtpipe.build import BuildOptions
    from trtpipe.build import build as run
    from trtpipe.spec import parse_shapes
    from trtpipe.targets import Target

    spec = model_spec(spec_path)
    all_shapes = {**(spec.shapes if spec else {}), **parse_shapes(shapes)}
    options = BuildOptions(target=Target.parse(target_text), backend=backend_name, cache=cache, shapes=all_shapes,
                           timing_cache=timing_cache, calibration=calibration,
                           exclude=exclude_patterns(exclude, spec), unquantized=unquantized,
                           calibration_data=data_dir, spec=spec, verbose=verbose, block_size=block_size,
                           min_weights=min_weights_or_spec(min_weights, spec))

    def report(result):
        size = result.engine.stat().st_size / 1e6
        click.echo(f"built {result.engine} ({size:.1f} MB, {result.info.build_seconds:.1f} s, "
                   f"{result.info.backend} {result.info.backend_version})"
                   + kept_note(result.info.kept_fp32, result.info.unquantized_layers, result.engine))

    def calibrated(grid, path, fresh):
        click.echo(f"{'calibrated' if fresh else 'up to date:'} {path} ({grid} scales, from the data)")

    run(model, output, list(precisions), options, on_engine=report, on_cache=calibrated)


@click.command(name="inspect")
@click.argument("path", type=click.Path(path_type=Path))
@json_option()
def inspect_command(path, as_json):
    """Describe an engine (its sidecar), an ONNX (ops, dtypes, Q/DQ) or a calibration cache.

    \b
    Examples:
      trtpipe inspect model.onnx
      trtpipe build model.onnx --precision fp16 --target sm_89 --spec model.toml -o engines/
      trtpipe inspect engines/model.fp16.sm89.engine --json
    """
    from trtpipe.describe import describe, render

    description = describe(path)
    click.echo(json.dumps(description, indent=2) if as_json else render(description))


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@data_option(help="a data directory: its samples fill in the dynamic dims, images add a [preprocess] table")
@click.option("--force", is_flag=True, help="replace an existing spec")
@output_option("the model.toml to write")
def init(model, data_dir, force, output):
    """Write a starting model.toml from the model's inputs and outputs, with a guessed task.

    \b
    Examples:
      trtpipe init model.onnx --data data/calib -o started.toml
    """
    from trtpipe.files import check_output, staged_outputs
    from trtpipe.graph import onnxio
    from trtpipe.spec import load_spec
    from trtpipe.starting_spec import starting_spec

    check_output(output, [model, data_dir])
    if output.exists() and not force:
        raise TrtpipeError(f"-o {output}: the file exists; pass --force to replace it, or choose another path")
    text = starting_spec(onnxio.load(model), model, data_dir, spec_path=output)
    with staged_outputs() as outputs:
        # What init writes must load (a failure is a bug, one line): checked beside -o before it replaces anything.
        load_spec(outputs.write(output, text))
    click.echo(f"wrote {output}; check the lines marked CHECK")
