"""How much of a model's weights a typed ONNX quantizes: the weight elements of Conv, ConvTranspose,
MatMul and Gemm that reach the layer through a DequantizeLinear, against all of them and against the
weights of the recurrent layers (GRU, LSTM, RNN), which Q/DQ does not reach: a GRU encoder whose only
quantized layer is a small Gemm must not read as fully quantized. Layers inside a subgraph (the body of a
Loop or Scan, the branches of an If) count too: Q/DQ insertion does not enter one. SLANet's decoder, 10
MatMuls in a Loop whose weights come in as the Loop's inputs, was left out and its INT8 read 94.8%.

A weight is a constant operand of one of those layers: an initializer or a Constant node, seen
through the Transpose/Reshape/Cast/... chains exporters put in front of it, on either side of a
MatMul. It counts as quantized when the chain runs through a DequantizeLinear of a constant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trtpipe.calibrators.graph import QUANTIZED_OPS  # the layers Q/DQ quantizes, and where their weight may sit
from trtpipe.graph import toolkit

# Ops a constant passes through on its way into a layer without becoming an activation: a Cast changes its
# type, not which weight it is.
PASS_THROUGH = (*toolkit.MOVES_VALUES, "Cast")

# Layers that hold weights Q/DQ leaves in float: the input slots of W and R (the input and recurrence weights).
RECURRENT_WEIGHT_SLOTS = {"GRU": (1, 2), "LSTM": (1, 2), "RNN": (1, 2)}


@dataclass(frozen=True)
class WeightCoverage:
    """Weight elements of the model's Conv/ConvTranspose/MatMul/Gemm and recurrent layers, and those under Q/DQ."""

    quantized: int
    total: int
    layers: int  # layers that have a constant weight
    quantized_layers: int

    @property
    def fraction(self) -> float | None:
        return self.quantized / self.total if self.total else None


def _constant_sizes(graph) -> dict[str, int]:
    sizes = {init.name: int(np.prod(init.dims)) for init in graph.initializer}
    for node in graph.node:
        tensor = toolkit.attribute(node, "value") if node.op_type == "Constant" else None
        if tensor is not None:
            sizes[node.output[0]] = int(np.prod(tensor.dims))
    return sizes


def _subgraphs(node):
    """Yield the graphs a node holds (a Loop's or Scan's body, an If's branches)."""
    for attribute in node.attribute:
        if attribute.type == attribute.GRAPH:
            yield attribute.g
        elif attribute.type == attribute.GRAPHS:
            yield from attribute.graphs


def weight_coverage(model) -> WeightCoverage:
    """Return how many weight elements of `model`'s weighted layers run through Q/DQ."""
    counts = [0, 0, 0, 0]  # quantized, total, layers, quantized layers
    _count(model.graph, _constant_sizes(model.graph), counts)
    return WeightCoverage(*counts)


def _count(graph, sizes: dict[str, int], counts: list[int]) -> None:
    """Add the weights of `graph`'s layers to `counts`, and those of the subgraphs its nodes hold; `sizes`
    holds the constants the graph sees, its own and its enclosing graphs'."""
    producer = toolkit.producers(graph)

    def trace(name: str) -> tuple[int, bool] | None:
        """Return (elements, quantized) for the constant behind `name`, or None for an activation."""
        dequantized = False
        for _ in range(16):  # chains are short; the bound guards against a malformed cycle
            if name in sizes:
                return sizes[name], dequantized
            node = producer.get(name)
            if node is None or node.op_type not in PASS_THROUGH + ("DequantizeLinear",) or not node.input:
                return None
            dequantized = dequantized or node.op_type == "DequantizeLinear"
            name = node.input[0]
        return None

    quantized = total = layers = quantized_layers = 0
    for node in graph.node:
        for body in _subgraphs(node):
            # A weight may come into a Loop's body as one of its loop-carried values that each step passes
            # on unchanged (Paddle2ONNX's SLANet: the decoder's 16 weights), from the third input on (the
            # trip count and the condition come first, in the body as on the node).
            passed = {}
            if node.op_type == "Loop":
                for k, (inner, outer) in enumerate(zip(body.input[2:], node.input[2:])):
                    found = trace(outer)
                    if found is not None and k + 1 < len(body.output) and body.output[k + 1].name == inner.name:
                        passed[inner.name] = found[0]
            _count(body, {**sizes, **passed, **_constant_sizes(body)}, counts)
        if node.op_type in RECURRENT_WEIGHT_SLOTS:
            traced = [trace(node.input[slot]) for slot in RECURRENT_WEIGHT_SLOTS[node.op_type]
                      if slot < len(node.input) and node.input[slot]]
            weights = [found for found in traced if found is not None]
            if weights:
                total += sum(elements for elements, _ in weights)
                quantized += sum(elements for elements, is_quantized in weights if is_quantized)
                layers += 1
                quantized_layers += all(is_quantized for _, is_quantized in weights)
            continue
        if node.op_type not in QUANTIZED_OPS:
            continue
        _, slots = QUANTIZED_OPS[node.op_type]
        for slot in slots:
            if slot >= len(node.input) or not node.input[slot]:
                continue
            found = trace(node.input[slot])
            if found is None:
                continue
            elements, is_quantized = found
            total += elements
            layers += 1
            if is_quantized:
                quantized += elements
                quantized_layers += 1
            break  # one weight per layer: MatMul's second operand, else its first
    for k, value in enumerate((quantized, total, layers, quantized_layers)):
        counts[k] += value
