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


# ---- damage to a runner's outputs ------------------------------------------------------------------
# The classes of damage a wrong build does, applied to what a real candidate (a typed ONNX in ONNX
# Runtime) gives back, so that validation judges them as it judges any candidate (validate.compare).
# Each function takes the candidate's outputs of one batch and gives them back damaged.

class DamagedRunner:
    """A runner whose every output batch passes through `damage(outputs, call)` (call: 0 for the first batch)."""

    def __init__(self, runner, damage):
        self.runner, self.damage, self.calls = runner, damage, 0
        self.name, self.outputs, self.inputs, self.measured = runner.name, runner.outputs, runner.inputs, runner.measured
        self.provider = getattr(runner, "provider", None)

    def __call__(self, arrays):
        outputs = {name: np.array(value) for name, value in self.runner(arrays).items()}
        damaged = self.damage(outputs, self.calls)
        self.calls += 1
        return damaged


def _changed(output: str, change):
    def damage(outputs, call):
        outputs[output] = change(outputs[output], call)
        return outputs
    return damage


def _index(values: np.ndarray, axis: int, which) -> tuple:
    index = [slice(None)] * values.ndim
    index[axis] = which
    return tuple(index)


def scaled(output: str, channels, factor: float, axis: int = 1):
    """`output`'s `channels` (an index or slice on `axis`) times `factor`."""
    def change(values, call):
        values[_index(values, axis, channels)] *= factor
        return values
    return _changed(output, change)


def offset(output: str, channels, amount: float, axis: int = 1):
    """`amount` added to `output`'s `channels` on `axis`."""
    def change(values, call):
        values[_index(values, axis, channels)] += amount
        return values
    return _changed(output, change)


def zeroed(output: str, channel, axis: int = 1):
    return scaled(output, channel, 0.0, axis)


def permuted(output: str, channels, axis: int = 1):
    """`output`'s `channels` (a slice on `axis`) rolled by one: each takes its neighbour's values (classes swapped)."""
    def change(values, call):
        where = _index(values, axis, channels)
        values[where] = np.roll(values[where], 1, axis=axis)
        return values
    return _changed(output, change)


def sides_moved(output: str, bins: int, sides, by: int):
    """Each of a box distribution `output`'s `sides` (0..3: left, top, right, bottom; [batch, cells, 4*bins])
    rolled `by` bins: that side's distance moved by `by` strides (a box shifted, grown or shrunk)."""
    def change(values, call):
        grouped = values.reshape(*values.shape[:-1], 4, bins)
        grouped[..., sides, :] = np.roll(grouped[..., sides, :], by, axis=-1)
        return grouped.reshape(values.shape)
    return _changed(output, change)


def together(*damages):
    """Every one of `damages`, in turn."""
    def damage(outputs, call):
        for each in damages:
            outputs = each(outputs, call)
        return outputs
    return damage


def relabelled(output: str, classes: int):
    """Each class index of an integer `output` (a detector's labels) moved to the next: classes swapped."""
    return _changed(output, lambda values, call: (values + 1) % classes)


def constant(output: str):
    """`output` the same everywhere: its first batch's mean."""
    level = {}

    def change(values, call):
        level.setdefault("value", float(np.nan_to_num(values).mean()))
        return np.full_like(values, level["value"])
    return _changed(output, change)


def nan_in_one_sample(output: str):
    """NaN in one element of the first sample of the first batch."""
    def change(values, call):
        if call == 0:
            values.reshape(len(values), -1)[0, values[0].size // 2] = np.nan
        return values
    return _changed(output, change)


def one_sample_turned(output: str, sample: int = 3, cosine: float = 0.9):
    """One sample of the first batch turned to `cosine` with its own output, its norm kept (one user's input
    ruined, NSNet2's INT8 suppressing a passage of speech): the other samples as they were."""
    def change(values, call):
        if call == 0:
            v = values[sample].astype(np.float64).ravel()
            noise = np.random.default_rng(0).normal(size=v.size)
            noise -= noise @ v / (v @ v) * v  # orthogonal to v
            turned = cosine * v + np.sqrt(1 - cosine ** 2) * np.linalg.norm(v) * noise / np.linalg.norm(noise)
            values[sample] = turned.reshape(values[sample].shape)
        return values
    return _changed(output, change)


def rolled(output: str):
    """Each sample gets the next sample's `output`: the batch's outputs rolled by one."""
    return _changed(output, lambda values, call: np.roll(values, 1, axis=0))


def one_face_zeroed(output: str, radius: int = 3):
    """A heatmap `output` [batch, 1, h, w] set to 0 within `radius` cells of the first sample's highest cell: one
    face dropped (CenterFace marks a face on several cells around its centre; NMS keeps one)."""
    def change(values, call):
        if call == 0:
            y, x = np.unravel_index(int(values[0, 0].argmax()), values.shape[2:])
            values[0, 0, max(y - radius, 0):y + radius + 1, max(x - radius, 0):x + radius + 1] = 0.0
        return values
    return _changed(output, change)


def one_step_changed(output: str, blank: int = 0):
    """In the first sample, the first step whose best class is not `blank` now reads another class: a changed character."""
    def change(values, call):
        if call == 0:
            steps = values[0]  # [steps, classes]
            step = int(np.flatnonzero(steps.argmax(-1) != blank)[0])
            best = int(steps[step].argmax())
            other = next(c for c in range(steps.shape[-1]) if c not in (best, blank))
            steps[step, other] = steps[step, best] + 1.0
        return values
    return _changed(output, change)
