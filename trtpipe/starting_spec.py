"""A starting `model.toml` for a model nobody has described yet: its inputs, shapes and a guessed task.

`trtpipe init` writes it; every guess carries a comment that says what it was guessed from, so the
user knows which lines to check. The text it returns loads with `trtpipe.spec.load_spec`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from trtpipe.data import (
    CHUNK_BYTES,
    IMAGE_SUFFIXES,
    check_finite,
    check_shared_dims,
    empty_sample,
    list_files,
    load_arrays,
    opened_image,
    sample_axis,
)
from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio
from trtpipe.spec import DTYPES, is_decision, is_float, shared_dims, toml_string

# Batch sizes of the guessed build profile: MIN/OPT/MAX as trtexec writes them.
PROFILE_BATCHES = (1, 8, 32)
# What a carried state's name says (silero's state, GTCRN's conv_cache, FSMN-VAD's in_cache0, past key/values).
STATE_NAME = re.compile(r"cache|state|hidden|past|memory", re.IGNORECASE)
# What an embedding's name says (a speaker embedder's `embedding`, an image encoder's `features`, BERT's
# `pooler_output`), and a list of detections' (`boxes`, `det_boxes`, `bboxes`): read where the graph says nothing.
EMBEDDING_NAME = re.compile(r"embed|feature|descriptor|pooler|vector", re.IGNORECASE)
BOXES_NAME = re.compile(r"box|det", re.IGNORECASE)
CLASS_NAME = re.compile(r"class|label|cls|categor", re.IGNORECASE)


@dataclass
class TensorFacts:
    """What the ONNX says of one input or output: name, dims (-1 where dynamic) and numpy dtype."""

    name: str
    shape: list[int]
    dtype: str
    ranked: bool = True  # False: the ONNX gives no shape (any rank); `shape` is then [] until the data tells
    # What the graph says of an output's role: "nms", rows that NonMaxSuppression selected (detections, not one
    # row a sample); "l2", unit vectors (an L2 normalization makes it: an embedding); "probability", made by a
    # Sigmoid or Softmax (SQUASHING); "": nothing
    made_by: str = ""


@dataclass
class TaskGuess:
    """A task and the one-line reason it was guessed; `keys`: [[outputs]] keys the first float output needs
    (a face head's: which output is the heatmap, `name`, and which the maps it reads)."""

    task: str
    why: str
    keys: dict[str, int | str] = field(default_factory=dict)


# 4 box coordinates (and an objectness score) plus classes: LVIS's 1,203 classes are the most a
# detector exported today is trained on; a wider last axis is a recognizer's alphabet.
MOST_DETECTION_CHANNELS = 5 + 1203
# A token tagger's tags per token (BIO named entities, word or morpheme boundaries) are this many at
# most; an encoder's hidden state per token is wider (MiniLM 384, tiny BERTs 128).
MOST_TAGS = 64
# An image has at most this many channels (grey, RGB, RGBA); a rank-4 input with more is a spectrum or
# features, and an output of its shape no per-pixel map.
MOST_IMAGE_CHANNELS = 4
# A text line: recognizers take images at most this high (PP-OCR 48, CRNNs 32, captchas 60-64), and
# at least twice as wide.
TEXT_LINE_HEIGHT = 64


def tensor_facts(model) -> tuple[list[TensorFacts], list[TensorFacts]]:
    """Return the model's graph inputs (initializers left out) and outputs."""
    from onnx import helper

    initializers = {init.name for init in model.graph.initializer}

    def facts(value) -> TensorFacts:
        tensor = value.type.tensor_type
        # A dim_value of 0 is how some exporters write a dynamic dimension; the spec writes those -1.
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tensor.shape.dim]
        dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type)) if tensor.elem_type else "float32"
        return TensorFacts(value.name, shape, dtype, tensor.HasField("shape"))

    inputs = [facts(v) for v in model.graph.input if v.name not in initializers]
    roles = output_roles(model.graph)
    return inputs, [replace(facts(v), made_by=roles.get(v.name, "")) for v in model.graph.output]


# Ops that pass a tensor's values through, reshaped or retyped: what lies between an output and the op that
# gives it its role (an L2 normalization's Div, then a Reshape or Flatten).
PASS_THROUGH = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast", "Expand", "Clip", "Max", "Add"}


# Ops whose outputs are probabilities (0 to 1): a one-channel map made by one is a mask, others are values.
SQUASHING = ("Sigmoid", "HardSigmoid", "Softmax")


def output_roles(graph) -> dict[str, str]:
    """Return {output: "nms", "l2" or "probability"} for the outputs whose role the graph shows
    (TensorFacts.made_by)."""
    producer = {name: node for node in graph.node for name in node.output}

    def source(name: str, depth: int = 6):
        """The first node up from `name` that is not a pass-through op (first inputs followed), or None."""
        node = producer.get(name)
        while node is not None and node.op_type in PASS_THROUGH and node.input and depth:
            node, depth = producer.get(node.input[0]), depth - 1
        return node

    def ancestors_hold(name: str, op_type: str) -> bool:
        seen, todo = set(), [name]
        while todo:
            node = producer.get(todo.pop())
            if node is None or id(node) in seen:
                continue
            if node.op_type == op_type:
                return True
            seen.add(id(node))
            todo += [i for i in node.input if i]
        return False

    def l2_normalized(name: str) -> bool:
        node = source(name)
        if node is not None and node.op_type == "LpNormalization":
            return next((a.i for a in node.attribute if a.name == "p"), 2) == 2
        if node is None or node.op_type != "Div" or len(node.input) < 2:
            return False
        norm = source(node.input[1])  # x / max(||x||, eps), as torch's F.normalize exports it
        if norm is not None and norm.op_type == "Sqrt" and norm.input:
            norm = source(norm.input[0])
            return norm is not None and norm.op_type in ("ReduceSum", "ReduceSumSquare")
        return norm is not None and norm.op_type == "ReduceL2"

    roles = {}
    for output in graph.output:
        made = source(output.name)
        if ancestors_hold(output.name, "NonMaxSuppression"):
            roles[output.name] = "nms"
        elif l2_normalized(output.name):
            roles[output.name] = "l2"
        elif made is not None and made.op_type in SQUASHING:
            roles[output.name] = "probability"
    return roles


def guess_task(inputs: list[TensorFacts], outputs: list[TensorFacts], ragged: bool = False,
               sized: dict[str, list[int]] | None = None) -> TaskGuess:
    """Return the task the shapes suggest; 'generic' (cosine and SNR on every output) when none fits.

    `ragged`: the data's samples are of their own lengths, so per-token states are no one vector a sample.
    `sized`: the image input's shape and the outputs' at the size of the data's images (_shapes_at_size),
    where the ONNX leaves their dims dynamic.
    """
    floats = [o for o in outputs if is_float(o.dtype)]
    if not floats:
        return TaskGuess("generic", "no float output to judge by a task")
    first = floats[0]
    if detections(first):
        how = ("made from NonMaxSuppression's selection" if first.made_by == "nms"
               else "named as boxes are, of 4 coordinates")
        keys = detection_keys(first, outputs)
        if keys is not None:
            return TaskGuess("detection", f"output '{first.name}' [{'x'.join(map(_dim, first.shape))}] is {how}: the "
                                          "model's own detections after NMS, matched box to box, each run a sample", keys)
        return TaskGuess("generic", f"output '{first.name}' [{'x'.join(map(_dim, first.shape))}] is {how}: a list "
                                    "of detections after NMS, one row a box, not a sample; no task reads such a "
                                    "list, so its values are judged, the whole of each run's as one")
    token_input = next((i for i in inputs if i.dtype.startswith("int") and len(i.shape) == 2), None)
    states = carried_states(inputs, outputs)
    image = next((i for i in inputs if len(i.shape) == 4 and i.name not in states), None)
    if token_input and len(first.shape) == 3 and first.shape[1] < 0 and 2 <= first.shape[2] <= MOST_TAGS:
        return TaskGuess("sequence", f"integer token inputs and output '{first.name}' [{'x'.join(map(_dim, first.shape))}]: "
                                     "a few tag scores per token, a tagger",
                         _padding_keys(inputs, token_input))
    if token_input and len(first.shape) in (2, 3) and first.shape[1] < 0 and ragged:
        return TaskGuess("generic", f"output '{first.name}' holds a value or state per token, and the samples are of "
                                    "their own lengths: no one vector a sample for an embedding's neighbours",
                         {"layout": "NTC"[:len(first.shape)]})
    if token_input and len(first.shape) in (2, 3):
        return TaskGuess("embedding", f"integer token inputs and a {len(first.shape)}-D float output '{first.name}'")
    if len(first.shape) == 2 and (first.made_by == "l2" or EMBEDDING_NAME.search(first.name)):
        how = "L2-normalized (unit vectors)" if first.made_by == "l2" else "named as an embedding is"
        return TaskGuess("embedding", f"output '{first.name}' [batch, {_dim(first.shape[1])}] is {how}: "
                                      "one vector a sample, compared by cosine and nearest neighbours")
    # A signal of its own length in (audio [batch, samples], a spectrum [batch, frames, bins]) and [batch, ?] or
    # [batch, ?, C] out: a value or a vector per step of it (a pitch tracker's frames, a denoiser's gain per bin),
    # not a score per class or channels on axis 1. SwiftF0's pitch [1, frames] was guessed a classifier of ?
    # classes; NSNet2's gains [batch, frames, 513] were read with their frames as channels, which calibrate's
    # check refused once two batches held recordings of other lengths.
    signal = next((i for i in inputs if i.dtype.startswith("float") and len(i.shape) >= 2 and -1 in i.shape[1:]
                   and i.name not in states), None)
    if len(first.shape) in (2, 3) and first.shape[1] == -1 and signal is not None and image is None:
        what = "a value per step" if len(first.shape) == 2 else "a vector of values per step"
        return TaskGuess("generic", f"output '{first.name}' is [{'x'.join(map(_dim, first.shape))}] beside input "
                                    f"'{signal.name}' [{'x'.join(map(_dim, signal.shape))}] of its own length: {what}, "
                                    "not a score per class", {"layout": "NTC"[:len(first.shape)]})
    if len(first.shape) == 2 and (first.shape[1] == -1 or first.shape[1] >= 2):
        return TaskGuess("classification", f"output '{first.name}' is [batch, {_dim(first.shape[1])}]: one score per class")
    if len(first.shape) == 3 and image is not None:
        return _rank3_guess(first, image, floats)
    from trtpipe.quality.tasks.face import face_roles

    roles = face_roles(floats) if image is not None else None
    if roles is not None:
        return TaskGuess("face", f"image input and maps of one size with 1, 2, 2 and 10 channels, as a CenterNet-style "
                                 f"face head writes heatmap '{roles['name']}', box scales, offsets and 5 landmarks; "
                                 "check which 2-channel map is the scale", roles)
    if len(first.shape) == 4 and image is not None and _same_size(first, image, sized or {}):
        channels = _layout(image)[1]
        if channels > MOST_IMAGE_CHANNELS:  # GTCRN's STFT frame [1, 257, 1, 2] and its enhanced frame
            return TaskGuess("generic", f"input '{image.name}' [{'x'.join(map(_dim, image.shape))}] has {channels} "
                                        f"channels, no image's: output '{first.name}' of its shape is no per-pixel map")
        nchw = _layout(image)[0]
        if first.shape[1 if nchw else 3] == 1 and first.made_by != "probability":
            # terrain-cm's denoised heightfield [batch, 1, 128, 128] ends in a Clip to -1..1: "dense" judged the
            # IoU of its cells above 0.5
            return TaskGuess("generic", f"output '{first.name}' has the input's height and width and one channel "
                                        "that no Sigmoid or Softmax makes: a value per pixel (a height, a depth, an "
                                        "image), not a mask")
        return TaskGuess("dense", f"output '{first.name}' has the input's height and width: a per-pixel map")
    return TaskGuess("generic", f"no task recognised from output '{first.name}' {first.shape}")


def _same_size(output: TensorFacts, image: TensorFacts, sized: dict[str, list[int]]) -> bool:
    """Return whether `output` has the image input's height and width: at the data's image size where shape
    inference gave the output's dims there, else by the ONNX's own dims. Two dynamic dims are no evidence of
    one size: LORE's table-cell maps, [batch, 2, h, w] at a quarter of [batch, 3, H, W], were read as a
    per-pixel map; PP-OCR's detector names its map's dims apart from its input's and is one."""
    if image.name in sized and len(sized.get(output.name, ())) == 4 and all(d > 0 for d in sized[output.name][2:]):
        return sized[output.name][2:] == sized[image.name][2:]
    return output.shape[2:] == image.shape[2:]


def _shapes_at_size(model, image: TensorFacts, size: list[int]) -> dict[str, list[int]]:
    """Return {name: shape} of the image input fixed at one sample of `size` and of each output as ONNX
    shape inference then gives it (-1 where it cannot), or {} when inference fails."""
    from trtpipe.graph import toolkit

    shape = [1, *_image_dims(image.shape, size)]
    inferred = toolkit.inferred_shapes(model, {image.name: shape})
    if not inferred:
        return {}
    return {image.name: shape, **{o.name: inferred[o.name][0] for o in model.graph.output if o.name in inferred}}


def detections(output: TensorFacts) -> bool:
    """Return True when the rows of `output` are detections after NMS rather than samples: NonMaxSuppression
    selected them (the graph says so), or, where no graph is read, an output named as boxes are [?, 4]."""
    if output.made_by == "nms":
        return len(output.shape) <= 2
    return len(output.shape) == 2 and output.shape[0] < 0 and output.shape[1] == 4 and bool(BOXES_NAME.search(output.name))


def detection_keys(boxes: TensorFacts, outputs: list[TensorFacts]) -> dict[str, str] | None:
    """Return the [[outputs]] keys that read `boxes` (detections after NMS) as layout detections: its scores
    and classes, a value a box, beside it ([?] outputs NMS made too, or of its rows), or after the box in
    its own rows ([?, 5 or 6]); None when no scores are found."""
    keys = {"layout": "detections", "batch_axis": "none"}
    if boxes.shape and boxes.shape[-1] in (5, 6):
        return keys
    if not boxes.shape or boxes.shape[-1] != 4:
        return None
    beside = [o for o in outputs if o.name != boxes.name and len(o.shape) == 1
              and (o.made_by == "nms" or o.shape[0] == boxes.shape[0] < 0)]
    scores = next((o for o in beside if is_float(o.dtype) and not CLASS_NAME.search(o.name)), None)
    if scores is None:
        return None
    keys["score_output"] = scores.name
    classes = next((o for o in beside if o is not scores and (CLASS_NAME.search(o.name) or not is_float(o.dtype))), None)
    if classes is not None:
        keys["class_output"] = classes.name
    return keys


def carried_states(inputs: list[TensorFacts], outputs: list[TensorFacts]) -> set[str]:
    """Return the names of the inputs a streaming model carries: of fixed shape, beside other inputs, named
    as a state is, and written back by an output of that shape (its dynamic dims any size), as FSMN-VAD's
    caches `in_cache0` [1, 128, 19, 1] come back as [1, 128, ?, 1]. A state is no image, whatever its rank.
    The name is asked too: an image-to-image model's picture comes back in its own shape as well (a
    denoiser's [1, 3, 256, 256] beside its noise level)."""
    if len(inputs) < 2:
        return set()
    return {i.name for i in inputs if i.shape and all(d > 0 for d in i.shape) and STATE_NAME.search(i.name)
            and any(len(o.shape) == len(i.shape) and all(od < 0 or od == d for od, d in zip(o.shape, i.shape))
                    for o in outputs)}


def _padding_keys(inputs: list[TensorFacts], token_input: TensorFacts) -> dict[str, int | str]:
    """Return a tagger's keys: a bool mask [batch, steps] marks its padding where there is one, else id 0."""
    mask = next((i for i in inputs if i.dtype == "bool" and len(i.shape) == 2), None)
    if mask is not None:
        return {"decode": "tags", "padding_input": mask.name}
    return {"decode": "tags", "padding_input": token_input.name, "padding_value": 0}


def _rank3_guess(first: TensorFacts, image: TensorFacts, floats: list[TensorFacts]) -> TaskGuess:
    """Tell a YOLO-style detector ([batch, 4+classes, boxes] or [batch, boxes, 5+classes]) from a
    recognizer's per-step class scores ([batch, steps, classes], or [steps, batch, classes]) by the
    shapes alone; generic when neither fits."""
    batch, a, b = first.shape
    shape = "x".join(map(_dim, first.shape))
    _nchw, _channels, (height, width) = _layout(image)
    text_line = 0 < height <= TEXT_LINE_HEIGHT and (width < 0 or width >= 2 * height)
    if image.shape[0] < 0 and batch > 0 and a < 0:  # the batch is on axis 1: time first, as CRNNs export
        return TaskGuess("sequence", f"output '{first.name}' is [{shape}]: the input's dynamic batch on axis 1, "
                                     "per-step class scores first", {"batch_axis": 1, "step_axis": 0})
    if sum(len(o.shape) == 3 for o in floats) > 1:
        return TaskGuess("generic", f"{sum(len(o.shape) == 3 for o in floats)} outputs of rank 3, as a head split by "
                                    "level writes them: no one tensor of boxes to decode")
    if 5 <= a <= MOST_DETECTION_CHANNELS and (b < 0 or b > a) and not text_line:
        return TaskGuess("detection", f"image input and output '{first.name}' [{shape}], as YOLOv8 writes "
                                      "[batch, 4+classes, boxes]; check the layout")
    if 6 <= b <= MOST_DETECTION_CHANNELS and (a < 0 or a > b) and not text_line:
        return TaskGuess("detection", f"image input and output '{first.name}' [{shape}], as YOLOv5/YOLOX write "
                                      "[batch, boxes, 5+classes]; check the layout")
    if b > 1 and (text_line or b > MOST_DETECTION_CHANNELS):
        why = f"a text-line input ({height} high)" if text_line else f"{b} classes, more than a detector's"
        return TaskGuess("sequence", f"output '{first.name}' [{shape}] with {why}: per-step class scores, "
                                     "decoded as CTC; check blank")
    return TaskGuess("generic", f"no task recognised from output '{first.name}' [{shape}]")


def _dim(d: int) -> str:
    return "?" if d < 0 else str(d)


def profile_shapes(spec_shape: list[int], sample_shape: tuple[int, ...] | None, batch_axis: int | None = 0,
                   span: tuple[tuple[int, ...], tuple[int, ...]] | None = None) -> str | None:
    """Return "MIN/OPT/MAX" for a dynamic input, dims other than the batch taken from a data sample; None if unknown.

    `sample_shape`: one sample's dims, without the batch axis (OPT). `span`: the smallest and largest
    dims of all the samples read, for MIN and MAX (phrases of their own lengths); None: the sample's.
    A fixed batch (an export for batch 1) stays what it is in all three: a profile is refused that
    does not fit the input's own shape. `batch_axis` None: an input the batch shares, its dims all
    from the sample.
    """
    dims = [d for i, d in enumerate(spec_shape) if i != batch_axis]
    if any(d < 0 for d in dims) and (sample_shape is None or len(sample_shape) != len(dims)
                                     or any(s < 1 for s in sample_shape)):
        return None
    smallest, largest = span if span is not None else (sample_shape, sample_shape)
    profile = [[s if d < 0 else d for d, s in zip(dims, seen or dims)] for seen in (smallest, sample_shape, largest)]
    if batch_axis is None:
        return "/".join("x".join(map(str, d)) for d in profile)
    batches = PROFILE_BATCHES if spec_shape[batch_axis] < 0 else (spec_shape[batch_axis],) * 3
    return "/".join("x".join(str(d) for d in [*dims[:batch_axis], batch, *dims[batch_axis:]])
                    for batch, dims in zip(batches, profile))


def _first_arrays(directory: Path, inputs: list[TensorFacts]):
    """Return {input: array} of the first .npy or .npz file (a .npy holds the one input's samples)."""
    for path in list_files(directory):
        if path.suffix.lower() == ".npy" and len(inputs) == 1:
            return _fitting(path, inputs, {inputs[0].name: load_arrays(path)[""]})
        if path.suffix.lower() == ".npz":
            arrays = load_arrays(path)
            missing = [t.name for t in inputs if t.name not in arrays]
            if missing:
                raise TrtpipeError(f"{path}: no array for input '{missing[0]}' (it holds {', '.join(arrays) or 'none'}); "
                                   "store samples as .npz keyed by input name")
            return _fitting(path, inputs, {t.name: arrays[t.name] for t in inputs})
    return {}


# init reads at most this many data files for the sizes of dynamic dims: enough to see a spread of
# lengths, few enough to stay quick on a large directory.
FILES_READ_FOR_SHAPES = 256


def _sample_spans(directory: Path, inputs: list[TensorFacts], axes: dict[str, int | None],
                  shared: dict[str, list[tuple[str, int]]]) -> dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """Return {input: (smallest, median, largest dims)} of one sample, over the first .npy/.npz files
    (FILES_READ_FOR_SHAPES), for the inputs whose samples are all of one rank; others are left out. A file
    whose inputs disagree on a dimension the model names on both (`shared`) is refused, as every command
    after init refuses it."""
    seen: dict[str, list[tuple[int, ...]]] = {t.name: [] for t in inputs}
    for path in [p for p in list_files(directory) if p.suffix.lower() in (".npy", ".npz")][:FILES_READ_FOR_SHAPES]:
        if path.suffix.lower() == ".npy" and len(inputs) != 1:
            continue
        held = load_arrays(path)
        arrays = {t.name: held.get("" if path.suffix.lower() == ".npy" else t.name) for t in inputs}
        dims_of = {t.name: _sample_dims(t, arrays[t.name], axes.get(t.name, 0)) for t in inputs}

        def size(name: str, axis: int, dims_of=dims_of) -> int | None:  # a model axis in one sample's dims
            at = sample_axis(axis, axes.get(name, 0))
            return None if dims_of[name] is None or at is None else dims_of[name][at]

        check_shared_dims(path, shared, size)
        for tensor in inputs:
            array, dims = arrays[tensor.name], dims_of[tensor.name]
            if dims is not None and 0 in dims:
                raise empty_sample(path, tensor.name, array.shape)
            if array is not None:
                # what every command after init refuses; a lone sample counts as a batch of one. The first
                # CHUNK_BYTES of samples only: a .npy larger than memory is mapped, and read no further.
                batch = array if array.ndim == len(tensor.shape) else array[None]
                rows = max(1, CHUNK_BYTES // max(batch[:1].nbytes, 1)) if batch.ndim else 1
                check_finite(path, tensor.name, batch[:rows] if batch.ndim else batch, tensor.dtype)
            if dims is not None:
                seen[tensor.name].append(dims)
    spans = {}
    for name, shapes in seen.items():
        if shapes and len({len(s) for s in shapes}) == 1:
            columns = np.array(shapes)
            median = tuple(int(v) for v in np.sort(columns, axis=0)[len(shapes) // 2])
            spans[name] = (tuple(columns.min(axis=0).tolist()), median, tuple(columns.max(axis=0).tolist()))
    return spans


def _fitting(path: Path, inputs: list[TensorFacts], arrays: dict) -> dict:
    """Return `arrays` when each could be samples of its input (numbers, of its rank or one less), else raise naming the file."""
    for tensor in inputs:
        array = arrays[tensor.name]
        if array.dtype.kind not in "biuf":
            raise TrtpipeError(f"{path}: input '{tensor.name}' is {array.dtype}, not numbers; "
                               f"save the samples as {tensor.dtype}")
        if array.ndim not in (len(tensor.shape) - 1, len(tensor.shape)):
            raise TrtpipeError(f"{path}: input '{tensor.name}' has shape {list(array.shape)}, the model expects "
                               f"{tensor.shape} (-1 is any size); re-export the data in that shape")
    return arrays


def _batch_axis(tensor: TensorFacts, array, count: int | None, fixed: bool = False) -> int | None:
    """Return the axis samples stack on: 0, else the dynamic axis whose size in the data is the sample
    count (an RNN state [layers, batch, hidden]); None for a scalar, which the batch shares. `fixed`:
    no input has a dynamic dim and the batch is fixed at one, so a state's batch is its first axis of
    size 1 that holds the sample count in the data (GTCRN's caches [2, 1, 16, 16, 33]), where axis 0 is not 1."""
    if not tensor.shape:
        return None
    if fixed and array is not None and array.ndim == len(tensor.shape) and tensor.shape[0] != 1:
        return next((i for i, d in enumerate(tensor.shape) if d == 1 and array.shape[i] == (count or 1)), 0)
    if tensor.shape[0] < 0 or array is None or array.ndim != len(tensor.shape) or count is None:
        return 0
    return next((i for i, d in enumerate(tensor.shape) if d < 0 and array.shape[i] == count), 0)


def _sample_feeds(inputs: list[TensorFacts], arrays: dict, axes: dict[str, int | None], index: int = 0,
                  count: int = 1) -> dict:
    """Return the feeds of the first file's sample `index`, `count` times over on each input's batch axis."""
    out = {}
    for tensor in inputs:
        array, axis = np.asarray(arrays[tensor.name]), axes[tensor.name]
        if axis is not None:
            one = np.take(array, [index], axis) if array.ndim == len(tensor.shape) else np.expand_dims(array, axis)
            array = np.concatenate([one] * count, axis)
        out[tensor.name] = array.astype(tensor.dtype)
    return out


def _handed_on(returned, following, now) -> bool:
    """Return whether an output of this step is the data's next value of an input: within 1e-3 of it, and ten
    times nearer to it than to this step's value (an output that passes the input through is not a state)."""
    returned, following, now = (np.asarray(a, np.float64) for a in (returned, following, now))
    off = float(np.linalg.norm(returned - following))
    return off <= 1e-3 * float(np.linalg.norm(following)) and float(np.linalg.norm(returned - now)) > 10 * off


def _carried(model, inputs: list[TensorFacts], outputs: list[TensorFacts], arrays: dict,
             axes: dict[str, int | None]) -> dict[str, str]:
    """Return {input: output} of the states a step hands the next. Where the first file holds a stream (an
    input's second sample is what an output returned for the first: DTLN's `input_5`, a Keras export's name),
    that output. Else an input named as a state is, and the float output that ONNX Runtime returns in its shape
    on the data's first sample, the one whose name shares the longest start with it (silero-vad's `state` and
    `stateN`). A cache that grows a step (a decoder's past and present keys) comes back larger and is not
    carried. {} when no float output can have a batched input's shape, or the model does not run the sample."""
    from trtpipe.graph.sessions import session

    batched = [t for t in inputs if axes[t.name] is not None]
    if any(t.name not in arrays for t in inputs) or not any(
            not o.ranked or len(o.shape) == len(t.shape) and all(a < 0 or b < 0 or a == b for a, b in zip(o.shape, t.shape))
            for t in batched for o in outputs if is_float(o.dtype)):
        return {}
    stream = all(np.ndim(arrays[t.name]) == len(t.shape) and np.shape(arrays[t.name])[axes[t.name]] > 1
                 for t in batched)
    if not stream and not any(STATE_NAME.search(t.name) for t in batched):
        return {}
    try:
        feeds, runs = _sample_feeds(inputs, arrays, axes), session(model, optimization="none")
        returned = {o.name: value for o, value in zip(runs.get_outputs(), runs.run(None, feeds))
                    if isinstance(value, np.ndarray) and value.dtype.kind == "f"}
    except Exception:  # noqa: BLE001 - a sample the model does not run says nothing of its states
        return {}
    following = _sample_feeds(inputs, arrays, axes, index=1) if stream else {}
    carried: dict[str, str] = {}
    for state in batched:
        alike = [name for name, value in returned.items()
                 if value.shape == feeds[state.name].shape and name not in carried.values()]
        handed = [name for name in alike if state.name in following
                  and _handed_on(returned[name], following[state.name], feeds[state.name])]
        nearest = max(alike, key=lambda name: len(os.path.commonprefix([name, state.name])), default=None)
        if handed:
            carried[state.name] = handed[0]
        elif nearest is not None and STATE_NAME.search(state.name) and os.path.commonprefix([nearest, state.name]):
            carried[state.name] = nearest
    return carried


def _fixed_at_one(model, inputs: list[TensorFacts], arrays: dict, axes: dict[str, int | None]) -> bool:
    """Return True when ONNX Runtime runs the data's first sample alone and refuses two of it: the ONNX
    names a dynamic batch that a Reshape inside fixes at 1 (khmersm). False when it cannot tell."""
    from trtpipe.graph.sessions import session

    batched = [t for t in inputs if axes[t.name] is not None]
    if not batched or any(t.name not in arrays or t.shape[axes[t.name]] >= 0 for t in batched):
        return False

    def feeds(count: int) -> dict:
        return _sample_feeds(inputs, arrays, axes, count=count)

    try:
        # As written: ONNX Runtime's reshape fusion turns a Reshape to [1, length] into [1, -1], which takes
        # two samples that TensorRT refuses. The refused batch of two is the expected error.
        runs = session(model, optimization="none")
        runs.run(None, feeds(1))
    except Exception:  # noqa: BLE001 - a sample the model does not run says nothing of its batch
        return False
    try:
        runs.run(None, feeds(2))
    except Exception:  # noqa: BLE001 - ONNX Runtime's run errors have no common base
        return True
    return False


def _ranked_by_data(model, model_path, inputs: list[TensorFacts], data_dir: Path | None) -> list[TensorFacts]:
    """Return `inputs` with a rank for each the ONNX gives no shape, read from the first .npy/.npz file: a
    sample with a batch axis in front when ONNX Runtime runs it so, else the array as a batch; every dim
    dynamic. Raises when there is no such file, or ONNX Runtime runs the array neither way."""
    from trtpipe.graph.sessions import session

    unranked = [t for t in inputs if not t.ranked]
    files = [p for p in list_files(data_dir) if p.suffix.lower() in (".npy", ".npz")] if data_dir is not None else []
    if not files:
        raise TrtpipeError(f"{model_path}: input '{unranked[0].name}' has no shape in the ONNX (any rank); pass --data "
                           "with .npy or .npz samples, from which init reads it")
    held = load_arrays(files[0])
    arrays = {t.name: np.asarray(held[""] if files[0].suffix.lower() == ".npy" else held.get(t.name)) for t in inputs
              if (files[0].suffix.lower() == ".npy" and len(inputs) == 1) or t.name in held}
    if any(t.name not in arrays for t in inputs):
        raise TrtpipeError(f"{files[0]}: no array for every input of {Path(model_path).name}; store samples as .npz "
                           "keyed by input name")
    runs = session(model, optimization="none")

    def runs_on(feeds: dict) -> bool:
        try:
            runs.run(None, {t.name: feeds[t.name].astype(t.dtype) for t in inputs})
        except Exception:  # noqa: BLE001 - ONNX Runtime's run errors have no common base
            return False
        return True

    for added in (1, 0):  # one sample a file (docs/data.md), then a batch
        feeds = {t.name: (arrays[t.name][None] if added and not t.ranked else arrays[t.name]) for t in inputs}
        feeds = {t.name: feeds[t.name][None] if t.ranked and feeds[t.name].ndim == len(t.shape) - 1 else feeds[t.name]
                 for t in inputs}
        if runs_on(feeds):
            return [t if t.ranked else replace(t, shape=[-1] * feeds[t.name].ndim) for t in inputs]
    raise TrtpipeError(f"{files[0]}: ONNX Runtime runs input '{unranked[0].name}' of shape {list(arrays[unranked[0].name].shape)} "
                       "neither as one sample nor as a batch; write the spec's [[inputs]] shape by hand")


def _sample_dims(tensor: TensorFacts, array, axis: int | None) -> tuple[int, ...] | None:
    """Return one sample's dims (no batch axis) as the data holds them."""
    if array is None:
        return None
    if axis is None or array.ndim == len(tensor.shape) - 1:
        return tuple(array.shape)
    return tuple(d for i, d in enumerate(array.shape) if i != axis) if array.ndim == len(tensor.shape) else None


def _shared_value(array) -> str | None:
    """Return the TOML number of a scalar in the data (a sample rate), None when it is not one finite number."""
    import math

    if array is None or array.ndim != 0 or array.dtype.kind not in "iuf":
        return None
    value = array.item()
    return str(value) if isinstance(value, int) else repr(value) if math.isfinite(value) else None


def _image_size(directory: Path) -> tuple[int, int] | None:
    """Return (height, width) of the first image in `directory` (None when there is none), or raise naming it when
    no command could read it (data.opened_image): the spec would be written from its header alone."""
    for path in list_files(directory):
        if path.suffix.lower() in IMAGE_SUFFIXES:
            with opened_image(path) as img:
                return img.size[1], img.size[0]
    return None


def _comment(text: str) -> str:
    """Return `text` safe in a TOML comment: a tensor name with a newline would end the comment."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def starting_spec(model, model_path: str | os.PathLike, data_dir: str | os.PathLike | None = None,
                  spec_path: str | os.PathLike | None = None, validation_dir: str | os.PathLike | None = None) -> str:
    """Return the text of a model.toml for `model`: inputs, build shapes, a guessed task, and data paths.

    `spec_path`: where the text will be written; data paths are relative to its folder, as the
    loader reads them (None: the model's folder). `validation_dir`: other samples to validate on
    (None: `data_dir`, marked for the user to change).
    """
    onnxio.refuse_strings(model, model_path)
    inputs, outputs = tensor_facts(model)
    data_dir = Path(data_dir) if data_dir is not None else None
    if not all(t.ranked for t in inputs):
        inputs = _ranked_by_data(model, model_path, inputs, data_dir)
    images = data_dir is not None and any(p.suffix.lower() in IMAGE_SUFFIXES for p in list_files(data_dir))
    image = next((t for t in inputs if len(t.shape) == 4), None) if images and len(inputs) == 1 else None
    size = _preprocess_size(image, _image_size(data_dir)) if image is not None else None
    arrays = _first_arrays(data_dir, inputs) if data_dir is not None and not images else {}
    # Every shape fixed and some input's batch fixed at one: its states may hold that one sample on a later axis.
    fixed = bool(arrays) and all(d > 0 for t in inputs for d in t.shape) and any(t.shape[:1] == [1] for t in inputs)
    # The samples in the first file: the first dim of an input whose batch is dynamic (or fixed at one: a
    # stream's steps stacked there).
    count = next((arrays[t.name].shape[0] for t in inputs if t.name in arrays and t.shape
                  and (t.shape[0] < 0 or fixed and t.shape[0] == 1) and arrays[t.name].ndim == len(t.shape)), None)
    batch_axes = {t.name: _batch_axis(t, arrays.get(t.name), count, fixed) for t in inputs}
    # Samples may differ in length from file to file (one phrase a file): the profile spans them all.
    spans = _sample_spans(data_dir, inputs, batch_axes, shared_dims(model)) if arrays else {}
    sized = _shapes_at_size(model, image, size) if image is not None and -1 in image.shape[1:] else {}
    guess = guess_task(inputs, outputs, ragged=any(small != large for small, _, large in spans.values()), sized=sized)
    name = Path(model_path).stem
    lines = [_comment(f"# {name}: a starting spec written by 'trtpipe init'. Check every line marked CHECK."),
             f"name = {toml_string(name)}",
             f'task = "{guess.task}"  # CHECK: guessed because {_comment(guess.why)}', ""]
    one_batch = arrays and _fixed_at_one(model, inputs, arrays, batch_axes)
    if one_batch:  # images never get here: only .npy/.npz samples are run
        inputs = [replace(t, shape=[1 if i == batch_axes[t.name] else d for i, d in enumerate(t.shape)]) for t in inputs]
    carried = _carried(model, inputs, outputs, arrays, batch_axes) if arrays else {}
    shapes, axes = {}, []
    for tensor in inputs:
        array = arrays.get(tensor.name)
        axis = batch_axes[tensor.name]
        axes.append(axis)
        lines += ["[[inputs]]", f"name = {toml_string(tensor.name)}", f"shape = {tensor.shape}"
                  + ("  # CHECK: the ONNX names a dynamic batch, but the graph runs one sample and refuses two"
                     if one_batch and axis is not None else "")
                  + ("  # CHECK: the ONNX gives no shape; the rank is the data's, every dim dynamic"
                     if not tensor.ranked else "")]
        if tensor.dtype in DTYPES:
            lines.append(f'dtype = "{tensor.dtype}"')
        else:  # the loader takes the dtypes data files are read as; others are refused, so none is written
            lines.append(f"# CHECK: the model's dtype {tensor.dtype} is not one trtpipe feeds; the spec's default is float32")
        if axis is None:
            lines.append("batched = false  # CHECK: a scalar: the whole batch shares it")
            value = _shared_value(array)
            if value is not None:
                lines.append(f"value = {value}  # CHECK: the data's; say so only if the input always has it "
                             "(control flow on it is then folded)")
        elif axis:
            lines.append(f"batch_axis = {axis}  # CHECK: the axis whose size in the data is the sample count")
        if tensor.name in carried:
            lines.append(f"carry = {toml_string(carried[tensor.name])}  # CHECK: the output this state comes back as; "
                         "validate runs each data file's samples in order as one stream, each step fed the step "
                         "before's")
        lines.append("")
        if not tensor.shape or all(d > 0 for d in tensor.shape):
            continue
        sample = _image_dims(tensor.shape, size) if tensor is image else _sample_dims(tensor, array, axis)
        span = None
        if tensor is not image and tensor.name in spans:
            smallest, sample, largest = spans[tensor.name]
            span = smallest, largest
        # A dynamic dim other than the batch, sized from the data: its MAX is only the longest sample read.
        lengths = tensor is not image and any(d < 0 for i, d in enumerate(tensor.shape) if i != axis)
        shapes[tensor.name] = (profile_shapes(tensor.shape, sample, axis, span),
                               axis is not None and tensor.shape[axis] < 0, lengths)
    if images and image is None:
        why = (f"no input of {Path(model_path).name} is an image (rank 4)" if all(len(t.shape) != 4 for t in inputs)
               else f"images feed a model with one input, and {Path(model_path).name} has {len(inputs)}")
        raise TrtpipeError(f"--data {data_dir}: holds images, but {why}; pass a directory of .npy or .npz samples")
    if image is not None:
        lines += _preprocess_lines(image, size)
    if shapes:
        lines.append("[shapes]  # MIN/OPT/MAX per dynamic input, dims joined by x, as trtexec writes them")
        for input_name, (value, dynamic_batch, lengths) in shapes.items():
            key = toml_string(input_name)
            if value is None:
                lines.append(f'# {_comment(key)} = "..."  # CHECK: no sample to read the dynamic dims from; fill in')
            else:
                checks = [f"batch {PROFILE_BATCHES[0]} to {PROFILE_BATCHES[-1]}"] if dynamic_batch else []
                if lengths:
                    checks.append("MAX is the longest sample in the data; an engine refuses longer inputs, "
                                  "so raise it to the longest you serve")
                lines.append(f'{key} = "{value}"' + (f"  # CHECK: {'; '.join(checks)}" if checks else ""))
        lines.append("")
    lines += _output_lines(outputs, [(t, axis) for t, axis in zip(inputs, axes) if axis], guess.keys)
    lines.append("[data]")
    if data_dir is not None:
        folder = Path(spec_path).resolve().parent if spec_path is not None else Path(model_path).resolve().parent
        relative = toml_string(os.path.relpath(data_dir.resolve(), folder))
        if validation_dir is None:
            lines.append(f"calibration = {relative}  # CHECK: a different directory of the same kind for validation")
            lines.append(f"validation = {relative}")
        else:
            lines.append(f"calibration = {relative}")
            lines.append(f"validation = {toml_string(os.path.relpath(Path(validation_dir).resolve(), folder))}"
                         "  # samples calibration does not read")
    else:
        lines += ['# calibration = "data/calib"  # .npy, .npz or images: see docs/data.md',
                  '# validation = "data/val"']
    return "\n".join(lines) + "\n"


# Why init writes a key that the outputs' shapes do not decide.
OUTPUT_SHAPES = "read from the outputs' shapes"
KEY_WHY = {"padding_input": ("its padded steps (padding_value, or false in a mask) are not judged: a tagger's tags "
                             "after the word mean nothing"),
           "padding_value": ("the id taken as padding; set the tokenizer's, or remove both if every id is a token; "
                             "a masked language model read at its mask alone takes judged_value = MASK_ID instead"),
           "layout": "N the samples, T a step per token (as long as each sample), C the channels where there are any",
           ("layout", "detections"): ("the model's own detections after its NMS, matched box to box: FP32 and the "
                                      "candidate may keep different counts"),
           "batch_axis": "each run's detections are one sample",
           "score_output": "a score a box",
           "class_output": "a class a box"}


def _output_lines(outputs: list[TensorFacts], states: list[tuple[TensorFacts, int]],
                  first_keys: dict[str, int] | None = None) -> list[str]:
    """Return [[outputs]] entries when an output is shaped like an input that stacks samples on a later
    axis (an RNN's state out, like its state in), or when the guessed task needs keys on the first
    float output (a time-first sequence); none otherwise: without entries every float output is
    judged by the spec's task."""
    def axis_of(output: TensorFacts) -> int | str:
        if detections(output):
            return "none"
        return next((axis for state, axis in states if len(state.shape) == len(output.shape)
                     and all(o < 0 or o == d for o, d in zip(output.shape, state.shape))), 0)

    floats = [o for o in outputs if is_float(o.dtype)]
    if not any(axis_of(o) for o in floats) and not first_keys:
        return []
    first_keys = dict(first_keys or {})
    keyed = first_keys.pop("name", floats[0].name)
    # the layout read from the first output holds for every output of its shape (SwiftF0's confidence, a value
    # a frame beside the pitch a frame: without it, its frames were judged as channels)
    shape = next(o.shape for o in floats if o.name == keyed)
    alike = {o.name for o in floats if first_keys.get("layout") not in (None, "detections") and o.shape == shape}
    # a face head's maps (its *_output keys): read by the heatmap's entry; other string keys name no output
    read = {value for key, value in first_keys.items() if key.endswith("_output")}
    lines = []
    for output in floats:
        if output.name in read:
            continue
        lines += ["[[outputs]]", f"name = {toml_string(output.name)}"]
        if output.name == keyed and first_keys:
            lines += [f"{key} = {toml_string(value) if isinstance(value, str) else value}  # CHECK: "
                      f"{KEY_WHY.get((key, value), KEY_WHY.get(key, OUTPUT_SHAPES))}" for key, value in first_keys.items()]
        elif output.name in alike:
            lines.append(f"layout = {toml_string(first_keys['layout'])}  # CHECK: {KEY_WHY.get('layout', OUTPUT_SHAPES)}")
        elif read:  # beside a face head: the spec's task would make it a heatmap
            lines.append('task = "generic"  # CHECK: not one of the face head\'s maps')
        elif axis_of(output) == "none":
            lines.append('batch_axis = "none"  # CHECK: detections after NMS, a row a box: each run\'s rows are one '
                         "sample, and FP32 and the candidate must keep as many")
        elif axis_of(output):
            lines.append(f"batch_axis = {axis_of(output)}  # CHECK: shaped like an input whose samples stack there")
        lines.append("")
    # Listed outputs are the only ones judged: an integer output is listed as validate would judge it unlisted.
    for output in (o for o in outputs if is_decision(o.dtype) and o.name not in read):
        lines += ["[[outputs]]", f"name = {toml_string(output.name)}",
                  'task = "exact"  # what the model decided itself (an ArgMax, indices, a mask): kept or not', ""]
    return lines


# The usual size of an image classifier's input: what a dynamic height or width becomes when no
# image says otherwise.
DEFAULT_IMAGE_SIZE = 224


def _layout(image: TensorFacts) -> tuple[bool, int, tuple[int, int]]:
    """Return whether the image input is NCHW, its channels and its (height, width) dims (-1 where dynamic)."""
    nchw = image.shape[1] in (1, 3) or image.shape[3] not in (1, 3)
    channels = image.shape[1] if nchw else image.shape[3]
    height, width = (image.shape[2], image.shape[3]) if nchw else (image.shape[1], image.shape[2])
    return nchw, channels, (height, width)


# A CNN that takes any image size still needs one its strides divide: detectors and segmenters
# downsample by 32 (YOLOv8n's Concat refuses 321x321), so a size read from an image is rounded to it.
SIZE_MULTIPLE = 32


def _preprocess_size(image: TensorFacts, found: tuple[int, int] | None) -> list[int]:
    """Return [height, width] images are resized to: the model's where fixed, else the first image's
    rounded to a multiple of SIZE_MULTIPLE."""
    _, _, dims = _layout(image)
    fallback = found or (DEFAULT_IMAGE_SIZE, DEFAULT_IMAGE_SIZE)
    return [d if d > 0 else max(SIZE_MULTIPLE, round(f / SIZE_MULTIPLE) * SIZE_MULTIPLE) for d, f in zip(dims, fallback)]


def _image_dims(shape: list[int], size: list[int]) -> tuple[int, ...]:
    """Return a sample's dims (no batch) for an image input resized to `size`."""
    nchw, channels, _ = _layout(TensorFacts("", shape, ""))
    channels = channels if channels > 0 else 3
    return (channels, *size) if nchw else (*size, channels)


def _preprocess_lines(image: TensorFacts, size: list[int]) -> list[str]:
    nchw, channels, dims = _layout(image)
    channels = channels if channels > 0 else 3
    read = "" if all(d > 0 for d in dims) else \
        f"  # CHECK: the first image's size to a multiple of {SIZE_MULTIPLE}; the model takes any"
    return ["[preprocess]  # CHECK: how the model was trained to see images",
            f"size = {size}{read}",
            f'color = "{"L" if channels == 1 else "RGB"}"',
            "scale = 0.00392156862745098  # 1/255",
            f"mean = {[0.0] * max(channels, 1)}",
            f"std = {[1.0] * max(channels, 1)}",
            f'layout = "{"NCHW" if nchw else "NHWC"}"', ""]
