"""One TensorRT logger per process and backend module.

TensorRT keeps the first logger it is handed (by a Builder or a Runtime) for the whole process and
ignores the rest, so a logger per Engine only looks like it works: an Engine opened with
verbose=True after another one logged nothing. Everyone shares this one; asking for verbose lowers
its threshold for all, which is what TensorRT would do anyway.
"""

from __future__ import annotations

import threading

_LOGGERS: dict[str, object] = {}
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
