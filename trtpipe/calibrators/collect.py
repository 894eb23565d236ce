"""Activation collection: run the FP32 ONNX in ONNX Runtime with the tensors to calibrate exposed
as outputs, one batch at a time, feeding a streaming histogram per tensor.

A run that exposes tensors holds every one of them at once (ONNX Runtime frees none it must return):
LORE's table-cell detector at 768x768 held 16 GB for a batch of 16, and the kernel's out-of-memory
killer ended the calibration. So when ONNX shape inference says a batch's tensors pass the budget,
they are exposed in groups, each by a session of only the nodes its tensors need, run one after the
other on the same batch. Each tensor still sees the batches in their order, so histograms, ranges
and errors are the ones a single run gives, to float rounding (ONNX Runtime fuses nodes whose outputs
a group does not expose); the price is a forward pass per group.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trtpipe.calibrators.histogram import DEFAULT_BINS, StreamingHistogram

ACTIVATION_BYTES_MOST = 4 << 30  # exposed a run, whatever the machine has
MEMORY_SHARE = 4  # of the memory available when the run starts, a run exposes at most this fraction
# bytes an element of each ONNX TensorProto type: FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, BOOL, FLOAT16, DOUBLE, BFLOAT16
ITEM_BYTES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 16: 2}


def activation_budget() -> int:
    """Return the bytes of activations one run may expose: a quarter of the memory available, at most 4 GiB."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return min(ACTIVATION_BYTES_MOST, int(line.split()[1]) * 1024 // MEMORY_SHARE)
    except OSError:
        pass
    return ACTIVATION_BYTES_MOST


def exposing_session(model, tensors: list[str], threads: int | None = None, arena: bool = True):
    """Return an ONNX Runtime CPU session over `model` whose outputs are `tensors`."""
    import onnx

    from trtpipe.graph import sessions, toolkit

    model = toolkit.copy(model)
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in tensors)
    return sessions.session(model, threads=threads, arena=arena)


def exposed_groups(model, units: Sequence[Sequence[str]], batches: Iterable[Mapping[str, np.ndarray]],
                   budget: int | None = None) -> Iterator[tuple[list[int], dict[str, np.ndarray]]]:
    """Yield (indices of `units`, {tensor: value}) for each batch, every unit's tensors in one dict.

    A unit is what a caller needs together (a layer's inputs and its output). When the first batch's
    tensors pass `budget` bytes (default: activation_budget()), the units come in groups within it,
    one dict a group; a tensor of two units in two groups is computed in both.
    """
    groups: list[tuple[list[int], list[str], Any]] = []
    for batch in batches:
        feeds = {k: np.asarray(v) for k, v in batch.items()}  # a shared scalar (sample rate) may come as a numpy scalar
        if not groups:
            groups = _grouped(model, units, feeds, activation_budget() if budget is None else budget)
        for indices, names, session in groups:
            if len(groups) > 1:
                _return_freed_memory()  # the caller has dropped the last group's dict
            yield indices, dict(zip(names, session.run(names, feeds)))


def exposed_activations(model, tensors: list[str], batches: Iterable[Mapping[str, np.ndarray]],
                        budget: int | None = None) -> Iterator[dict[str, np.ndarray]]:
    """Yield {tensor: value} for each batch (or, past `budget`, for each group of a batch's tensors).

    The caller drops each dict before asking for the next, so memory is one dict's activations.
    """
    for _, values in exposed_groups(model, [[name] for name in tensors], batches, budget):
        yield values


def collect_histograms(model, tensors: list[str], batches: Iterable[Mapping[str, np.ndarray]],
                       bins: int = DEFAULT_BINS, budget: int | None = None) -> dict[str, StreamingHistogram]:
    """Return a histogram of |x| for each tensor over every batch; memory is one batch's activations
    (or a group's, see exposed_groups)."""
    histograms = {name: StreamingHistogram(bins) for name in tensors}
    for values in exposed_activations(model, tensors, batches, budget):
        for name, value in values.items():
            try:
                histograms[name].update(value)
            except ValueError as exc:
                raise ValueError(f"tensor '{name}': {exc}") from None
        del values  # drop this batch's activations before the next batch runs
    return histograms


def _grouped(model, units: Sequence[Sequence[str]], feeds: Mapping[str, np.ndarray], budget: int
             ) -> list[tuple[list[int], list[str], Any]]:
    """Return (unit indices, tensors, session) for each group of units within `budget` at these feeds."""
    every = list(dict.fromkeys(name for unit in units for name in unit))
    sizes = _estimated_bytes(model, feeds)
    largest = max(sizes.values(), default=0)

    def cost(names) -> int:
        return sum(sizes.get(name, largest) for name in names)  # unknown: as large as the largest known

    if cost(every) <= budget:
        return [(list(range(len(units))), every, exposing_session(model, every))]
    parts: list[tuple[list[int], list[str]]] = []
    for index, unit in enumerate(units):
        joined = list(dict.fromkeys([*parts[-1][1], *unit])) if parts else []
        if joined and cost(joined) <= budget:
            parts[-1] = (parts[-1][0] + [index], joined)
        else:
            parts.append(([index], list(dict.fromkeys(unit))))
    # no arena: a session keeps its arena's peak, and each group's would stay held beside the next
    return [(indices, names, exposing_session(_needed_for(model, names), names, arena=False)) for indices, names in parts]


def _return_freed_memory() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing).

    glibc serves a block of the size just freed from its heap rather than a fresh mapping, and keeps
    what the heap frees: a chain of 16 MiB tensors exposed 48 MiB a group rose to 645 MiB resident over
    8 groups, 278 MiB with a trim before each run (949 MiB exposing them all at once)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _estimated_bytes(model, feeds: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Return {tensor: bytes} of each tensor ONNX shape inference sizes fully at the feeds' shapes ({} when
    it fails: every tensor is then exposed in one run, as before)."""
    from trtpipe.graph import toolkit

    shapes = toolkit.inferred_shapes(model, {name: np.shape(value) for name, value in feeds.items()})
    return {name: int(np.prod(dims, dtype=np.int64)) * ITEM_BYTES[kind] for name, (dims, kind) in shapes.items()
            if all(d > 0 for d in dims) and kind in ITEM_BYTES}


def _needed_for(model, names: Sequence[str]):
    """Return a copy of `model` with only the nodes `names` need (ONNX Runtime runs every node it is given)."""
    from trtpipe.graph import toolkit

    model = toolkit.copy(model)
    needed = toolkit.keep_needed(model.graph, names)
    dropped = {init.name for init in model.graph.initializer if init.name not in needed}
    initializers = [init for init in model.graph.initializer if init.name not in dropped]
    del model.graph.initializer[:]
    model.graph.initializer.extend(initializers)
    inputs = [value for value in model.graph.input if value.name not in dropped]  # IR 3 lists weights as inputs too
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    return model
