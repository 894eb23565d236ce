"""The types and the shared options of the trtpipe commands: one declaration per option, one type, one help text.

Every numeric option takes one of the ranged types, so a value that means nothing (nan, inf, a
negative count, zero seconds) is refused by click, naming the flag, before any work starts.
"""

from __future__ import annotations

import math
from pathlib import Path

import click

from trtpipe.log import configure


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


def verbose_option(whose: str):
    """Return the --verbose flag of a command that runs `whose` own log (TensorRT's, Triton's): the flag
    shows that log, and trtpipe's DEBUG messages through the one log level (trtpipe.log.configure)."""

    def show(_ctx, _param, value: bool) -> bool:
        if value:
            configure(verbose=True)
        return value

    return click.option("--verbose", is_flag=True, callback=show, help=f"show {whose} own log and trtpipe's debug messages")


# The options many commands take: one flag name, one destination and one type each, declared here.
# Where a command reads the value its own way, it says how in `help` (the --data directory it defaults to).
PATH = click.Path(path_type=Path)

BACKEND_OPTION = click.option(
    "--backend", "backend_name", type=click.Choice(["auto", "tensorrt", "tensorrt-rtx"]), default="auto",
    show_default=True, help="which TensorRT builds: auto picks an installed one that runs the target")


def spec_option(uses: str, required: bool = False):
    """Return --spec FILE (`spec_path`): the model.toml; `uses` says what the command takes from it."""
    return click.option("--spec", "spec_path", type=PATH, required=required, help=f"model.toml: {uses}")


def data_option(default_from: str | None = "calibration", help: str | None = None, required: bool = False):
    """Return --data DIR (`data_dir`): samples, by default the spec's `default_from` directory; `help` for another use."""
    return click.option("--data", "data_dir", type=PATH, required=required,
                        help=help or f"samples; default: the spec's {default_from} directory")


def output_option(what: str, required: bool = True):
    """Return -o/--output PATH (`output`); `what` says what is written there."""
    return click.option("-o", "--output", type=PATH, required=required, help=what)


def batch_size_option(help: str = "samples per forward pass"):
    """Return --batch-size N: samples per forward pass, 16 unless given."""
    return click.option("--batch-size", type=AT_LEAST_ONE, default=16, show_default=True, help=help)


def limit_option(default: int | None = None, help: str = "use at most N samples"):
    """Return --limit N: how many samples are read at most (None: all)."""
    return click.option("--limit", type=AT_LEAST_ONE, default=default, show_default=default is not None, help=help)


def target_option(help: str, default: str = "auto"):
    """Return --target (`target_text`): the GPU, as Target.parse reads it."""
    return click.option("--target", "target_text", default=default, show_default=True, help=help)


def json_option(help: str = "print JSON"):
    """Return --json (`as_json`): print the result as JSON."""
    return click.option("--json", "as_json", is_flag=True, help=help)
