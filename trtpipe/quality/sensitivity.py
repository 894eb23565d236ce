"""Per-layer sensitivity: quantize one layer at a time and measure how far the outputs move.

The layers whose quantization alone costs the most are the candidates for `--exclude` (the
shipped specs' exclusions were chosen this way). It runs on calibration data by default, so the
validation set stays a fair judge of the choice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from calibrators.cache import CalibrationTable
from calibrators.graph import constant_names
from trtpipe.graph.qdq import layer_name, quantizable
from trtpipe.targets import Precision


def quantizable_layers(model, table: CalibrationTable) -> list:
    """Return the nodes Q/DQ insertion would quantize: Conv, MatMul, Gemm with scales in `table`."""
    constants = constant_names(model)
    return [node for node in model.graph.node if quantizable(node, constants, table)]


def layer_sensitivity(model, table: CalibrationTable, precision: Precision, batches: Iterable[Mapping[str, np.ndarray]],
                      classifier: bool = False, unquantized: str = "fp16",
                      on_layer: Callable[[int], None] | None = None) -> list[dict]:
    """Return one row per quantizable layer, the most sensitive first: the first output's mean cosine
    with FP32 (and top-1 agreement for a classifier) when only that layer is quantized. No rows when
    the cache holds none of the model's scales (the CLI says so, naming the cache)."""
    from trtpipe.graph.typed import typed_model
    from trtpipe.quality.metrics import OutputMetrics
    from trtpipe.runtime.onnxrt import OnnxRunner

    layers = quantizable_layers(model, table)
    if not layers:
        return []
    batches = list(batches)  # every layer runs on the same samples: keep --limit modest
    with OnnxRunner("baseline", model=model) as baseline:
        output = baseline.outputs[0].name
        wanted = [baseline(batch)[output] for batch in batches]
    rows = []
    for node in layers:
        name = layer_name(node)
        typed = typed_model(model, precision, table, unquantized=unquantized, only=[name])
        metrics = OutputMetrics(classifier=classifier)
        with OnnxRunner(name, model=typed) as runner:
            for batch, want in zip(batches, wanted):
                metrics.update(runner(batch)[output], want)
        summary = metrics.summary()
        rows.append({"node": name, "op": node.op_type, "cosine": summary["cosine"],
                     "top1_agreement": summary.get("top1_agreement")})
        if on_layer is not None:
            on_layer(1)
    return sorted(rows, key=lambda row: row["cosine"])
