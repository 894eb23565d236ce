"""The model spec (`model.toml`): inputs, shapes, preprocessing, data directories, labels, thresholds."""

from __future__ import annotations

import difflib
import itertools
import math
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from calibrators.lowbit import INT4_BLOCK_SIZES
from trtpipe.errors import TrtpipeError
from trtpipe.files import read_text_input

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Shape = tuple[int, ...]

DTYPES = ("float32", "float16", "int64", "int32", "int8", "uint8", "bool")


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


TASKS = ("classification", "embedding", "detection", "dense", "sequence", "face", "generic")


@dataclass
class OutputSpec:
    """One `[[outputs]]` entry: an output that validation judges, its task and how to read it.

    Keys: name, task, layout, batch_axis, and per task: conf, iou (NMS), classes, score_output,
    class_output (detection), margin (classification), neighbours (embedding), threshold (dense, face),
    blank, step_axis, decode (sequence), scale_output, offset_output, landmark_output, stride (face: a
    CenterNet-style face head, this entry its heatmap).
    None means the task's default (trtpipe.quality.tasks says which and why).
    """

    name: str
    task: str = "generic"
    layout: str | None = None  # detection: yolov8, yolov5, yolox, separate; dense/generic: e.g. NCHW, NHWC
    conf: float | None = None
    iou: float | None = None
    classes: int | None = None
    score_output: str | None = None
    class_output: str | None = None
    margin: float | None = None
    neighbours: int | None = None
    threshold: float | None = None
    blank: int | None = None  # NO_BLANK: no class is padding (a tagger whose padding a mask input marks)
    step_axis: int | None = None
    # face: the heatmap's sibling maps, by role, and the cells' size in input pixels (None: the
    # input's size over the heatmap's)
    scale_output: str | None = None
    offset_output: str | None = None
    landmark_output: str | None = None
    stride: int | None = None
    decode: str | None = None  # sequence: ctc (repeats collapsed) or tags (one class per step)
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
    shapes: dict[str, str] = field(default_factory=dict)  # name -> "MIN/OPT/MAX" as trtexec writes them
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

    def input(self, name: str) -> InputSpec:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise KeyError(name)


# The spec's schema: every table and key a model.toml may hold. Anything else is a mistake (a
# misspelt table silently ignored would change what is built), so load_spec names it and what was meant.
PRECISION_KEYS = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8", "fp4", "int4")


class _Invalid(Exception):
    """A spec value is wrong; the message says where and what was meant."""


def _did_you_mean(word: str, known, wrap=lambda k: k) -> str:
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {wrap(close[0])}?" if close else f"; known: {', '.join(wrap(k) for k in known)}"


def _describe(value) -> str:
    kind = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)
    return f"{kind} ({value!r})" if isinstance(value, (str, int, float, bool)) else kind


def _string(value, where):
    if not isinstance(value, str):
        raise _Invalid(f"{where} must be a string, not {_describe(value)}")
    return value


_string.kind = "string"


def _integer(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(f"{where} must be an integer, not {_describe(value)}")
    return value


_integer.kind = "integer"


def _number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(f"{where} must be a number, not {_describe(value)}")
    if not math.isfinite(value):
        raise _Invalid(f"{where} must be a finite number, not {value}")
    return float(value)


_number.kind = "number"


def _boolean(value, where):
    if not isinstance(value, bool):
        raise _Invalid(f"{where} must be true or false, not {_describe(value)}")
    return value


_boolean.kind = "boolean"


def _axis_or_none(value, where):
    if value == "none":
        return None
    if isinstance(value, str):
        raise _Invalid(f"{where} is {value!r}; write an axis (an integer) or \"none\" for an output without a batch axis")
    return _integer(value, where)


_axis_or_none.kind = 'integer or "none"'

NO_BLANK = -1  # [[outputs]] blank = "none": every class is a real tag, none is dropped


def _class_or_none(value, where):
    if value == "none":
        return NO_BLANK
    if isinstance(value, str):
        raise _Invalid(f"{where} is {value!r}; write a class index (an integer) or \"none\" for a tagger with no padding class")
    return _integer(value, where)


_class_or_none.kind = 'integer or "none"'


def _choice(*choices):
    def check(value, where):
        if _string(value, where) not in choices:
            raise _Invalid(f"{where} is {value!r}, not one of {', '.join(choices)}{_did_you_mean(value, choices)}")
        return value
    check.kind = "one of " + ", ".join(f'"{c}"' for c in choices)
    return check


def _list_of(item, length: int | None = None):
    def check(value, where):
        if isinstance(value, str):
            raise _Invalid(f"{where} must be a list, not a string; write {where.split()[-1]} = [{value!r}]")
        if not isinstance(value, list):
            raise _Invalid(f"{where} must be a list, not {_describe(value)}")
        if length is not None and len(value) != length:
            raise _Invalid(f"{where} must have {length} entries, not {len(value)}")
        return [item(v, f"{where}[{i}]") for i, v in enumerate(value)]
    check.kind = f"list of {length} {item.kind}s" if length else f"list of {item.kind}s"
    return check


def _table(keys: dict, name: str, required=(), extra=None):
    """A TOML table with the given keys; `extra` checks keys beyond them (None: none allowed)."""
    def check(value, where):
        if not isinstance(value, dict):
            raise _Invalid(f"{where} must be a table ([{name}]), not {_describe(value)}")
        for key in required:
            if key not in value:
                raise _Invalid(f"{where} needs a key '{key}'")
        out = {}
        for key, v in value.items():
            if key in keys:
                out[key] = keys[key](v, f"{where} {key}")
            elif extra is not None:
                out[key] = extra(v, f"{where} {key}")
            else:
                raise _Invalid(f"unknown key '{key}' in {where}{_did_you_mean(key, keys, repr)}")
        return out
    check.kind, check.keys, check.required = "table", keys, required
    return check


def _map_of(item, name: str, keys=None):
    """A table whose keys are free (input names, precisions) and whose values all have one type."""
    def check(value, where):
        if not isinstance(value, dict):
            raise _Invalid(f"{where} must be a table ([{name}]), not {_describe(value)}")
        for key in value:
            if keys is not None and key not in keys:
                raise _Invalid(f"{where}: '{key}' is not one of {', '.join(keys)}{_did_you_mean(key, keys, repr)}")
        return {k: item(v, f"{where} {k}" if keys is None else f"[{name}.{k}]") for k, v in value.items()}
    check.kind = "table of tables" if hasattr(item, "item") else f"table of {item.kind}s"
    check.item, check.names = item, keys
    return check


def _array_of_tables(table, name: str):
    def check(value, where):
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise _Invalid(f"{where} must be an array of tables ([[{name}]] entries), not {_describe(value)}")
        return [table(v, f"[[{name}]] #{i + 1}") for i, v in enumerate(value)]
    check.kind, check.keys, check.required = "array of tables", table.keys, table.required
    return check


def _free_table(value, where):
    if not isinstance(value, dict):
        raise _Invalid(f"{where} must be a table, not {_describe(value)}")
    return value


_free_table.kind = "table (any keys)"


SCHEMA = {
    "name": _string,
    "task": _choice(*TASKS),
    "inputs": _array_of_tables(_table({"name": _string, "shape": _list_of(_integer), "dtype": _choice(*DTYPES),
                                       "batch_axis": _integer, "batched": _boolean, "value": _number},
                                      "inputs", required=("name", "shape")), "inputs"),
    "preprocess": _table({"size": _list_of(_integer, 2), "resize": _integer, "color": _choice("RGB", "BGR", "L"),
                          "scale": _number, "mean": _list_of(_number), "std": _list_of(_number),
                          "layout": _choice("NCHW", "NHWC"), "dtype": _choice("float32", "float16")}, "preprocess"),
    "shapes": _map_of(_string, "shapes"),
    "data": _table({"calibration": _string, "validation": _string, "labels": _string}, "data"),
    "thresholds": _map_of(_map_of(_number, "thresholds"), "thresholds", keys=PRECISION_KEYS),
    "quantize": _table({"exclude": _list_of(_string), "smooth": _number, "block_size": _integer,
                          "min_weights": _integer}, "quantize"),
    # Per-output tasks: what validation judges each output by (OutputSpec says what each key means).
    "outputs": _array_of_tables(_table({"name": _string, "task": _choice(*TASKS), "layout": _string, "conf": _number,
                                        "iou": _number, "classes": _integer, "score_output": _string,
                                        "class_output": _string, "margin": _number, "neighbours": _integer,
                                        "threshold": _number, "blank": _class_or_none, "step_axis": _integer,
                                        "scale_output": _string, "offset_output": _string,
                                        "landmark_output": _string, "stride": _integer,
                                        "decode": _choice("ctc", "tags"), "batch_axis": _axis_or_none}, "outputs",
                                       required=("name",)),
                             "outputs"),
    # The public model zoo's pins and input recipe (scripts/zoo.py reads it; the pipeline does not).
    "zoo": _free_table,
}
# What each key means and its default (None: no default), for the reference page
# (scripts/spec_docs.py writes docs/model-toml.md from SCHEMA and this; a test keeps them in step).
KEY_DOCS: dict[str, tuple[str | None, str]] = {
    "name": ("the file's folder name", "the model's name in reports and summaries"),
    "task": ("inferred", ("how float outputs that [[outputs]] does not name are judged: classification (top-1/top-5 "
                          "agreement, accuracy with labels), embedding (cosine, nearest-neighbour agreement), detection, "
                          "dense (mask IoU), sequence (CTC strings), face (faces and landmarks decoded from a CenterNet-style "
                          "head), generic (cosine, SNR, worst channel); without it, inferred from the model's "
                          "shapes as 'trtpipe init' guesses, and the report says why")),
    "inputs": (None, "one entry per model input; without any, the model's own inputs are taken"),
    "inputs.name": (None, "the input's name in the ONNX graph"),
    "inputs.shape": (None, "dims, -1 for a dynamic one, e.g. [-1, 3, 224, 224]"),
    "inputs.dtype": ('"float32"', "the numpy dtype samples are fed as"),
    "inputs.batch_axis": ("0", "the axis samples stack on: 1 for an RNN state laid out [layers, batch, hidden]"),
    "inputs.batched": ("true", "false for an input the whole batch shares (a sample rate): fed once, not stacked"),
    "inputs.value": ("none", ("the value the input always has (a sample rate): If nodes that only it and the [shapes] "
                              "decide are folded into the branch taken, so TensorRT sees no control flow there")),
    "preprocess": (None, "how an image file becomes the input (images need it; .npy/.npz do not)"),
    "preprocess.size": ("[224, 224]", "height, width after resizing (or cropping, with resize)"),
    "preprocess.resize": ("none", "the shorter side before a centre crop to size; without it images are resized to size"),
    "preprocess.color": ('"RGB"', "channel order, or L for grayscale"),
    "preprocess.scale": ("1/255", "pixels are multiplied by it first"),
    "preprocess.mean": ("[0.0]", "subtracted per channel after scaling"),
    "preprocess.std": ("[1.0]", "divided per channel after the mean"),
    "preprocess.layout": ('"NCHW"', "NCHW or NHWC"),
    "preprocess.dtype": ('"float32"', "the array's dtype"),
    "shapes": (None, 'build profiles: input = "MIN/OPT/MAX", dims joined by x, as trtexec writes them'),
    "data": (None, "directories and files, relative to this file"),
    "data.calibration": (None, "samples that set the scales (calibrate, smooth, sensitivity, tune)"),
    "data.validation": (None, "other samples that judge the engines (validate)"),
    "data.labels": (None, "'<sample id> <class>' lines, for a classifier's accuracy"),
    "thresholds": ("per precision, see validate", "[thresholds.int8] cosine = 0.995: a metric's minimum for one precision"),
    "quantize": (None, "what INT8/FP8 leave out and how they prepare; INT4's blocks"),
    "quantize.exclude": ("[]", "node names, regexes or op types kept out of INT8/FP8 (as --exclude)"),
    "quantize.smooth": ("none", "SmoothQuant's alpha, 0..1, applied by 'trtpipe smooth' before INT8"),
    "quantize.min_weights": ("0", ("INT8/FP8 leave layers with fewer weight elements (activation-only MatMuls have none) "
                                    "unquantized: a TensorRT-RTX plan stores ~145 KB of kernel source per quantized "
                                    "layer, more than a small layer's weights save (as --min-weights of quantize, build)")),
    "quantize.block_size": ("128", "rows of a weight sharing one INT4 scale: 32, 64 or 128 (as --block-size of awq, quantize, build)"),
    "outputs": (None, "outputs to judge and how; without any, every float output is judged by task"),
    "outputs.name": (None, "the output's name in the ONNX graph"),
    "outputs.task": ("the spec's task, else generic", "classification, embedding, detection, dense, sequence, face or generic"),
    "outputs.layout": ("inferred", ('detection: "yolov8" [batch, 4+classes, boxes], "yolov5" (also decoded YOLOX) '
                                    '[batch, boxes, 5+classes], "yolox" (YOLOX undecoded: grid offsets at strides 8, 16, 32) '
                                    'or "separate" (score_output, class_output); without it, the shorter of the last two '
                                    'axes is read as the values per box, and one box per grid cell in cell offsets as yolox. '
                                    'dense/generic: where C is, e.g. NCHW')),
    "outputs.conf": ("0.25", "detection: the confidence threshold"),
    "outputs.iou": ("0.45", "detection: NMS IoU; face: NMS IoU, 0.3 (CenterFace's own)"),
    "outputs.classes": ("from the shape", "detection: the number of classes"),
    "outputs.score_output": ("none", "detection, separate layout: the scores output"),
    "outputs.class_output": ("none", "detection, separate layout: the classes output"),
    "outputs.margin": ("0.25", "classification: how far FP32's top class must beat the runner-up (probability) to count as confident"),
    "outputs.neighbours": ("5", "embedding: how many nearest neighbours must agree"),
    "outputs.threshold": ("0.5", "dense: the foreground threshold of the map; face: the heatmap score a face needs"),
    "outputs.batch_axis": ("0", ("the axis samples stack on: 1 for an RNN state [layers, batch, hidden] "
                                 "(else its layers are judged as the samples); \"none\" for an output without one "
                                 "([seq_len]): the whole tensor is one sample per run")),
    "outputs.blank": ("0", ("sequence: the CTC blank class, dropped after repeats are collapsed; with decode = \"tags\", "
                            "the padding's class, or \"none\" when every class is a tag (the padding marked by a mask input)")),
    "outputs.step_axis": ("1", "sequence: the output's axis of time steps ([batch, steps, classes]); classes on the other"),
    "outputs.scale_output": ("inferred", ("face (this entry the heatmap [batch, 1, h, w]): the box sizes [batch, 2, h, w], "
                                          "log height and width in cells")),
    "outputs.offset_output": ("inferred", "face: the centres' offsets in their cell [batch, 2, h, w], y then x"),
    "outputs.landmark_output": ("inferred", ("face: 5 landmarks [batch, 10, h, w], y then x of each, as shares of the "
                                             "box's height and width from its top-left corner")),
    "outputs.stride": ("the input's size over the heatmap's", "face: input pixels per heatmap cell (CenterFace: 4)"),
    "outputs.decode": ("ctc", ("sequence: ctc (a recognizer: repeats collapsed, then the blank dropped) or tags (a "
                               "per-token tagger, a segmenter: every step's class kept, only the blank, its padding, dropped)")),
    "zoo": (None, "make zoo's pins and input recipe for a public model; the pipeline ignores it"),
}
TABLES = ("inputs", "preprocess", "shapes", "data", "thresholds", "quantize", "outputs", "zoo")


def toml_string(text: str) -> str:
    """Return `text` as a TOML basic string, quotes included: valid for any text, as a value or a key."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    # TOML refuses unescaped control characters and DEL; \uXXXX covers them all.
    return '"' + "".join(escapes.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                         for c in text) + '"'


def validate_raw(raw: dict) -> dict:
    """Return the parsed TOML checked against SCHEMA; raise _Invalid naming the first mistake."""
    out = {}
    for key, value in raw.items():
        if key not in SCHEMA:
            if isinstance(value, (dict, list)):
                raise _Invalid(f"unknown table [{key}]{_did_you_mean(key, TABLES, lambda k: f'[{k}]')}")
            raise _Invalid(f"unknown key '{key}'{_did_you_mean(key, SCHEMA, repr)}")
        where = f"[{key}]" if key in TABLES else key
        out[key] = SCHEMA[key](value, where)
    pre = out.get("preprocess", {})
    for key in ("size", "resize"):
        values = pre.get(key, [1]) if key == "size" else [pre.get(key, 1)]
        if any(v < 1 for v in values):
            raise _Invalid(f"[preprocess] {key} must be at least 1")
    if any(v == 0 for v in pre.get("std", [])) or pre.get("scale", 1) == 0:
        raise _Invalid("[preprocess] std and scale must not be 0 (they divide and multiply every pixel)")
    smooth = out.get("quantize", {}).get("smooth")
    if smooth is not None and not 0 <= smooth <= 1:
        raise _Invalid(f"[quantize] smooth is {smooth:g}; SmoothQuant's alpha is between 0 and 1")
    block_size = out.get("quantize", {}).get("block_size")
    if block_size is not None and block_size not in INT4_BLOCK_SIZES:
        raise _Invalid(f"[quantize] block_size is {block_size}; TensorRT takes INT4 blocks of "
                       f"{', '.join(map(str, INT4_BLOCK_SIZES))}")
    if out.get("quantize", {}).get("min_weights", 0) < 0:
        raise _Invalid("[quantize] min_weights must be 0 or more (weight elements a layer needs to be quantized)")
    for i, spec in enumerate(out.get("inputs", [])):
        if any(d < -1 or d == 0 for d in spec["shape"]):
            raise _Invalid(f"[[inputs]] #{i + 1} shape {spec['shape']}: dimensions are positive, or -1 for dynamic")
        dtype, value = spec.get("dtype", "float32"), spec.get("value")
        if value is not None and not dtype.startswith("float") and not _holds(dtype, value):
            raise _Invalid(f"[[inputs]] #{i + 1} value {value:g}: an input of dtype {dtype} cannot hold it; give "
                           f"{'0 or 1' if dtype == 'bool' else 'a whole number in its range'}")
    return out


def _holds(dtype: str, value: float) -> bool:
    """Return True if an integer or bool input of `dtype` holds `value` exactly (2.5 would be cut to 2)."""
    if dtype == "bool":
        return value in (0, 1)
    bits = int(dtype.removeprefix("u").removeprefix("int"))
    low, high = (0, 2**bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return value.is_integer() and low <= value <= high


def load_spec(path: str | os.PathLike) -> ModelSpec:
    """Return the spec in the TOML file at `path`; relative paths in it are relative to the file."""
    path = Path(path)
    text = read_text_input(path, f"--spec {path}", "pass the model's model.toml ('trtpipe init' writes one)")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TrtpipeError(f"--spec {path}: not valid TOML ({exc}); fix the file") from None
    try:
        raw = validate_raw(raw)
    except _Invalid as exc:
        raise TrtpipeError(f"--spec {path}: {exc}") from None
    parse_shapes([f"{k}:{v}" for k, v in raw.get("shapes", {}).items()], f"--spec {path}: [shapes]")
    root = path.parent
    inputs = [InputSpec(i["name"], list(i["shape"]), i.get("dtype", "float32"),
                        batch_axis=i.get("batch_axis", 0) if i.get("batched", True) else None, value=i.get("value"))
              for i in raw.get("inputs", [])]
    for spec in inputs:
        if spec.batch_axis is not None and not 0 <= spec.batch_axis < max(len(spec.shape), 1):
            raise TrtpipeError(f"--spec {path}: [[inputs]] {spec.name}: batch_axis {spec.batch_axis} is not an axis "
                               f"of shape {spec.shape}")
    names = [i.name for i in inputs]
    if len(set(names)) != len(names):
        raise TrtpipeError(f"--spec {path}: [[inputs]] names an input twice; list each once")
    pre = raw.get("preprocess")
    preprocess = None
    if pre is not None:
        defaults = Preprocess()
        preprocess = Preprocess(
            size=tuple(pre.get("size", defaults.size)), resize=pre.get("resize"), color=pre.get("color", defaults.color),
            scale=pre.get("scale", defaults.scale), mean=pre.get("mean", defaults.mean), std=pre.get("std", defaults.std),
            layout=pre.get("layout", defaults.layout), dtype=pre.get("dtype", defaults.dtype),
        )
    data = raw.get("data", {})
    quantize = raw.get("quantize", {})

    def rel(key):
        return (root / data[key]).resolve() if key in data else None

    spec = ModelSpec(
        name=raw.get("name", root.name), root=root, task=raw.get("task"), inputs=inputs,
        preprocess=preprocess, shapes=raw.get("shapes", {}), calibration=rel("calibration"),
        validation=rel("validation"), labels=rel("labels"), thresholds=raw.get("thresholds", {}),
        smooth=quantize.get("smooth"), exclude=quantize.get("exclude", []), block_size=quantize.get("block_size"),
        min_weights=quantize.get("min_weights", 0),
        outputs=[OutputSpec(**{"task": raw.get("task", "generic"), **o}) for o in raw.get("outputs", [])],
        path=path,
    )
    check_thresholds(spec)
    return spec


def check_thresholds(spec: ModelSpec) -> None:
    """Raise unless every metric in [thresholds] is judged by a task the spec names ([[outputs]]' tasks,
    else the top-level task): a minimum no task checks would pass silently, whatever the candidate does."""
    from trtpipe.quality.tasks import judged_by

    if not spec.outputs and spec.task is None:
        return  # inferred from the model when it runs: validation checks the metrics then (require_judged)
    tasks = sorted({o.task for o in spec.outputs} if spec.outputs else {spec.task})
    judged = list(dict.fromkeys(m for task in tasks for m in judged_by(task)))
    for precision, limits in spec.thresholds.items():
        for metric in limits:
            if metric not in judged:
                raise TrtpipeError(f"--spec {spec.path}: [thresholds.{precision}] {metric} is not judged for task "
                                   f"{', '.join(tasks)}, which judges {', '.join(judged)}; use one of those, or name "
                                   f"the output it applies to in [[outputs]] with a task that judges it")


def resolve_inputs(spec: ModelSpec, model, model_path: str | os.PathLike) -> ModelSpec:
    """Return `spec` checked against the model's inputs; a spec that lists none takes the model's.

    An [[inputs]] name the model lacks, or a model input the spec leaves out, is an error: data
    would otherwise be fed to the wrong tensor or not at all.
    """
    found = spec_from_onnx(model, model_path).inputs
    where = f"--spec {spec.path}" if spec.path else "--spec"
    if not spec.inputs:
        spec.inputs = found
    else:
        model_names = [i.name for i in found]
        for item in spec.inputs:
            if item.name not in model_names:
                raise TrtpipeError(f"{where}: [[inputs]] names '{item.name}' but {model_path} has no such input "
                                   f"(it has {', '.join(model_names) or 'none'}){_did_you_mean(item.name, model_names, repr)}")
        missing = [n for n in model_names if n not in {i.name for i in spec.inputs}]
        if missing:
            raise TrtpipeError(f"{where}: {model_path} has an input '{missing[0]}' that [[inputs]] does not list; add it")
    names = [i.name for i in spec.inputs]
    for name in spec.shapes:
        if name not in names:
            raise TrtpipeError(f"{where}: [shapes] names '{name}' but {model_path} has no such input "
                               f"(it has {', '.join(names)}){_did_you_mean(name, names, repr)}")
    return spec


def load_exclusions(path: str | os.PathLike) -> list[str]:
    """Return the [quantize] exclude list of a TOML file (a spec, or the .toml 'trtpipe tune' writes)."""
    path = Path(path)
    text = read_text_input(path, f"--exclude @{path}", "make it with 'trtpipe tune'")
    try:
        raw = tomllib.loads(text)
        names = raw.get("quantize", {}).get("exclude", [])
    except (tomllib.TOMLDecodeError, AttributeError):
        raise TrtpipeError(f"--exclude @{path}: not a TOML file with [quantize] exclude; rerun 'trtpipe tune'") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TrtpipeError(f"--exclude @{path}: [quantize] exclude must be a list of node names")
    return names


def spec_from_onnx(model, path: str | os.PathLike) -> ModelSpec:
    """Return a spec with just the inputs of `model`, for commands run without --spec."""
    from onnx import helper

    inputs = []
    initializers = {init.name for init in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        inputs.append(InputSpec(value.name, shape, dtype))
    return ModelSpec(name=Path(path).stem, root=Path(path).parent, inputs=inputs)


def decided_inputs(spec: ModelSpec | None) -> tuple[dict[str, tuple[Shape, Shape, Shape]], dict]:
    """Return what a spec fixes of the inputs: ({input: (min, opt, max)} from [shapes], {input: array} from values)."""
    import numpy as np

    if spec is None:
        return {}, {}
    shapes = parse_shapes([f"{k}:{v}" for k, v in spec.shapes.items()], "--spec shapes")
    fixed = {i.name: np.full([max(d, 1) for d in i.shape], i.value, i.dtype) for i in spec.inputs if i.value is not None}
    return shapes, fixed


def parse_shapes(values: Iterable[str], flag: str = "--shapes") -> dict[str, tuple[Shape, Shape, Shape]]:
    """Return {input: (min, opt, max)} from trtexec-style `name:1x64/32x64/256x64` values."""
    shapes = {}
    for value in values:
        shown = value if value.isprintable() else repr(value)  # the error stays one line
        name, sep, dims = value.rpartition(":")
        parts = dims.split("/")
        if not sep or not name or len(parts) != 3 or not all(re.fullmatch(r"[1-9][0-9]*(x[1-9][0-9]*)*", p) for p in parts):
            raise TrtpipeError(f"{flag} {shown}: write NAME:MIN/OPT/MAX with dims joined by x, e.g. x:1x64/32x64/256x64 (dims >= 1)")
        triple = tuple(tuple(int(d) for d in p.split("x")) for p in parts)
        if len({len(s) for s in triple}) != 1 or any(a > b for lo, hi in itertools.pairwise(triple) for a, b in zip(lo, hi)):
            raise TrtpipeError(f"{flag} {shown}: MIN, OPT and MAX need the same rank and MIN <= OPT <= MAX")
        shapes[name] = triple
    return shapes
