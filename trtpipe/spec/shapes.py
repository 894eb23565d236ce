"""Build shapes: trtexec-style `NAME:MIN/OPT/MAX` text (a spec's [shapes], --shapes) parsed into ShapeRanges.

The one parser of shape text: load_spec calls it once for [shapes], the commands once for --shapes;
everything after passes the ShapeRanges.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

from trtpipe.errors import TrtpipeError
from trtpipe.spec.model import ShapeRange


def parse_shapes(values: Iterable[str], flag: str = "--shapes") -> dict[str, ShapeRange]:
    """Return {input: ShapeRange(min, opt, max)} from trtexec-style `name:1x64/32x64/256x64` values, several
    to a value where commas join them (trtpipe.runtime.bench.shape_entries: bench reads the same form)."""
    from trtpipe.runtime.bench import shape_entries

    shapes = {}
    for value in shape_entries(values):
        shown = value if value.isprintable() else repr(value)  # the error stays one line
        name, sep, dims = value.rpartition(":")
        parts = dims.split("/")
        if not sep or not name or len(parts) != 3 or not all(re.fullmatch(r"[1-9][0-9]*(x[1-9][0-9]*)*", p) for p in parts):
            raise TrtpipeError(f"{flag} {shown}: write NAME:MIN/OPT/MAX with dims joined by x, e.g. x:1x64/32x64/256x64 (dims >= 1)")
        triple = ShapeRange(*(tuple(int(d) for d in p.split("x")) for p in parts))
        if len({len(s) for s in triple}) != 1 or any(a > b for lo, hi in itertools.pairwise(triple) for a, b in zip(lo, hi)):
            raise TrtpipeError(f"{flag} {shown}: MIN, OPT and MAX need the same rank and MIN <= OPT <= MAX")
        shapes[name] = triple
    return shapes
