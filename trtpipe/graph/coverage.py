"""How much of a model's weights a typed ONNX quantizes: the weight elements of Conv, ConvTranspose,
MatMul and Gemm that reach the layer through a DequantizeLinear, against all of them and against the
weights of the recurrent layers (GRU, LSTM, RNN), which Q/DQ does not reach: a GRU encoder whose only
quantized layer is a small Gemm must not read as fully quantized.

A weight is a constant operand of one of those layers: an initializer or a Constant node, seen
through the Transpose/Reshape/Cast/... chains exporters put in front of it, on either side of a
MatMul. It counts as quantized when the chain runs through a DequantizeLinear of a constant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trtpipe.calibrators.graph import QUANTIZED_OPS  # the layers Q/DQ quantizes, and where their weight may sit
from trtpipe.graph import toolkit

# Ops a constant passes through on its way into a layer without becoming an activation.
PASS_THROUGH = ("Transpose", "Reshape", "Cast", "Identity", "Unsqueeze", "Squeeze", "Flatten")

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


def _constant_sizes(model) -> dict[str, int]:
    sizes = {init.name: int(np.prod(init.dims)) for init in model.graph.initializer}
    for node in model.graph.node:
        tensor = toolkit.attribute(node, "value") if node.op_type == "Constant" else None
        if tensor is not None:
            sizes[node.output[0]] = int(np.prod(tensor.dims))
    return sizes


def weight_coverage(model) -> WeightCoverage:
    """Return how many weight elements of `model`'s weighted layers run through Q/DQ."""
    sizes = _constant_sizes(model)
    producer = toolkit.producers(model.graph)

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
    for node in model.graph.node:
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
    return WeightCoverage(quantized, total, layers, quantized_layers)
