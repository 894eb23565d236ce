"""Activation collection: run the FP32 ONNX in ONNX Runtime with the tensors to calibrate exposed
as outputs, one batch at a time, feeding a streaming histogram per tensor."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from trtpipe.calibrators.histogram import DEFAULT_BINS, StreamingHistogram


def exposing_session(model, tensors: list[str], threads: int | None = None):
    """Return an ONNX Runtime CPU session over `model` whose outputs are `tensors`."""
    import onnx

    from trtpipe.graph import sessions, toolkit

    model = toolkit.copy(model)
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in tensors)
    return sessions.session(model, threads=threads)


def exposed_activations(model, tensors: list[str], batches: Iterable[Mapping[str, np.ndarray]]
                        ) -> Iterator[dict[str, np.ndarray]]:
    """Yield {tensor: value} for each batch.

    The caller drops each dict before asking for the next, so memory is one batch's activations.
    """
    session = exposing_session(model, tensors)
    for batch in batches:
        yield dict(zip(tensors, session.run(tensors, {k: np.asarray(v) for k, v in batch.items()})))  # a shared scalar (sample rate) may come as a numpy scalar


def collect_histograms(model, tensors: list[str], batches: Iterable[Mapping[str, np.ndarray]],
                       bins: int = DEFAULT_BINS) -> dict[str, StreamingHistogram]:
    """Return a histogram of |x| for each tensor over every batch; memory is one batch's activations."""
    histograms = {name: StreamingHistogram(bins) for name in tensors}
    for values in exposed_activations(model, tensors, batches):
        for name, value in values.items():
            try:
                histograms[name].update(value)
            except ValueError as exc:
                raise ValueError(f"tensor '{name}': {exc}") from None
        del values  # drop this batch's activations before the next batch runs
    return histograms
