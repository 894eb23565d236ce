"""Activation collection: run the FP32 ONNX in ONNX Runtime with the tensors to calibrate exposed
as outputs, one batch at a time, feeding a streaming histogram per tensor."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from calibrators.histogram import DEFAULT_BINS, StreamingHistogram


def exposing_session(model, tensors: list[str], threads: int | None = None):
    """Return an ONNX Runtime CPU session over `model` whose outputs are `tensors`."""
    import onnx
    import onnxruntime as ort

    model = onnx.ModelProto.FromString(model.SerializeToString())
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in tensors)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def collect_histograms(model, tensors: list[str], batches: Iterable[Mapping[str, np.ndarray]],
                       bins: int = DEFAULT_BINS, on_batch: Callable[[int], None] | None = None
                       ) -> dict[str, StreamingHistogram]:
    """Return a histogram of |x| for each tensor over every batch; memory is one batch's activations."""
    session = exposing_session(model, tensors)
    histograms = {name: StreamingHistogram(bins) for name in tensors}
    for batch in batches:
        outputs = session.run(tensors, dict(batch))
        for name, value in zip(tensors, outputs):
            try:
                histograms[name].update(value)
            except ValueError as exc:
                raise ValueError(f"tensor '{name}': {exc}") from None
        del outputs  # drop this batch's activations before the next batch runs
        if on_batch is not None:
            on_batch(len(next(iter(batch.values()))))
    return histograms
