"""`trtpipe deploy`: from an ONNX model and data to passing engines, a summary and a Triton repository.

Its logic: trtpipe.deploy.deploy."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from trtpipe.cli.options import (
    AT_LEAST_ZERO_FLOAT,
    BACKEND_OPTION,
    PRECISION_CHOICES,
    batch_size_option,
    data_option,
    output_option,
    spec_option,
    target_option,
    verbose_option,
)

# trtpipe.deploy.PREFERENCES, spelled out: importing trtpipe.deploy loads the builder, and every
# command would pay for it at start-up (DeployOptions refuses any other).
PREFERENCES = ("size", "precision")


@click.command()
@click.argument("model", type=click.Path(path_type=Path))
@data_option()
@click.option("--validation", "validation_dir", type=click.Path(path_type=Path),
              help="other samples to validate on; default: the spec's validation directory, else every 4th file "
                   "of the calibration data by name, held out (linked in OUT/data/): calibration never reads them")
@target_option("the GPU to deploy on: sm_89, 8.9, a GPU name (L4, H100), or auto (this machine's GPU)")
@BACKEND_OPTION
@click.option("--precision", type=click.Choice([*PRECISION_CHOICES, "int4"]),
              help="the one precision wanted (exit 0 only when it passes); default: every precision the target "
                   "runs beyond fp32, and exit 0 when any passes (those narrower than fp16 are skipped when no "
                   "half precision builds)")
@spec_option("default: OUT/<model>.toml, written as 'trtpipe init' writes it when missing")
@click.option("--budget-min", type=AT_LEAST_ZERO_FLOAT, default=10.0, show_default=True,
              help="minutes the whole deploy may take: no calibration, build, validation or tuning step starts "
                   "after them, calibration stops between batches (writing no cache), a build or validation "
                   "that has started finishes, and what they left untried or cut short is said")
@click.option("--prefer", type=click.Choice(PREFERENCES), default="size", show_default=True,
              help="which passing engine to serve: size, the smallest engine file (engines within 5% of it are "
                   "equals, and the narrowest precision among them, then the one nearer FP32, wins); precision, the "
                   "narrowest precision (then the one nearer FP32)")
@batch_size_option()
@verbose_option("TensorRT's")
@output_option("directory for the engines, reports/, summary.md and triton/; default: deploy/<model>", required=False)
def deploy(model, data_dir, validation_dir, target_text, backend_name, precision, spec_path, budget_min, prefer,
           batch_size, verbose, output):
    """Calibrate, build, validate and tune every precision the target runs; keep the engines that pass.

    Leaves in OUT only engines that pass validation against FP32 on data calibration did not read,
    their reports, summary.md (the table 'trtpipe summary' prints) and triton/, a Triton model
    repository of the engine --prefer picks among those that pass; it says why in one line. Exit 0
    when the precision asked for (by default any beyond fp32) passes, 1 when none does (or the budget
    ran out first; summary.md stays), 2 on bad input, however late it is found (nothing this run
    wrote stays).

    \b
    Examples:
      trtpipe deploy model.onnx --data data/calib --target sm_89 --budget-min 1 -o deployed/
      trtpipe deploy model.onnx --spec model.toml --target L4 --precision int8 --budget-min 1 -o deployed/
    """
    from trtpipe.deploy import DeployOptions
    from trtpipe.deploy import deploy as run
    from trtpipe.targets import Target

    options = DeployOptions(target=Target.parse(target_text), backend=backend_name, precision=precision,
                            budget_minutes=budget_min, batch_size=batch_size, prefer=prefer, verbose=verbose)
    output = output or Path("deploy") / model.stem
    result = run(model, output, options, data_dir, spec_path, on_step=lambda text: click.echo(f"-- {text}", err=True),
                 validation_dir=validation_dir)
    if result.summary:
        click.echo(result.summary)
    for outcome in result.outcomes:
        if outcome.note:
            click.echo(f"{outcome.precision}: {outcome.note}")
    how = "simulated: the typed ONNX in ONNX Runtime, no such GPU here" if result.simulated else "measured on this GPU"
    click.echo(result.validation)
    if result.chosen is None:
        click.echo(f"no precision passes ({how}); no engine is left and no Triton repository written"
                   + (f"; the verdicts are in {result.summary_path}" if result.summary_path else ""))
    else:
        click.echo(f"chose {result.chosen.engine} ({how}): {result.why}")
        click.echo(f"wrote {result.repository}: a Triton model repository ('tritonserver --model-repository "
                   f"{result.repository}' on the {options.target.sm} host; docs/serving.md)")
    for note in result.notes:
        click.echo(f"note: {note}")
    wanted = result.chosen is not None and (options.precision is None or str(result.chosen.precision) == options.precision)
    sys.exit(0 if wanted else 1)
