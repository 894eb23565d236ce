"""What every trtpipe command shares besides its options: the group class that makes every error one
line with exit code 2, and the helpers that read --spec, --data and --exclude the same way everywhere.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import click

from trtpipe.errors import TrtpipeError


def one_line(message: str) -> str:
    """Return `message` as one printable line: a file name's newlines and undecodable bytes escaped."""
    try:
        text = message.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte
        text = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\r", "\\r").replace("\n", "\\n")


# The system's refusals of a path itself, wherever a command meets them: what to do about each.
PATH_ERRORS = {errno.ENAMETOOLONG: "use a shorter name", errno.ELOOP: "a link in the path leads back to itself; fix it",
               errno.ENOTDIR: "a folder in the path is a file; fix the path",
               errno.EACCES: "choose a path you may read and write", errno.EPERM: "choose a path you may read and write",
               errno.EROFS: "choose a path on a writable file system"}


class Group(click.Group):
    """Turns TrtpipeError, click's usage errors and the system's refusal of a path into one line on stderr and
    exit code 2, never a traceback; a stop signal into the interrupt's line. A command that fails leaves no
    folder it made for its outputs."""

    def invoke(self, ctx):
        from trtpipe import files

        files.forget_made_folders()
        finished = False
        try:
            with files.stops_as_interrupts():
                result = super().invoke(ctx)
            finished = True
            return result
        except TrtpipeError as exc:
            click.echo(f"trtpipe: error: {one_line(str(exc))}", err=True)
            sys.exit(2)
        except click.UsageError as exc:  # a bad flag value: one line, with where to read more
            command = f"trtpipe {exc.ctx.info_name}" if exc.ctx is not None and exc.ctx.parent is not None else "trtpipe"
            click.echo(f"trtpipe: error: {one_line(exc.format_message())} (see '{command} --help')", err=True)
            sys.exit(2)
        except OSError as exc:
            if exc.errno not in PATH_ERRORS or exc.filename is None:
                raise
            # A name too long, a link to itself, a path through a file: what the system said of which file.
            click.echo(f"trtpipe: error: {one_line(os.fsdecode(exc.filename))}: {exc.strerror}; {PATH_ERRORS[exc.errno]}",
                       err=True)
            sys.exit(2)
        except KeyboardInterrupt as exc:
            # Every file is staged and committed whole (trtpipe.files.Outputs): what was not finished
            # was not written; results finished before the interrupt (earlier engines of a build) stay.
            stopped = isinstance(exc, files.Stopped)
            click.echo(f"trtpipe: interrupted{f' ({exc})' if stopped else ''}; nothing unfinished was written", err=True)
            sys.exit(128 + exc.number if stopped else 130)
        finally:
            if not finished:
                files.remove_made_folders()


def exclude_patterns(given, spec) -> list[str]:
    """--exclude as given, else the spec's [quantize] exclude. `@FILE` stands for FILE's [quantize]
    exclude (the .toml that 'trtpipe tune' writes beside its cache)."""
    from trtpipe.spec import load_exclusions

    if not given:
        return spec.exclude if spec else []
    return [name for item in given for name in (load_exclusions(item[1:]) if item.startswith("@") else [item])]


def exclusion_files(given) -> list[Path]:
    """Return the files that `--exclude @FILE` reads: inputs, which no output may replace."""
    return [Path(item[1:]) for item in given if item.startswith("@")]


def min_weights_or_spec(given, spec) -> int:
    """--min-weights as given, else the spec's [quantize] min_weights."""
    if given is not None:
        return given
    return spec.min_weights if spec else 0


def model_spec(spec_path, model=None, model_path=None):
    """Return the spec at `spec_path`; without one, the inputs of `model` (loaded from `model_path`), else None."""
    from trtpipe.spec import load_spec, spec_for

    spec = load_spec(spec_path) if spec_path else None
    return spec_for(spec, model, model_path) if model is not None else spec
