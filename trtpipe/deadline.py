"""One moment by which a run must be done, checked by every long step before it starts.

`trtpipe deploy --budget-min` makes one; calibration, each build, each validation and `tune` (its
search and its confirmation on the validation set) start only while it has not passed. Calibration
also stops between its batches once it passes (`Deadline.paced`: both the histogram pass and the
`auto` method's per-tensor choice, which took most of ppocr-det's and picodet-layout's budgets),
writing no cache. A build or a validation that has started runs to its end: a TensorRT build
cannot be interrupted, so a run can overrun by one of those, never by more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field


class OutOfTime(Exception):
    """A step the deadline stopped part way: `what` names it ("int8 calibration"); it wrote nothing."""

    def __init__(self, what: str):
        super().__init__(f"{what}: stopped, the budget ran out part way")
        self.what = what


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

    def paced(self, items: Iterable, what: str) -> Iterator:
        """Yield `items` while the deadline has not passed; raise OutOfTime(`what`) before the next one once it has."""
        for item in items:
            if self.passed():
                raise OutOfTime(what)
            yield item
