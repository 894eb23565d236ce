"""Progress bars on long work (tqdm), on stderr, quiet when asked or when not a terminal in CI."""

from __future__ import annotations

import contextlib
import os
import sys


@contextlib.contextmanager
def progress_bar(total: int | None, description: str, unit: str, enabled: bool = True):
    """Yield a tqdm bar (shows rate in `unit`/s); a no-op bar when disabled or tqdm is missing."""
    try:
        from tqdm import tqdm
    except ImportError:
        enabled = False
    if not enabled or os.environ.get("TRTPIPE_NO_PROGRESS"):
        yield _Counter()
        return
    # Whole counts ("40 samples", not "40.0samples"), and the finished bar stays: it shows the last
    # batch too, which a cleared bar refreshed every 0.5 s could leave out.
    with tqdm(total=total, desc=description, unit=f" {unit}", file=sys.stderr,
              dynamic_ncols=True, leave=True, mininterval=0.5) as bar:
        yield bar


class _Counter:
    """Counts like a tqdm bar and shows nothing."""

    def __init__(self):
        self.n = 0

    def update(self, count: int = 1) -> None:
        self.n += count
