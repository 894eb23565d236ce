"""Low-bit commands: awq (scales and GPTQ rounding for INT4 weight-only, folded into an FP32 model).

Its logic: trtpipe.graph.awq."""

from __future__ import annotations

from pathlib import Path

import click

from trtpipe.cli.common import model_spec
from trtpipe.cli.options import batch_size_option, data_option, limit_option, output_option, spec_option


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@data_option()
@click.option("--block-size", type=click.Choice(["32", "64", "128"]),
              help="rows of a weight that share one INT4 scale; int4 builds from the output use the same; "
                   "default: the spec's [quantize] block_size, else 128")
@click.option("--tokens", type=click.IntRange(min=16), default=1024, show_default=True,
              help="activation rows per layer the search runs on (AWQ needs at least 16)")
@click.option("--clip/--no-clip", default=True, show_default=True,
              help="also search each block's clipping range (and clip embedding tables to their least rounding error)")
@click.option("--gptq/--no-gptq", default=True, show_default=True,
              help="round the scaled weights by GPTQ's error compensation on the calibration data, not to nearest")
@click.option("--round-to-nearest", "rtn", is_flag=True,
              help="search nothing, only record --block-size: the baseline AWQ must beat, at the same blocks")
@batch_size_option()
@limit_option()
@spec_option("needed for images")
@output_option("the FP32 ONNX to write, AWQ folded in")
def awq(model, data_dir, block_size, tokens, clip, gptq, rtn, batch_size, limit, spec_path, output):
    """Write an FP32 ONNX with AWQ's INT4 scales and clips and GPTQ's rounding folded in; build --precision int4 from it.

    \b
    Examples:
      trtpipe awq model.onnx --spec model.toml --block-size 32 -o awq/model.onnx
      trtpipe build awq/model.onnx --precision int4 --target sm_89 --spec model.toml -o engines/
    """
    from trtpipe import data
    from trtpipe.calibrators.lowbit import DEFAULT_INT4_BLOCK
    from trtpipe.files import check_output
    from trtpipe.graph import onnxio
    from trtpipe.graph.awq import awq as run
    from trtpipe.graph.awq import with_block_size
    from trtpipe.progress import progress_bar

    check_output(output, [model, spec_path, data_dir])
    graph = onnxio.load_float(model)
    spec = model_spec(spec_path, graph, model) if spec_path is not None or not rtn else None
    block_size = int(block_size or (spec.block_size if spec else None) or DEFAULT_INT4_BLOCK)
    if rtn:
        onnxio.save(with_block_size(graph, block_size), output)
        click.echo(f"wrote {output} (round-to-nearest in blocks of {block_size}: nothing searched)")
        return
    data_dir = data.chosen_directory(data_dir, spec.calibration, "calibration")
    check_output(output, [data_dir])  # the spec's
    batches = data.iter_batches(spec, data_dir, batch_size, limit)
    with progress_bar(data.count_samples(data_dir, limit), f"AWQ on {Path(model).name}", "samples") as bar, \
            data.model_runs_on(data_dir):
        scaled, summary = run(graph, data.feeds(batches, bar.update), block_size, tokens, clip=clip, gptq=gptq)
    onnxio.save(scaled, output)
    alphas = sorted(r.alpha for r in summary.layers.values())
    method = "AWQ+GPTQ" if gptq else "AWQ"
    click.echo(f"wrote {output} ({len(summary.layers)} activations scaled, block {block_size}, "
               f"alpha {alphas[0]:g}..{alphas[-1]:g}; {method}'s output error {summary.error_ratio():.3f}x "
               "round-to-nearest's on the samples)")
