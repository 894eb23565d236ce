"""Random inputs for a model: the one rule that cleanup's check, control's If decisions and bench feed with.

Floats are uniform in [0, 1); booleans are all True (a mask that keeps everything); integers are 0
or 1, valid as token ids, token types, masks and class indices alike. An integer input that indexes
a constant table (a Gather's indices, directly or through casts and reshapes) also stays below the
table's rows: 0 alone for a table of one row. The shapes are the caller's to choose.

Only numpy at import: bench feeds an engine from here on a host without onnx.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

ID_HIGH = 2  # integers are drawn from 0 .. ID_HIGH - 1
# Ops an index passes through on its way from a graph input to a Gather without becoming another number.
INDEX_PASS_THROUGH = frozenset({"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"})


def random_inputs(inputs: Iterable[tuple[str, Any, Sequence[int]]], seed: int = 0,
                  limits: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Return {name: array} for each (name, dtype, shape) of `inputs`, drawn in order from one generator
    seeded with `seed`; `limits` ({input: table rows}, from index_limits) bounds an integer input's values."""
    rng = np.random.default_rng(seed)
    limits = limits or {}
    feeds = {}
    for name, dtype, shape in inputs:
        dtype, shape = np.dtype(dtype), tuple(shape)
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.random(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[name] = np.ones(shape, bool)
        else:
            feeds[name] = rng.integers(0, max(1, min(ID_HIGH, limits.get(name, ID_HIGH))), shape).astype(dtype)
    return feeds


def index_limits(graph) -> dict[str, int]:
    """Return {graph input: rows of the smallest constant table it indexes} for the inputs that reach
    the indices of a Gather on an initializer or Constant (top level)."""
    from trtpipe.graph import toolkit

    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.output and (value := toolkit.attribute(node, "value")) is not None:
            shapes[node.output[0]] = tuple(value.dims)
    inputs = {value.name for value in graph.input} - set(shapes)
    producers = toolkit.producers(graph)
    limits: dict[str, int] = {}
    for node in graph.node:
        if node.op_type != "Gather" or len(node.input) < 2 or node.input[0] not in shapes:
            continue
        table = shapes[node.input[0]]
        if not table:
            continue
        rows = table[toolkit.attribute(node, "axis", 0) % len(table)]
        name = node.input[1]
        for _ in range(16):  # chains are short; the bound guards against a malformed cycle
            if name in inputs:
                limits[name] = min(rows, limits.get(name, rows))
                break
            source = producers.get(name)
            if source is None or source.op_type not in INDEX_PASS_THROUGH or not source.input:
                break
            name = source.input[0]
    return limits
