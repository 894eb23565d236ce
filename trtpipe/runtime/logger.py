"""One TensorRT logger per process and backend module.

TensorRT keeps the first logger it is handed (by a Builder or a Runtime) for the whole process and
ignores the rest, so a logger per Engine only looks like it works: an Engine opened with
verbose=True after another one logged nothing. Everyone shares this one; asking for verbose lowers
its threshold for all, which is what TensorRT would do anyway.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

_LOGGERS: dict[str, object] = {}
_LOCK = threading.Lock()


def shared_logger(trt, verbose: bool = False):
    """Return the process's logger for TensorRT module `trt` (errors only, or verbose when asked)."""
    with _LOCK:
        logger = _LOGGERS.get(trt.__name__)
        if logger is None:
            logger = _LOGGERS[trt.__name__] = _logger_class(trt)(trt.Logger.ERROR)
        if verbose:
            logger.min_severity = trt.Logger.VERBOSE
    return logger


def _logger_class(trt):
    """Return an ILogger for module `trt` that writes to stderr, or keeps what is logged while `held()`."""

    class Logger(trt.ILogger):
        def __init__(self, min_severity):
            trt.ILogger.__init__(self)
            self.min_severity = min_severity
            self._held: list[str] | None = None

        def log(self, severity, msg):
            if int(severity) > int(self.min_severity):  # lower is more severe
                return
            if self._held is not None and int(severity) <= int(trt.Logger.ERROR):  # errors: what a failure quotes
                self._held.append(msg.strip())
            if self._held is None or int(self.min_severity) >= int(trt.Logger.VERBOSE):
                sys.__stderr__.write(f"[TRT] {msg.strip()}\n")  # as TensorRT's own logger: the process's stderr

        @contextlib.contextmanager
        def held(self) -> Iterator[list[str]]:
            """Yield the list TensorRT's errors go to instead of stderr until the block ends (printed too when
            verbose): a failed build says its first error in one line, not TensorRT's dozens."""
            self._held = held = []
            try:
                yield held
            finally:
                self._held = None

    return Logger
