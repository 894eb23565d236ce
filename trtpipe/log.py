"""trtpipe's log: every library module logs to `logging.getLogger(__name__)`, under the `trtpipe` logger.

A library user sees nothing unless they configure logging (the package installs a NullHandler).
The commands and the `python -m` entry points call `configure` once: the one place that decides
where the messages go and at what level. What a command prints as its result stays on click.echo;
progress bars stay on tqdm (trtpipe.progress).
"""

from __future__ import annotations

import logging
import sys

LOGGER = logging.getLogger("trtpipe")


class _OneLine(logging.Formatter):
    """'trtpipe: message', the commands' own voice; a DEBUG message names the module it came from."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage().replace("\r", "\\r").replace("\n", "\\n")
        where = f" [{record.name}]" if record.levelno <= logging.DEBUG else ""
        return f"trtpipe: {text}{where}"


class _Stderr(logging.Handler):
    """Writes to whatever sys.stderr is at the time: click's test runner swaps it for every invocation."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must never fail the work it reports on
            self.handleError(record)


def configure(verbose: bool = False) -> None:
    """Send trtpipe's log to stderr, one line a message: INFO and above, DEBUG too when `verbose`."""
    if not any(isinstance(h, _Stderr) for h in LOGGER.handlers):
        handler = _Stderr()
        handler.setFormatter(_OneLine())
        LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG if verbose else logging.INFO)
    LOGGER.propagate = False  # the root logger's handlers (a user's basicConfig) would print each line twice
