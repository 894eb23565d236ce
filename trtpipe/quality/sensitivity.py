"""Per-layer sensitivity: quantize one layer at a time and measure how far the judged outputs move.

The layers whose quantization alone costs the most are the candidates for `--exclude` (the
shipped specs' exclusions were chosen this way). Each layer is scored by the spec's task metric
(top-1 agreement, mAP@0.5, mask IoU, cosine, the share within a spec's tolerance...) over every
judged output, the worst output counting; ties (top-1 agreement is coarse on few samples) are broken
by the farthest answer where a tolerance decides, else by the raw cosine. It runs on
calibration data by default, so the validation set stays a fair judge of the choice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from trtpipe.calibrators.cache import CalibrationTable
from trtpipe.data import Batch
from trtpipe.graph.qdq import Placement
from trtpipe.graph.toolkit import label
from trtpipe.spec import ModelSpec, is_float
from trtpipe.targets import Precision


@dataclass(frozen=True)
class LayerSensitivity:
    """One layer quantized alone: how far the model's judged outputs moved from FP32's."""

    node: str  # the layer's label (graph.toolkit.label)
    op: str
    score: float  # the lowest task metric over the judged outputs (each task's primary one)
    metric: str  # which: "<output> <metric>"
    cosine: float  # the lowest mean raw cosine over the judged outputs; breaks ties of score
    top1_agreement: float | None  # classifiers only
    distance_max: float | None = None  # scored by within_tolerance: the farthest answer from FP32's; breaks its ties


def quantizable_layers(model, table: CalibrationTable, min_weights: int = 0, precision: Precision | None = None) -> list:
    """Return the nodes Q/DQ insertion for `precision` would quantize: Conv, MatMul, Gemm with scales
    in `table`, not depthwise, with at least `min_weights` weight elements (the spec's), not reading a
    Softmax's probabilities in INT8, not too small for `precision` (graph.qdq.Placement.why_left_out)."""
    placement = Placement.of(model, table, precision, min_weights=min_weights)
    gemms = placement.gemm_rule_holds(model.graph.node)
    return [node for node in model.graph.node if placement.quantizable(node, gemms)]


def layer_sensitivity(model, table: CalibrationTable, precision: Precision, batches: Iterable[Batch],
                      classifier: bool = False, unquantized: str = "fp16",
                      on_layer: Callable[[int], None] | None = None, spec: ModelSpec | None = None) -> list[LayerSensitivity]:
    """Return one row per quantizable layer, the most sensitive first.

    `spec` picks the outputs and tasks (its [[outputs]] or task); without one every float
    output is judged generically (a classifier when `classifier`). No rows when the cache holds none
    of the model's scales (the CLI says so, naming the cache)."""
    from trtpipe.graph.typed import typed_model
    from trtpipe.quality.stream import Stream, carried_inputs
    from trtpipe.quality.tasks import judge_model, make_task, make_tasks
    from trtpipe.runtime.onnxrt import OnnxRunner
    from trtpipe.spec import OutputSpec

    layers = quantizable_layers(model, table, spec.min_weights if spec else 0, precision)
    if not layers:
        return []
    batches = list(batches)  # every layer runs on the same samples: keep --limit modest
    with OnnxRunner("baseline", model=model) as baseline:
        if spec is None and classifier:
            first = next(o for o in baseline.outputs if is_float(o.dtype))
            tasks = lambda: [make_task(OutputSpec(first.name, "classification"))]
        else:
            tasks = lambda: make_tasks(spec, baseline.outputs)
        run = Stream(baseline, carried_inputs(spec, baseline.outputs))
        wanted = [run(batch) for batch in batches]
    rows = []
    for node in layers:
        name = label(node)
        typed = typed_model(model, precision, table, unquantized=unquantized, only=[name])
        summaries = judge_model(typed, lambda outputs: tasks(), batches, wanted, name, spec)
        score_task, score = min(((t, s[t.primary]) for t, s in summaries), key=lambda pair: pair[1])
        top1 = [s["top1_agreement"] for t, s in summaries if "top1_agreement" in s]
        distances = [s["distance_max"] for t, s in summaries if t.primary == "within_tolerance"]
        rows.append(LayerSensitivity(name, node.op_type, float(score), f"{score_task.output} {score_task.primary}",
                                     # an exact task's integers have no cosine: 1.0, nothing to break a tie by
                                     float(min((s["cosine"] for _, s in summaries if "cosine" in s), default=1.0)),
                                     min(top1) if top1 else None,
                                     float(max(distances)) if distances else None))
        if on_layer is not None:
            on_layer(1)
    return most_sensitive_first(rows)


def most_sensitive_first(rows: Iterable[LayerSensitivity]) -> list[LayerSensitivity]:
    """Return `rows` ordered by the spec's judgement: the lowest score first, its ties by the farthest answer,
    then by the raw cosine."""
    return sorted(rows, key=lambda row: (row.score, -(row.distance_max or 0.0), row.cosine))
