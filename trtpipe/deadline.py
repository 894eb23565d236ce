"""One moment by which a run must be done, checked by every long step before it starts.

`trtpipe deploy --budget-min` makes one; calibration, each build, each validation and `tune` (its
search and its confirmation on the validation set) start only while it has not passed. A step that
has started runs to its end: a TensorRT build cannot be interrupted, so a run can overrun by one
step, never by more.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Deadline:
    """A moment on `clock` (seconds, monotonic): `left()` and `passed()` read the clock each time."""

    at: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """Return the deadline `seconds` from now on `clock`."""
        return cls(clock() + seconds, clock)

    def left(self) -> float:
        """Return the seconds left, 0 once it has passed."""
        return max(self.at - self.clock(), 0.0)

    def passed(self) -> bool:
        """Return True once the clock has reached the deadline."""
        return self.clock() >= self.at

    def within(self, seconds: float) -> Deadline:
        """Return the sooner of this deadline and `seconds` from now: a share of what is left for one step."""
        return Deadline(min(self.at, self.clock() + seconds), self.clock)
