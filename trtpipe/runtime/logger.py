"""One TensorRT logger per process and backend module.

TensorRT keeps the first logger it is handed (by a Builder or a Runtime) for the whole process and
ignores the rest, so a logger per Engine only looks like it works: an Engine opened with
verbose=True after another one logged nothing. Everyone shares this one; asking for verbose lowers
its threshold for all, which is what TensorRT would do anyway.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

_LOGGERS: dict[str, Any] = {}  # TensorRT module name -> its trt.Logger
_LOCK = threading.Lock()


def shared_logger(trt, verbose: bool = False):
    """Return the process's logger for TensorRT module `trt` (errors only, or verbose when asked)."""
    with _LOCK:
        logger = _LOGGERS.get(trt.__name__)
        if logger is None:
            logger = _LOGGERS[trt.__name__] = trt.Logger(trt.Logger.ERROR)
        if verbose:
            logger.min_severity = trt.Logger.VERBOSE
    return logger


# TensorRT's default logger prints "[date] [TRT] [E] message" for an error (F: internal error).
_ERROR_LINE = re.compile(r"\[TRT\] \[[EF]\] (.*)")


@contextlib.contextmanager
def held_errors(verbose: bool = False) -> Iterator[list[str]]:
    """Route the process's stdout and stderr (file descriptors 1 and 2: TensorRT's logger writes to
    stdout, its parser to stderr) to a temporary file for the block; yield a list that then holds the
    TensorRT errors written there. `verbose`: leave them be.

    A failed build says its first error in one line, not TensorRT's dozens. A Python logger would do it
    without the file, but a Ctrl-C raised inside its callback is swallowed by TensorRT, which builds on.
    """
    errors: list[str] = []
    if verbose:
        yield errors
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as held:
        for fd in saved:
            os.dup2(held.fileno(), fd)
        try:
            yield errors
        finally:
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            held.seek(0)
            for line in held.read().decode(errors="replace").splitlines():
                match = _ERROR_LINE.search(line)
                if match:
                    errors.append(match.group(1).strip())
