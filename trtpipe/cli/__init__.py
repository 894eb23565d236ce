"""The `trtpipe` command: parse, call the library, print. Errors are one line and exit code 2."""

from __future__ import annotations

import math
import sys
from pathlib import Path

try:
    import click
except ModuleNotFoundError:  # trtpipe alone is the runtime: the commands are the pipeline extra
    print("trtpipe: error: the trtpipe commands need the pipeline extra: pip install 'trtpipe[pipeline]'", file=sys.stderr)
    raise SystemExit(2) from None

from trtpipe.errors import TrtpipeError


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses nan and inf (which compare false with every bound, so pass it)."""

    def convert(self, value, param, ctx):
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value} is not a finite number", param, ctx)
        return rv


# Every numeric option takes one of these, so a value that means nothing (nan, inf, a negative count,
# zero seconds) is refused by click, naming the flag, before any work starts.
AT_LEAST_ONE = click.IntRange(min=1)  # --limit, --batch-size, --top: a count of zero or less means nothing
AT_LEAST_ZERO = click.IntRange(min=0)  # --seed, --min-weights, --max-queue-delay-us
PORT = click.IntRange(1, 65535)
POSITIVE = FiniteFloatRange(min=0, min_open=True)  # --duration-s, --budget-min: no time at all measures nothing
AT_LEAST_ZERO_FLOAT = FiniteFloatRange(min=0)  # --warmup-ms: none is fine
SHARE = FiniteFloatRange(0, 1)  # --alpha, --slack


PRECISION_CHOICES = ["fp32", "tf32", "fp16", "bf16", "int8", "fp8", "fp4"]
UNQUANTIZED_OPTION = click.option(
    "--unquantized", type=click.Choice(["fp16", "fp32"]), default="fp16", show_default=True,
    help="what INT8/FP8 engines compute their unquantized layers in")

BLOCK_SIZE_OPTION = click.option(
    "--block-size", type=click.Choice(["32", "64", "128"]), callback=lambda _ctx, _param, value: value and int(value),
    help="int4: rows of a weight sharing one scale; default: an AWQ-scaled model's, else the spec's "
         "[quantize] block_size, else 128")

MIN_WEIGHTS_OPTION = click.option(
    "--min-weights", type=AT_LEAST_ZERO,
    help="int8/fp8: leave layers with fewer weight elements unquantized, for a smaller TensorRT-RTX plan; "
         "default: the spec's [quantize] min_weights, else 0 (quantize every layer)")



def one_line(message: str) -> str:
    """Return `message` as one printable line: a file name's newlines and undecodable bytes escaped."""
    try:
        text = message.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte
        text = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\r", "\\r").replace("\n", "\\n")


class Group(click.Group):
    """Turns TrtpipeError and click's usage errors into one line on stderr and exit code 2, never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except TrtpipeError as exc:
            click.echo(f"trtpipe: error: {one_line(str(exc))}", err=True)
            sys.exit(2)
        except click.UsageError as exc:  # a bad flag value: one line, with where to read more
            command = f"trtpipe {exc.ctx.info_name}" if exc.ctx is not None and exc.ctx.parent is not None else "trtpipe"
            click.echo(f"trtpipe: error: {one_line(exc.format_message())} (see '{command} --help')", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            # Every file is staged and committed whole (trtpipe.files.Outputs): what was not finished
            # was not written; results finished before the interrupt (earlier engines of a build) stay.
            click.echo("trtpipe: interrupted; nothing unfinished was written", err=True)
            sys.exit(130)


def _exclude(given, spec) -> list[str]:
    """--exclude as given, else the spec's [quantize] exclude. `@FILE` stands for FILE's [quantize]
    exclude (the .toml that 'trtpipe tune' writes beside its cache)."""
    from trtpipe.config import load_exclusions

    if not given:
        return spec.exclude if spec else []
    return [name for item in given for name in (load_exclusions(item[1:]) if item.startswith("@") else [item])]


def _exclusion_files(given) -> list[Path]:
    """Return the files that `--exclude @FILE` reads: inputs, which no output may replace."""
    return [Path(item[1:]) for item in given if item.startswith("@")]


def _min_weights(given, spec) -> int:
    """--min-weights as given, else the spec's [quantize] min_weights."""
    if given is not None:
        return given
    return spec.min_weights if spec else 0


def _data_dir(given, from_spec, kind: str) -> Path:
    """--data as given, else the spec's data.<kind> (trtpipe.data.chosen_directory)."""
    from trtpipe.data import chosen_directory

    return chosen_directory(given, from_spec, kind)


def _spec(spec_path, model=None, model_path=None):
    """Return the spec at `spec_path`; without one, the inputs of `model` (loaded from `model_path`), else None."""
    from trtpipe.config import load_spec, resolve_inputs, spec_from_onnx

    if spec_path:
        spec = load_spec(spec_path)
        return resolve_inputs(spec, model, model_path) if model is not None else spec
    return spec_from_onnx(model, model_path) if model is not None else None


@click.group(cls=Group)
@click.version_option(package_name="trtpipe")
def main():
    """TensorRT deployment pipeline: calibrate, quantize, build, validate and run engines."""


# The commands, one module per family; imported last so that they find `main`.
from trtpipe.cli import (  # noqa: F401
    deploy,
    lowbit,
    pipeline,
    quality,
    runtime,
    serving,
    tuning,
)
