"""The cause of a Triton failure, read from Triton's own log: what `trtpipe serve` and the tests quote.

Triton's own messages say little ("failed to load all models", or a SystemError from the Python
stub); the Python exception behind it is printed by the stub on a line of its own, earlier in the
log. So the cause is the load failure Triton names, with the last Python exception before it.
"""

from __future__ import annotations

import re
from pathlib import Path

# E1201 23:18:03.481585 8563 model_lifecycle.cc:642] "failed to load 'conv' version 1: Internal: ..."
_LOG_LINE = re.compile(r'^[EWI]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] "?(?P<message>.*?)"?$')
_LOAD_FAILURE = re.compile(r"failed to load '(?P<model>[^']+)' version \d+: (?P<why>.*)")
_PYTHON_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?(?P<type>\w*(?:Error|Exception|Exit)): (?P<text>.+)")
# Errors Triton logs on every CPU-only start; they are not why anything failed.
_NOISE = ("CudaDriverHelper", "modification time")
LIMIT = 300


def _first_line(text: str) -> str:
    return text.replace("\\n", "\n").strip().splitlines()[0].strip() if text.strip() else ""


def cause(log: str) -> str | None:
    """Return the one-line cause of the first failure in Triton's log text, or None when it logged none.

    A model that failed to load is named with Triton's reason and, when the Python stub printed one,
    the exception behind it; otherwise the last error line Triton logged.
    """
    exception, last_error = None, None
    for line in log.splitlines():
        match = _LOG_LINE.match(line)
        if match is None:
            raised = _PYTHON_EXCEPTION.match(line.strip())
            if raised:
                exception = f"{raised['type']}: {raised['text']}"
            continue
        message = match["message"]
        failed = _LOAD_FAILURE.match(message)
        if failed:
            why = _first_line(failed["why"]).removeprefix("Internal: ")
            if exception and exception not in why:
                why = f"{why} ({exception})" if why else exception
            return f"model '{failed['model']}' did not load: {why}"[:LIMIT]
        if line.startswith("E") and not any(noise in message for noise in _NOISE):
            last_error = _first_line(message)
    return (last_error or exception or "")[:LIMIT] or None


def cause_in(path: Path | None) -> str | None:
    """Return cause() of the log file at `path`, or None when there is no such file."""
    if path is None or not path.is_file():
        return None
    return cause(path.read_text(errors="replace"))
