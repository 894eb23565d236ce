"""The spec's schema: every table and key a model.toml may hold, their types, defaults and meaning.

Anything else is a mistake (a misspelt table silently ignored would change what is built), so
validate_raw names it and what was meant. scripts/spec_docs.py writes docs/model-toml.md from
SCHEMA and KEY_DOCS; a test keeps the page in step.
"""

from __future__ import annotations

from trtpipe.calibrators.lowbit import INT4_BLOCK_SIZES
from trtpipe.spec.validators import (
    Invalid,
    array_of_tables,
    axis_or_none,
    boolean,
    choice,
    class_or_none,
    did_you_mean,
    free_table,
    integer,
    list_of,
    map_of,
    number,
    path,
    string,
    table,
)

DTYPES = ("float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")


def is_float(dtype: str) -> bool:
    """Return True for the name of a float dtype, numpy's or ml_dtypes' (float16/32/64, bfloat16, the float8s)."""
    return dtype.startswith(("float", "bfloat"))


def is_decision(dtype: str) -> bool:
    """Return True for an integer or bool dtype: an output that holds what the model decided (the exact task)."""
    return dtype == "bool" or dtype.startswith(("int", "uint"))


RESAMPLE = ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming")  # Pillow's Image.Resampling, by name
TASKS = ("classification", "embedding", "detection", "dense", "sequence", "face", "generic")
# An output may also be judged by exact agreement (integer and bool outputs); a model's floats may not.
OUTPUT_TASKS = (*TASKS, "exact")
PRECISION_KEYS = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8", "fp4", "int4")

SCHEMA = {
    "name": string,
    "task": choice(*TASKS),
    "inputs": array_of_tables(table({"name": string, "shape": list_of(integer), "dtype": choice(*DTYPES),
                                       "batch_axis": integer, "batched": boolean, "value": number,
                                       "carry": string},
                                      "inputs", required=("name", "shape")), "inputs"),
    "preprocess": table({"size": list_of(integer, 2), "resize": integer, "color": choice("RGB", "BGR", "L"),
                          "scale": number, "mean": list_of(number), "std": list_of(number),
                          "layout": choice("NCHW", "NHWC"), "dtype": choice("float32", "float16"),
                          "resample": choice(*RESAMPLE)}, "preprocess"),
    "shapes": map_of(string, "shapes"),
    "data": table({"calibration": path, "validation": path, "labels": path}, "data"),
    "thresholds": map_of(map_of(number, "thresholds"), "thresholds", keys=PRECISION_KEYS),
    "quantize": table({"exclude": list_of(string), "smooth": number, "block_size": integer,
                          "min_weights": integer}, "quantize"),
    # Per-output tasks: what validation judges each output by (OutputSpec says what each key means).
    "outputs": array_of_tables(table({"name": string, "task": choice(*OUTPUT_TASKS), "layout": string, "conf": number,
                                        "iou": number, "classes": integer, "score_output": string,
                                        "class_output": string, "score_outputs": list_of(string),
                                        "box_outputs": list_of(string), "margin": number, "neighbours": integer,
                                        "threshold": number, "min_area": integer, "blank": class_or_none, "step_axis": integer,
                                        "scale_output": string, "offset_output": string,
                                        "landmark_output": string, "stride": integer,
                                        "decode": choice("ctc", "tags", "viterbi"), "padding_input": string,
                                        "transitions": path, "emissions": choice("scores", "probabilities"),
                                        "padding_value": integer, "judged_value": integer, "lengths": string, "batch_axis": axis_or_none,
                                        "transform": path, "tolerance": number}, "outputs",
                                       required=("name",)),
                             "outputs"),
    # The public model zoo's pins and input recipe (scripts/zoo.py reads it; the pipeline does not).
    "zoo": free_table,
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
    "inputs.carry": ("none", ("the output this input is fed from on the next step (an RNN's state, a streaming "
                              "model's caches): validate runs each data file's samples in order as one stream, the "
                              "first with the file's value, each later one with the output of the step before, the "
                              "candidate's own and FP32's own, so that the candidate's error builds up as it does "
                              "where the model runs, and the cosines take each stream as one sample; calibration "
                              "reads the file's values")),
    "preprocess": (None, "how an image file becomes the input (images need it; .npy/.npz do not)"),
    "preprocess.size": ("[224, 224]", "height, width after resizing (or cropping, with resize)"),
    "preprocess.resize": ("none", "the shorter side before a centre crop to size; without it images are resized to size"),
    "preprocess.color": ('"RGB"', "channel order, or L for grayscale"),
    "preprocess.scale": ("1/255", "pixels are multiplied by it first"),
    "preprocess.mean": ("[0.0]", "subtracted per channel after scaling"),
    "preprocess.std": ("[1.0]", "divided per channel after the mean"),
    "preprocess.layout": ('"NCHW"', "NCHW or NHWC"),
    "preprocess.dtype": ('"float32"', "the array's dtype"),
    "preprocess.resample": ('"bilinear"', ("the filter that resizes, as Pillow names it: the one the model's own code "
                                           "uses (Pillow's resize defaults to bicubic, OpenCV's to bilinear); an answer "
                                           "in pixels moves with it")),
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
    "outputs": (None, "outputs to judge and how; without any, every float output is judged by task, every integer one exactly"),
    "outputs.name": (None, "the output's name in the ONNX graph"),
    "outputs.task": ("the spec's task, else generic; exact for an integer or bool output",
                     "classification, embedding, detection, dense, sequence, face, generic or exact"),
    "outputs.layout": ("inferred", ('detection: "yolov8" [batch, 4+classes, boxes], "yolov5" (also decoded YOLOX) '
                                    '[batch, boxes, 5+classes], "yolox" (YOLOX undecoded: grid offsets at strides 8, 16, 32) '
                                    '"separate" (score_output, class_output), "picodet" (PicoDet/GFL heads: score_outputs, '
                                    'box_outputs, strides from the cells per level) or "heatmap" (regions of a saliency '
                                    'map: threshold, min_area, conf on their peaks); without it, the shorter of the last two '
                                    'axes is read as the values per box, and one box per grid cell in cell offsets as yolox. '
                                    'dense/generic: where C is, e.g. NCHW; a layout without C (NT, a value per token) has no channel axis')),
    "outputs.conf": ("0.25", "detection: the confidence threshold"),
    "outputs.iou": ("0.45", "detection: NMS IoU; face: NMS IoU, 0.3 (CenterFace's own)"),
    "outputs.classes": ("from the shape", "detection: the number of classes"),
    "outputs.score_output": ("none", "detection, separate layout: the scores output"),
    "outputs.class_output": ("none", "detection, separate layout: the classes output"),
    "outputs.score_outputs": ("none", ("detection, picodet layout: each level's class scores [batch, cells, classes] "
                                       "(probabilities), finest stride first")),
    "outputs.box_outputs": ("none", ("detection, picodet layout: each level's box distributions [batch, cells, "
                                     "4*(reg_max+1)], left, top, right, bottom, in the order of score_outputs")),
    "outputs.margin": ("0.25", "classification: how far FP32's top class must beat the runner-up (probability) to count as confident"),
    "outputs.neighbours": ("5", "embedding: how many nearest neighbours must agree"),
    "outputs.threshold": ("0.5", ("dense: the foreground threshold of the map; face: the heatmap score a face needs; "
                                  "detection, layout heatmap: the share of the map's range a region's pixels are over (0.8); "
                                  "generic (no default): a value above it is a yes (a bit, a same-or-not), and "
                                  "decision_agreement is the share of samples whose every decision is FP32's")),
    "outputs.min_area": ("100", "detection, layout heatmap: the fewest pixels a region has"),
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
    "outputs.decode": ("ctc", ("sequence: ctc (a recognizer: repeats collapsed, then the blank dropped), tags (a "
                               "per-token tagger, a segmenter: every step's class kept, only the blank, its padding, dropped) "
                               "or viterbi (a tagger that ships a decoder: the best path through transitions, kept as tags)")),
    "outputs.transitions": ("none", ("sequence, decode = \"viterbi\": a .npy [classes, classes] of transition scores "
                                     "(row: from, column: to; -inf where not allowed), or a .npz of it as `transitions` "
                                     "with optional `start` and `end` [classes] scores; relative to this file")),
    "outputs.emissions": ('"scores"', ("sequence, decode = \"viterbi\": what the output is per step: scores, added as "
                                       "they are (a CRF's emissions), or probabilities, whose logs are added")),
    "outputs.padding_input": ("none", ("sequence, decode = \"tags\": the integer or bool input [batch, steps] whose padding "
                                       "marks the steps not judged (what a tagger emits after the word means nothing): "
                                       "they are dropped from FP32's tags and the candidate's; a bool input is a mask, "
                                       "padded where false")),
    "outputs.padding_value": ("0", "sequence: the id that is padding in padding_input (an integer input; a mask needs none)"),
    "outputs.judged_value": ("none", ("sequence, with padding_input (an integer input): the one id whose steps alone are "
                                      "judged, as a masked language model is read at its mask id alone; every other "
                                      "step is dropped from FP32's tags and the candidate's (instead of padding_value)")),
    "outputs.lengths": ("none", ("sequence: the integer input or output [batch] holding each sample's count of real "
                                 "steps (a batch of lines padded to the widest): the steps after it are dropped from "
                                 "FP32's reading and the candidate's, each cut at its own run's lengths, as the "
                                 "model's reader cuts them")),
    "outputs.transform": ("none", ("generic: \"FILE.py:FUNCTION\", relative to this file: a function that takes the "
                                   "output (a float64 array, samples first) and returns what the answer is read from, "
                                   "samples first (a face model's landmarks from its parameters, a pose's angles); every "
                                   "generic metric is then of what it returns. A function of two arguments also gets "
                                   "FP32's outputs of the batch by name, to read the answer where another output says "
                                   "(a pitch where FP32 hears one). It runs in trtpipe's process: name a file you trust")),
    "outputs.tolerance": ("none", ("generic, with transform: the distance within which a sample's answer counts as FP32's: "
                                   "the mean over its points (the transform's last axis is a point's coordinates; a "
                                   "vector is one point) of the Euclidean distance to FP32's; within_tolerance is the "
                                   "share of samples within it")),
    "zoo": (None, "make zoo's pins and input recipe for a public model; the pipeline ignores it"),
}
TABLES = ("inputs", "preprocess", "shapes", "data", "thresholds", "quantize", "outputs", "zoo")


def validate_raw(raw: dict) -> dict:
    """Return the parsed TOML checked against SCHEMA; raise Invalid naming the first mistake."""
    out = {}
    for key, value in raw.items():
        if key not in SCHEMA:
            if isinstance(value, (dict, list)):
                raise Invalid(f"unknown table [{key}]{did_you_mean(key, TABLES, lambda k: f'[{k}]')}")
            raise Invalid(f"unknown key '{key}'{did_you_mean(key, SCHEMA, repr)}")
        where = f"[{key}]" if key in TABLES else key
        out[key] = SCHEMA[key](value, where)
    pre = out.get("preprocess", {})
    for key in ("size", "resize"):
        values = pre.get(key, [1]) if key == "size" else [pre.get(key, 1)]
        if any(v < 1 for v in values):
            raise Invalid(f"[preprocess] {key} must be at least 1")
    if any(v == 0 for v in pre.get("std", [])) or pre.get("scale", 1) == 0:
        raise Invalid("[preprocess] std and scale must not be 0 (they divide and multiply every pixel)")
    smooth = out.get("quantize", {}).get("smooth")
    if smooth is not None and not 0 <= smooth <= 1:
        raise Invalid(f"[quantize] smooth is {smooth:g}; SmoothQuant's alpha is between 0 and 1")
    block_size = out.get("quantize", {}).get("block_size")
    if block_size is not None and block_size not in INT4_BLOCK_SIZES:
        raise Invalid(f"[quantize] block_size is {block_size}; TensorRT takes INT4 blocks of "
                       f"{', '.join(map(str, INT4_BLOCK_SIZES))}")
    if out.get("quantize", {}).get("min_weights", 0) < 0:
        raise Invalid("[quantize] min_weights must be 0 or more (weight elements a layer needs to be quantized)")
    for i, spec in enumerate(out.get("inputs", [])):
        if any(d < -1 or d == 0 for d in spec["shape"]):
            raise Invalid(f"[[inputs]] #{i + 1} shape {spec['shape']}: dimensions are positive, or -1 for dynamic")
        dtype, value = spec.get("dtype", "float32"), spec.get("value")
        if value is not None and not is_float(dtype) and not _holds(dtype, value):
            raise Invalid(f"[[inputs]] #{i + 1} value {value:g}: an input of dtype {dtype} cannot hold it; give "
                           f"{'0 or 1' if dtype == 'bool' else 'a whole number in its range'}")
    return out


def _holds(dtype: str, value: float) -> bool:
    """Return True if an integer or bool input of `dtype` holds `value` exactly (2.5 would be cut to 2)."""
    if dtype == "bool":
        return value in (0, 1)
    bits = int(dtype.removeprefix("u").removeprefix("int"))
    low, high = (0, 2**bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return value.is_integer() and low <= value <= high

