"""The `trtpipe` command: the group, and every command registered from one list.

Each command module (pipeline, quality, tuning, lowbit, runtime, serving, deploy) parses its flags,
makes one library call and prints; its docstring names where the logic lives. The options shared
between commands are in trtpipe.cli.options, the helpers in trtpipe.cli.common. Errors are one line
and exit code 2 (common.Group).
"""

from __future__ import annotations

import sys

try:
    import click
except ModuleNotFoundError:  # trtpipe alone is the runtime: the commands are the pipeline extra
    print("trtpipe: error: the trtpipe commands need the pipeline extra: pip install 'trtpipe[pipeline]'", file=sys.stderr)
    raise SystemExit(2) from None

from trtpipe.cli import deploy, lowbit, pipeline, quality, runtime, serving, tuning
from trtpipe.cli.common import Group
from trtpipe.log import configure

COMMANDS = [
    pipeline.init, pipeline.plan, pipeline.calibrate, pipeline.smooth, lowbit.awq, pipeline.quantize, pipeline.build,
    pipeline.inspect_command, quality.validate, quality.summary, quality.sensitivity, tuning.tune, runtime.bench,
    serving.serve, serving.triton, serving.loadtest, deploy.deploy,
]


@click.group(cls=Group)
@click.version_option(package_name="trtpipe")
def main():
    """TensorRT deployment pipeline: calibrate, quantize, build, validate and run engines."""
    configure()  # trtpipe's log on stderr at INFO; a command's --verbose lowers it to DEBUG


for command in COMMANDS:
    main.add_command(command)
