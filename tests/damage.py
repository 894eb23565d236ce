"""Candidates damaged on purpose, so that a test can show validation fails them: one layer's
quantization scale off by a factor, output channels zeroed, scaled or offset, boxes shifted."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def scale_layer(model: onnx.ModelProto, node_name: str, factor: float) -> onnx.ModelProto:
    """Return a copy of a Q/DQ `model` whose activation scale into `node_name` is multiplied by `factor`
    (its Q and DQ share the scale, so the layer quantizes on a grid `factor` times too coarse or fine)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    producers = {out: node for node in model.graph.node for out in node.output}
    node = next(n for n in model.graph.node if n.name == node_name)
    dq = producers[node.input[0]]
    assert dq.op_type == "DequantizeLinear", f"{node_name}'s input is not quantized"
    init = next(i for i in model.graph.initializer if i.name == dq.input[1])
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * np.asarray(factor, numpy_helper.to_array(init).dtype),
                                          init.name))
    return model


def _rewire_output(model: onnx.ModelProto, output: str, op: str, constant: np.ndarray) -> onnx.ModelProto:
    """Return a copy of `model` whose `output` becomes `op(output, constant)`."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    raw = f"{output}__undamaged"
    for node in model.graph.node:
        node.output[:] = [raw if o == output else o for o in node.output]
        node.input[:] = [raw if i == output else i for i in node.input]
    model.graph.initializer.append(numpy_helper.from_array(constant.astype(np.float32), f"{output}__damage"))
    model.graph.node.append(helper.make_node(op, [raw, f"{output}__damage"], [output], name=f"{output}__damage_{op}"))
    return model


def zero_channel(model: onnx.ModelProto, output: str, channel: int, channels: int, axis_rank: int = 3) -> onnx.ModelProto:
    """Return `model` with channel `channel` (axis 1) of `output` multiplied by zero."""
    mask = np.ones(channels, np.float32)
    mask[channel] = 0
    return _rewire_output(model, output, "Mul", mask.reshape((1, channels) + (1,) * (axis_rank - 2)))


def scale_channels(model: onnx.ModelProto, output: str, channels: int, factors: dict[int, float], axis_rank: int = 3) -> onnx.ModelProto:
    """Return `model` with the channels of `output` (axis 1) in `factors` multiplied by their factor."""
    scale = np.ones(channels, np.float32)
    for channel, factor in factors.items():
        scale[channel] = factor
    return _rewire_output(model, output, "Mul", scale.reshape((1, channels) + (1,) * (axis_rank - 2)))


def offset_channel(model: onnx.ModelProto, output: str, channel: int, offset: float, channels: int, axis_rank: int = 3) -> onnx.ModelProto:
    """Return `model` with `offset` added to channel `channel` (axis 1) of `output`."""
    shift = np.zeros(channels, np.float32)
    shift[channel] = offset
    return _rewire_output(model, output, "Add", shift.reshape((1, channels) + (1,) * (axis_rank - 2)))


def favour_class(model: onnx.ModelProto, output: str, cls: int, amount: float, classes: int) -> onnx.ModelProto:
    """Return `model` with `amount` added to class `cls` on the last axis of `output` (a sequence's per-step scores)."""
    shift = np.zeros(classes, np.float32)
    shift[cls] = amount
    return _rewire_output(model, output, "Add", shift)


def shift_boxes(model: onnx.ModelProto, output: str, pixels: float, channels: int) -> onnx.ModelProto:
    """Return a YOLOv8-layout `model` whose box centres (channels 0 and 1) move by `pixels` right and down."""
    offset = np.zeros(channels, np.float32)
    offset[:2] = pixels
    return _rewire_output(model, output, "Add", offset.reshape(1, channels, 1))
