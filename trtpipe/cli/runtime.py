"""Commands that run what was built: `trtpipe bench`. Its logic: trtpipe.runtime.bench."""

from __future__ import annotations

import json
from pathlib import Path

import click

from trtpipe.cli.options import AT_LEAST_ONE, AT_LEAST_ZERO_FLOAT, json_option


@click.command()
@click.argument("candidate", type=click.Path(path_type=Path))
@click.option("--shapes", multiple=True, help="input shape NAME:DIMS, dims joined by x (repeatable, or joined by commas as trtexec writes them); default: the "
              "engine's OPT profile shape, or the model's static shape")
@click.option("--batch", type=AT_LEAST_ONE, help="first dimension of every input whose first dimension is dynamic")
@click.option("--warmup-ms", type=AT_LEAST_ZERO_FLOAT, default=200.0, show_default=True, help="run this long before timing (trtexec's --warmUp)")
@click.option("--duration-s", type=AT_LEAST_ZERO_FLOAT, default=3.0, show_default=True, help="time for at least this long (trtexec's --duration)")
@click.option("--iterations", type=AT_LEAST_ONE, default=10, show_default=True, help="time at least this many queries (trtexec's --iterations)")
@click.option("--no-transfers", is_flag=True, help="engines: leave host<->device copies out (trtexec's --noDataTransfers)")
@click.option("--cuda-graph", is_flag=True, help="engines: launch the inference as a captured CUDA graph (trtexec's --useCudaGraph)")
@json_option("print the result as JSON instead of text")
def bench(candidate, shapes, batch, warmup_ms, duration_s, iterations, no_transfers, cuda_graph, as_json):
    """Report the throughput and latency of an engine or an ONNX model, by trtexec's definitions.

    An engine runs on this machine's GPU, timed with CUDA events. An ONNX runs in ONNX Runtime with
    host-side figures; a typed ONNX (FP16, INT8, FP8 ...) is labelled simulated.

    \b
    Examples:
      trtpipe bench model.onnx --batch 8 --duration-s 1
      trtpipe quantize model.onnx --precision fp16 -o model.fp16.onnx
      trtpipe bench model.fp16.onnx --shapes image:16x1x8x8 --iterations 20 --json
    """
    from trtpipe.runtime.bench import BenchSettings, parse_bench_shapes
    from trtpipe.runtime.bench import bench as run_bench

    settings = BenchSettings(warmup_ms, duration_s, iterations, transfers=not no_transfers, cuda_graph=cuda_graph)
    result = run_bench(candidate, settings, parse_bench_shapes(shapes), batch)
    click.echo(json.dumps(result.to_json(), indent=2) if as_json else result.render())
