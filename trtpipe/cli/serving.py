"""Serving commands: serve (Triton through PyTriton), triton (a model repository), loadtest.

Where their logic lives: serve trtpipe.serve.server; triton trtpipe.serve.repository; loadtest trtpipe.serve.loadtest.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from trtpipe.cli.options import (
    AT_LEAST_ONE,
    AT_LEAST_ZERO,
    PORT,
    POSITIVE,
    data_option,
    json_option,
    limit_option,
    output_option,
    spec_option,
    verbose_option,
)
from trtpipe.errors import TrtpipeError

MAX_BATCH_OPTION = click.option("--max-batch", type=AT_LEAST_ONE, help="largest batch Triton forms; default: the engine profile's "
                                "maximum of dimension 0, 64 for ONNX")
INSTANCES_OPTION = click.option("--instances", type=AT_LEAST_ONE, default=1, show_default=True,
                                help="model instances, each with its own runner (an engine runs one call at a time)")


@click.command()
@click.argument("candidates", nargs=-1, required=True, type=click.Path(path_type=Path))
@spec_option("an ONNX model batches up to its [shapes] maximum of dimension 0 unless --max-batch is given")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to listen on: 127.0.0.1 is this machine only, 0.0.0.0 every interface (reachable from the network)")
@click.option("--http-port", type=PORT, default=8000, show_default=True, help="HTTP/REST port (KServe v2 protocol)")
@click.option("--grpc-port", type=PORT, default=8001, show_default=True, help="gRPC port")
@click.option("--metrics-port", type=PORT, default=8002, show_default=True, help="Prometheus metrics port")
@MAX_BATCH_OPTION
@click.option("--max-queue-delay-us", type=AT_LEAST_ZERO,
              help="how long the batcher may hold a request to form a fuller batch; default: 0 on the direct stack "
                   "(it batches what queued while the runner was busy), 100 on Triton")
@click.option("--instances", type=AT_LEAST_ONE,
              help="model instances, each with its own runner (an engine runs one call at a time); default: 1, and "
                   "for ONNX on the direct stack one a core of one thread each beside one of every core for a request alone")
@click.option("--threads", type=AT_LEAST_ONE, help="ONNX Runtime threads per instance; default: the CPU cores shared by the instances")
@click.option("--stack", type=click.Choice(["direct", "triton"]), default="direct", show_default=True,
              help="direct: the runners answer in this process, behind the same fronts; triton: Triton and its Python "
                   "backend run them (docs/serving.md measures both)")
@verbose_option("Triton's")
def serve(candidates, spec_path, host, http_port, grpc_port, metrics_port, max_batch, max_queue_delay_us, instances, threads,
          stack, verbose):
    """Serve engines (on this GPU) or ONNX models (ONNX Runtime) on Triton, over HTTP and gRPC, until SIGTERM.

    \b
    Examples:
      trtpipe serve model.onnx --spec model.toml --max-batch 64
      trtpipe serve engines/model.int8.sm89.engine --instances 2 --http-port 8010
    """
    from trtpipe.serve.models import describe, open_runner
    from trtpipe.serve.server import ServerOptions, default_threads
    from trtpipe.serve.server import serve as run

    described_threads = threads or default_threads(instances or 1, len(candidates))
    if max_queue_delay_us is None:
        max_queue_delay_us = 0 if stack == "direct" else ServerOptions.max_queue_delay_us
    if max_batch is None and spec_path is not None:
        max_batch = _spec_max_batch(spec_path, candidates)
    models = []
    for path in candidates:
        with open_runner(path, described_threads) as runner:  # opened here once: a file that cannot run fails now, in one line
            model = describe(path, runner, max_batch)
        if model.name in {m.name for m in models}:
            raise TrtpipeError(f"{path}: another candidate is also named '{model.name}'; serve them one at a time")
        models.append(model)
    cores = default_threads(1, len(models))
    lone_threads = 0
    if instances is None and threads is None and stack == "direct" and cores > 1 and all(m.kind == "onnx" for m in models):
        # A lone request runs soonest on every core, a busy queue serves most on one-thread runners side by
        # side (docs/serving.md): the direct batcher picks between them per batch.
        instances, threads, lone_threads = cores, 1, cores
    instances = instances or 1
    options = ServerOptions(host, http_port, grpc_port, metrics_port, max_queue_delay_us, verbose, instances,
                            threads or default_threads(instances, len(models)), stack=stack, lone_threads=lone_threads)
    shown = "127.0.0.1" if host == "0.0.0.0" else host

    def ready():
        for m in models:
            note = " (simulated: a typed ONNX standing in for its engine)" if m.simulated else ""
            batching = f"max batch {m.max_batch}" if m.max_batch else "no batching"
            click.echo(f"serving {m.name}: {m.path.name}, {m.precision}, {m.runner}, {batching}{note}")
        click.echo(f"  HTTP    http://{shown}:{http_port}/v2/models/<model>/infer   health /v2/health/ready")
        click.echo(f"  gRPC    {shown}:{grpc_port}")
        click.echo(f"  metrics http://{shown}:{metrics_port}/metrics")
        click.echo("ready; SIGTERM or Ctrl-C stops after the requests in flight", err=False)

    run(models, options, on_ready=ready)
    click.echo("stopped")


def _spec_max_batch(spec_path: Path, candidates) -> int | None:
    """Return the spec's largest batch (ModelSpec.max_batch), for ONNX candidates (engines have their own)."""
    from trtpipe.spec import load_spec

    if all(Path(c).suffix == ".engine" for c in candidates):
        return None
    spec = load_spec(spec_path)
    return spec.max_batch()


@click.command()
@click.argument("engines", nargs=-1, required=True, type=click.Path(path_type=Path))
@output_option("model repository directory")
@click.option("--name", help="model name; default: from the file name (digits.int8.sm89.engine -> digits_int8)")
@MAX_BATCH_OPTION
@click.option("--dynamic-batching/--no-dynamic-batching", default=True, show_default=True,
              help="let Triton combine requests into batches")
@click.option("--max-queue-delay-us", type=AT_LEAST_ZERO, default=100, show_default=True,
              help="how long Triton may hold a request to form a fuller batch")
@INSTANCES_OPTION
@click.option("--kind", type=click.Choice(["gpu", "cpu"]), default="gpu", show_default=True,
              help="instance group kind (engines run on the GPU; cpu for a repository of ONNX tried without one)")
def triton(engines, output, name, max_batch, dynamic_batching, max_queue_delay_us, instances, kind):
    """Write a Triton model repository: one model per engine family, a plan per compute capability.

    \b
    Examples:
      trtpipe build model.onnx --precision fp16 --target sm_89 --spec model.toml -o engines/
      trtpipe build model.onnx --precision fp16 --target sm_120 --spec model.toml -o engines/
      trtpipe triton engines/model.fp16.sm89.engine engines/model.fp16.sm120.engine -o repository
    """
    from trtpipe.serve.repository import RepositoryOptions, write_repository

    options = RepositoryOptions(max_batch, dynamic_batching, max_queue_delay_us, instances, kind)
    for written in write_repository(engines, output, options, name):
        click.echo(f"wrote {written}")


@click.command()
@click.argument("url")
@click.option("--model", "model_name", required=True, help="model name on the server")
@data_option(help="samples (.npy, .npz or images)", required=True)
@spec_option("needed for images")
@click.option("--check", "check_path", type=click.Path(path_type=Path),
              help="the served engine or ONNX, run here to check every answer; default: the file the server names, if here")
@click.option("--concurrency", default="1,4,16,64", show_default=True, help="requests in flight, comma-separated levels")
@click.option("--duration-s", type=POSITIVE, default=10.0, show_default=True, help="seconds per concurrency level")
@click.option("--batch", "batch_size", type=AT_LEAST_ONE, default=1, show_default=True, help="samples per request")
@limit_option(256, help="distinct samples sent (loaded once, reused)")
@click.option("--protocol", type=click.Choice(["grpc", "http"]), help="default: the URL scheme (grpc:// or http://), else http")
@click.option("--plot", type=click.Path(path_type=Path), help="write throughput and p99 against concurrency (.png)")
@json_option()
def loadtest(url, model_name, data_dir, spec_path, check_path, concurrency, duration_s, batch_size, limit, protocol,
             plot, as_json):
    """Measure throughput and p50/p90/p99 latency per concurrency through tritonclient, every answer checked.

    \b
    Examples:
      trtpipe loadtest grpc://localhost:8001 --model model --data data/val --concurrency 1,4,16 --duration-s 5
    """
    from trtpipe.files import check_output
    from trtpipe.serve.loadtest import LoadOptions, format_table, load_samples, parse_levels, plot_levels, run_loadtest

    levels = parse_levels(concurrency)
    if plot:
        check_output(plot, [data_dir, spec_path, check_path], "--plot")
    options = LoadOptions(url, model_name, levels, duration_s, batch_size, protocol)
    if check_path is not None:
        from trtpipe.serve.models import open_runner

        with open_runner(check_path, threads=1):  # a file that cannot run is told before the server is asked
            pass
    samples = load_samples(options, data_dir, spec_path, limit)
    report = run_loadtest(options, samples, check_path)
    if plot:
        plot_levels(report, plot)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(format_table(report))
    if report.wrong or report.errors:
        raise SystemExit(1)
