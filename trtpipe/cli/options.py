"""The types and the shared options of the trtpipe commands: one declaration per option, one type, one help text.

Every numeric option takes one of the ranged types, so a value that means nothing (nan, inf, a
negative count, zero seconds) is refused by click, naming the flag, before any work starts.
"""

from __future__ import annotations

import math

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
