"""The spec's values as the pipeline uses them: ModelSpec and its inputs, preprocessing and outputs.

trtpipe.spec.load builds them from a model.toml (or from an ONNX's inputs); nothing else parses a spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

Shape = tuple[int, ...]


class ShapeRange(NamedTuple):
    """One input's build profile: the smallest, the tuned-for and the largest shape (TensorRT's min/opt/max).

    A tuple, so it unpacks into IOptimizationProfile.set_shape(name, min, opt, max) as it is.
    """

    min: Shape
    opt: Shape
    max: Shape

    def __str__(self) -> str:
        return "/".join("x".join(map(str, shape)) for shape in self)


@dataclass
class InputSpec:
    """One model input: name, shape (-1 for a dynamic dimension) and numpy dtype."""

    name: str
    shape: list[int]
    dtype: str = "float32"
    # Where samples stack: 0 for most inputs, 1 for an RNN state laid out [layers, batch, hidden];
    # None for an input the whole batch shares (a sample rate), fed once, not stacked.
    batch_axis: int | None = 0
    # The value this input always has (a sample rate): control flow that only it and the shapes
    # decide is folded into the branch taken (graph.control). None: any value.
    value: float | None = None
    # The output this input is fed from on the next step (an RNN's state, a streaming model's caches):
    # validate runs each data file's samples in order as one stream, so that error builds up as it does
    # where the model runs. None: every sample's value is the data's.
    carry: str | None = None


@dataclass
class Preprocess:
    """How an image file becomes an input array."""

    size: tuple[int, int] = (224, 224)  # height, width after resizing or cropping
    resize: int | None = None  # shorter side before a centre crop to `size`; None resizes to `size`
    color: str = "RGB"  # RGB, BGR or L (grayscale)
    scale: float = 1.0 / 255.0
    mean: list[float] = field(default_factory=lambda: [0.0])
    std: list[float] = field(default_factory=lambda: [1.0])
    layout: str = "NCHW"
    dtype: str = "float32"
    resample: str = "bilinear"  # the resize's filter, by Pillow's name



NO_BLANK = -1  # [[outputs]] blank = "none": every class is a real tag, none is dropped


@dataclass
class OutputSpec:
    """One `[[outputs]]` entry: an output that validation judges, its task and how to read it.

    Keys: name, task, layout, batch_axis, and per task: conf, iou (NMS), classes, score_output,
    class_output, score_outputs, box_outputs (detection), margin (classification), neighbours (embedding), threshold (dense, face, heatmap detection), min_area,
    blank, step_axis, decode, padding_input, padding_value, judged_value, lengths, transitions, emissions (sequence), scale_output, offset_output, landmark_output, stride (face: a
    CenterNet-style face head, this entry its heatmap), transform, tolerance (generic).
    None means the task's default (trtpipe.quality.tasks says which and why).
    """

    name: str
    task: str = "generic"
    layout: str | None = None  # detection: yolov8, yolov5, yolox, separate, picodet; dense/generic: e.g. NCHW, NHWC
    conf: float | None = None
    iou: float | None = None
    classes: int | None = None
    score_output: str | None = None
    class_output: str | None = None
    # detection, layout picodet: each level's class-score and box-distribution outputs, finest stride first
    score_outputs: list[str] | None = None
    box_outputs: list[str] | None = None
    margin: float | None = None
    neighbours: int | None = None
    threshold: float | None = None
    min_area: int | None = None  # detection, layout heatmap: the fewest pixels a region has
    blank: int | None = None  # NO_BLANK: no class is padding (a tagger whose padding a mask input marks)
    step_axis: int | None = None
    # face: the heatmap's sibling maps, by role, and the cells' size in input pixels (None: the
    # input's size over the heatmap's)
    scale_output: str | None = None
    offset_output: str | None = None
    landmark_output: str | None = None
    stride: int | None = None
    decode: str | None = None  # sequence: ctc (repeats collapsed) or tags (one class per step)
    # tags: the input [batch, steps] whose padding marks the steps not judged (what a tagger emits there
    # means nothing), and the id that is padding; a bool input is a mask, padded where false.
    padding_input: str | None = None
    padding_value: int | None = None
    # or the one id whose steps alone are judged: a masked language model is read at its mask id alone.
    judged_value: int | None = None
    # any decode: the integer input or output [batch] holding each sample's count of real steps (a batch of
    # lines padded to the widest); the steps after it are not judged, as the model's own reader cuts them.
    lengths: str | None = None
    # viterbi: the transition file (resolved against the spec's folder at load), and what the output is:
    # scores added as they are (a CRF's emissions) or probabilities, whose logs are added.
    transitions: Path | None = None
    emissions: str | None = None
    # generic: "FILE.py:FUNCTION" (the file resolved against the spec's folder at load) that turns the output
    # into what the answer is read from (landmarks from a face model's parameters), and the distance within
    # which a sample's answer counts as FP32's (within_tolerance).
    transform: str | None = None
    tolerance: float | None = None
    # The axis samples stack on (1 for an RNN state [layers, batch, hidden]); None: the output has no
    # batch axis ([seq_len]) and the whole tensor is one sample per run.
    batch_axis: int | None = 0


@dataclass
class ModelSpec:
    """Everything the pipeline needs to know of a model beyond its ONNX file."""

    name: str
    root: Path
    # One of TASKS: the task of float outputs that `outputs` does not name. None: inferred from the
    # model's inputs and outputs the way `trtpipe init` guesses it (quality.tasks.make_tasks).
    task: str | None = None
    inputs: list[InputSpec] = field(default_factory=list)
    preprocess: Preprocess | None = None
    shapes: dict[str, ShapeRange] = field(default_factory=dict)  # [shapes], parsed when the spec is loaded
    calibration: Path | None = None
    validation: Path | None = None
    labels: Path | None = None
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)
    smooth: float | None = None  # SmoothQuant alpha for INT8 ('trtpipe smooth'); None: not smoothed
    exclude: list[str] = field(default_factory=list)  # nodes kept out of INT8/FP8 when --exclude is not given
    block_size: int | None = None  # INT4 weights' block rows ('awq', int4 builds); None: 128
    min_weights: int = 0  # INT8/FP8 layers with fewer weight elements stay unquantized (engine size)
    outputs: list[OutputSpec] = field(default_factory=list)  # [[outputs]]: empty judges every float output
    path: Path | None = None  # the model.toml this came from, for error messages
    # {dimension: [(input, axis), ...]} of the dimensions the ONNX names on more than one input (a time axis two
    # inputs share): every sample must give them one size. Read from the model (spec_for), not from the TOML.
    shared_dims: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def max_batch(self) -> int | None:
        """Return the largest batch every [shapes] profile admits, read on each input's batch_axis (a state
        [layers, batch, hidden] on axis 1); None without [shapes] or when no profiled input is batched."""
        axes = {spec.name: spec.batch_axis for spec in self.inputs}
        sizes = [shapes.max[axes.get(name, 0)] for name, shapes in self.shapes.items() if axes.get(name, 0) is not None]
        return min(sizes, default=None)

    def input(self, name: str) -> InputSpec:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise KeyError(name)
