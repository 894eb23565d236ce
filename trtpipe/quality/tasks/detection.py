"""Detection: decode boxes by the declared layout, keep those above the confidence threshold after
NMS, and match the candidate's boxes to the baseline's (IoU >= 0.5, same class). The baseline is
the ground truth: precision, recall, F1, mAP@0.5, and the mean IoU of matched boxes (which catches
boxes shifted by a few pixels that still match at 0.5)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.quality.tasks.base import Degenerate, Task

LAYOUTS = {
    "yolov8": "[batch, 4+classes, boxes]: cx, cy, w, h, then one score per class",
    "yolov5": "[batch, boxes, 4+1+classes]: cx, cy, w, h, objectness, then one score per class (YOLOv5, YOLOX)",
    "yolox": "[batch, boxes, 4+1+classes] as YOLOX's export writes it undecoded: one box per grid cell at strides "
             "8, 16, 32, x, y as offsets in cells and w, h as logs of cells, then objectness and class scores",
    "separate": "boxes [batch, boxes, 4] as x1, y1, x2, y2, with score_output [batch, boxes] and "
                "class_output [batch, boxes] (or score_output [batch, boxes, classes])",
    "picodet": "PicoDet's (GFL) heads, one pair per level: score_outputs [batch, cells, classes] as probabilities, "
               "box_outputs [batch, cells, 4*(reg_max+1)] as logits of each side's distance in strides (left, top, "
               "right, bottom) from the cell's centre; each level's stride from its cells on the image",
    "detections": "the model's own detections after its NMS, one run a sample (batch_axis = \"none\"): boxes "
                  "[detections, 4] as x1, y1, x2, y2 with score_output [detections] and class_output [detections] where "
                  "there is one, or [detections, 5 or 6] with the score (and the class) after the box; FP32 and the "
                  "candidate may keep different counts, and no NMS or conf is applied again unless conf is set",
    "heatmap": "a saliency or heat map [batch, 1, height, width] (or [batch, height, width]): each region of pixels over "
               "threshold (0.8) of the map's range, connected 8 ways and of min_area (100) pixels or more, is a box "
               "scored by its peak, kept at conf",
}
CONF = 0.25  # Ultralytics' and most detectors' default confidence threshold
# A heat map's regions: the pixels over this share of the way from the map's least value to its
# greatest, and at least this many of them (img-focus's find_regions_of_interest defaults).
REGION_LEVEL = 0.8
REGION_MIN_AREA = 100
NMS_IOU = 0.45
MATCH_IOU = 0.5
MAX_BOXES = 300
PRE_NMS = 3000
# mAP ranks the candidate's boxes down to this score, as COCO-style evaluation does (Ultralytics
# validates at conf 0.001): a box whose score slips just under `conf` lowers precision, recall and F1
# at the operating point, but still counts, ranked lower, in the AP curve.
AP_CONF = 0.001
PICTURES = 4


@dataclass
class Detections:
    """One sample's detections: boxes as x1, y1, x2, y2, their scores and classes."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)


def cxcywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    cx, cy, w, h = boxes.T
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Return the IoU of every box in `a` with every box in `b` (x1, y1, x2, y2)."""
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(bottom_right - top_left, 0, None), axis=2)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def nms(dets: Detections, iou: float, limit: int = MAX_BOXES) -> Detections:
    """Return the detections greedy per-class NMS keeps, highest score first, at most `limit`."""
    keep = nms_kept(dets, iou, limit)
    return Detections(dets.boxes[keep], dets.scores[keep], dets.classes[keep])


def nms_kept(dets: Detections, iou: float, limit: int = MAX_BOXES) -> list[int]:
    """Return the indices of the detections `nms` keeps, in its order (for what else a box carries: landmarks)."""
    order = np.argsort(-dets.scores, kind="stable")[:PRE_NMS]
    keep: list[int] = []
    for cls in np.unique(dets.classes[order]):
        members = order[dets.classes[order] == cls]
        overlap = iou_matrix(dets.boxes[members], dets.boxes[members])
        alive = np.ones(len(members), bool)
        for i in range(len(members)):
            if alive[i]:
                keep.append(int(members[i]))
                alive[i + 1:] &= overlap[i, i + 1:] <= iou
    return sorted(keep, key=lambda i: -dets.scores[i])[:limit]


# A layout is confirmed on the FP32 boxes (DetectionTask.confirm): most centres inside the image (this
# share of its size beyond the edge is allowed: boxes cut by the edge), and not all in one place
# (centres spread over less than SAME_PLACE of the image).
OUTSIDE = 0.1
SAME_PLACE = 0.02


YOLOX_STRIDES = (8, 16, 32)
# An undecoded YOLOX box's x, y are offsets within its cell (about -1..2); decoded ones are pixels.
UNDECODED_OFFSET = 4.0


@functools.lru_cache(maxsize=8)  # decode asks for the same image's grid for every sample, twice
def yolox_grid(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Return each YOLOX box's cell (x, y) and stride, in the order its export writes them: stride 8 first, rows.
    The arrays are shared between callers: read them, never write them."""
    cells, strides = [], []
    for stride in YOLOX_STRIDES:
        ys, xs = np.meshgrid(np.arange(height // stride), np.arange(width // stride), indexing="ij")
        cells.append(np.stack([xs.ravel(), ys.ravel()], axis=1))
        strides.append(np.full((xs.size, 1), stride))
    grid = np.concatenate(cells).astype(np.float64), np.concatenate(strides).astype(np.float64)
    for array in grid:
        array.flags.writeable = False  # cached: one caller's write would move every later box
    return grid


PICODET_STRIDES = (4, 8, 16, 32, 64, 128)


@functools.lru_cache(maxsize=16)
def picodet_stride(cells: int, height: int, width: int) -> int | None:
    """Return the stride whose grid over the image (cells rounded up, as PicoDet's padded convolutions make
    them) has `cells` cells, else None."""
    for stride in PICODET_STRIDES:
        if -(-height // stride) * -(-width // stride) == cells:
            return stride
    return None


@functools.lru_cache(maxsize=16)  # as yolox_grid: shared, read-only
def picodet_centres(height: int, width: int, stride: int) -> np.ndarray:
    """Return the centres (x, y) in pixels of a stride's cells over the image, in rows, as the export writes them."""
    ys, xs = np.meshgrid(np.arange(-(-height // stride)), np.arange(-(-width // stride)), indexing="ij")
    centres = (np.stack([xs.ravel(), ys.ravel()], axis=1) + 0.5) * stride
    centres.flags.writeable = False
    return centres


def picodet_boxes(distribution: np.ndarray, stride: int, centres: np.ndarray) -> np.ndarray:
    """Return x1, y1, x2, y2 per cell from its box distribution [cells, 4*bins]: each side's distance is the
    expectation of its softmax over bins 0..bins-1, in strides (Generalized Focal Loss' integral)."""
    logits = distribution.reshape(len(distribution), 4, -1)
    weights = np.exp(logits - logits.max(axis=2, keepdims=True))
    weights /= weights.sum(axis=2, keepdims=True)
    distances = (weights * np.arange(logits.shape[2])).sum(axis=2) * stride  # left, top, right, bottom
    return np.concatenate([centres - distances[:, :2], centres + distances[:, 2:]], axis=1)


def picodet_decode(outputs: dict, index: int, spec, image: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Return the boxes and class scores of every cell of every level, finest first."""
    boxes, scores = [], []
    for score_name, box_name in zip(spec.score_outputs, spec.box_outputs):
        level = np.asarray(outputs[score_name][index], np.float64)
        stride = picodet_stride(len(level), *image)
        boxes.append(picodet_boxes(np.asarray(outputs[box_name][index], np.float64), stride,
                                   picodet_centres(*image, stride)))
        scores.append(level)
    return np.concatenate(boxes), np.concatenate(scores)


def components(mask: np.ndarray) -> np.ndarray:
    """Return the labels of the 8-connected regions of a 2-D bool mask (0 outside them): each pixel takes
    the least label around it, then the label of the pixel its label names, until nothing changes."""
    height, width = mask.shape
    outside = height * width
    flat = np.where(mask.ravel(), np.arange(outside), outside)
    while True:
        padded = np.pad(flat.reshape(height, width), 1, constant_values=outside)
        least = np.min([padded[dy:dy + height, dx:dx + width] for dy in range(3) for dx in range(3)], axis=0).ravel()
        least = np.where(mask.ravel(), least, outside)
        least = np.where(least < outside, np.append(least, outside)[least], outside)  # jump to the label's label
        if np.array_equal(least, flat):
            break
        flat = least
    return np.where(mask.ravel(), flat + 1, 0).reshape(height, width)


def heatmap_regions(heat: np.ndarray, level: float, min_area: int, image: tuple[int, int] | None) -> tuple[np.ndarray, np.ndarray]:
    """Return the boxes (x1, y1, x2, y2, in the image's pixels when its size is known) and peak values of a
    2-D map's regions over `level` of its range with `min_area` pixels or more."""
    low, high = float(heat.min()), float(heat.max())
    if not high > low:  # a flat map has no region
        return np.zeros((0, 4)), np.zeros(0)
    labels = components((heat - low) / (high - low) > level)
    found, sizes = np.unique(labels[labels > 0], return_counts=True)
    boxes, peaks = [], []
    for label in found[sizes >= min_area]:
        ys, xs = np.nonzero(labels == label)
        boxes.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
        peaks.append(heat[ys, xs].max())
    boxes = np.array(boxes, np.float64).reshape(-1, 4)
    if image is not None:
        boxes *= np.array([image[1] / heat.shape[1], image[0] / heat.shape[0]] * 2)
    return boxes, np.array(peaks, np.float64)


def infer_layout(name: str, shape, image: tuple[int, int] | None = None, values: np.ndarray | None = None) -> tuple[str, str]:
    """Return the layout a rank-3 detector output of `shape` is read by, and why: the shorter of its last two
    axes holds the values per box (4+classes for YOLOv8, 5+classes for YOLOv5/YOLOX), the longer the boxes.
    A [batch, boxes, 5+classes] output with one box per grid cell of the `image` (height, width) whose
    `values` hold cell offsets, not pixels, is YOLOX's undecoded export."""
    shape = list(shape)
    if (len(shape) == 3 and 6 <= shape[2] < shape[1] and image is not None and values is not None
            and shape[1] == len(yolox_grid(*image)[0]) and np.abs(values[..., :2]).max() < UNDECODED_OFFSET):
        return "yolox", (f"inferred from [batch, {shape[1]}, {shape[2]}]: one box per grid cell of the "
                         f"{image[1]}x{image[0]} input at strides 8, 16, 32, with x, y offsets under {UNDECODED_OFFSET:g} "
                         f"cells, as YOLOX's export writes them undecoded ({shape[2] - 5} classes)")
    if len(shape) == 3 and 5 <= shape[1] < shape[2]:
        return "yolov8", (f"inferred from [batch, {shape[1]}, {shape[2]}]: {shape[1]} values per box (4 + "
                          f"{shape[1] - 4} classes) on {shape[2]} boxes, as YOLOv8 writes {LAYOUTS['yolov8']}")
    if len(shape) == 3 and 6 <= shape[2] < shape[1]:
        return "yolov5", (f"inferred from [batch, {shape[1]}, {shape[2]}]: {shape[1]} boxes of {shape[2]} values "
                          f"(4 + objectness + {shape[2] - 5} classes), as YOLOv5 and YOLOX write {LAYOUTS['yolov5']}")
    raise TrtpipeError(f"output '{name}' has shape {shape}, which is neither YOLOv8's [batch, 4+classes, boxes] nor "
                       "YOLOv5/YOLOX's [batch, boxes, 5+classes]; set layout in the spec's [[outputs]] (separate: decoded boxes "
                       "with score_output and class_output), or task = \"generic\" for this output")


def default_conf(spec) -> float:
    """Return the confidence a box must reach to count: the spec's, else CONF, else 0 for a model's own detections
    (its NMS kept them at its own threshold)."""
    if spec.conf is not None:
        return spec.conf
    return 0.0 if spec.layout == "detections" else CONF


def decode(outputs: dict, index: int, spec, conf: float | None = None, image: tuple[int, int] | None = None) -> Detections:
    """Return sample `index`'s detections above `conf` (default: the spec's), after NMS, by `spec.layout`;
    `image` (height, width) places YOLOX's undecoded boxes on their grid."""
    layout = spec.layout
    if conf is None:
        conf = default_conf(spec)
    main = np.asarray(outputs[spec.name][index], np.float64)
    if layout == "detections":  # already after the model's NMS: kept as it kept them
        boxes = main.reshape(-1, main.shape[-1])
        if spec.score_output is not None:
            scores = _a_value_a_box(outputs, index, spec, "score_output", len(boxes)).astype(np.float64)
        else:
            scores = boxes[:, 4]
        if spec.class_output is not None:
            classes = _a_value_a_box(outputs, index, spec, "class_output", len(boxes)).astype(np.int64)
        else:
            classes = boxes[:, 5].astype(np.int64) if boxes.shape[1] > 5 else np.zeros(len(boxes), np.int64)
        keep = scores >= conf
        corners = boxes[keep, :4]  # in either order: an IoU needs x1 <= x2
        corners = np.concatenate([np.minimum(corners[:, :2], corners[:, 2:]), np.maximum(corners[:, :2], corners[:, 2:])], 1)
        return Detections(corners, scores[keep], classes[keep])
    if layout == "yolov8":
        rows = main.T  # boxes x (4 + classes)
        boxes, class_scores = cxcywh_to_xyxy(rows[:, :4]), rows[:, 4:]
    elif layout == "yolox":
        if image is None:
            raise TrtpipeError(f"output '{spec.name}': layout yolox places boxes on the image's grid, but no one image "
                               "input (rank 4) gives its size; set layout yolov5 for decoded boxes")
        cells, strides = yolox_grid(*image)
        if len(cells) != len(main):
            raise TrtpipeError(f"output '{spec.name}' has {len(main)} boxes, but a {image[1]}x{image[0]} image has "
                               f"{len(cells)} YOLOX grid cells; set layout yolov5 for decoded boxes")
        centres = (main[:, :2] + cells) * strides
        sizes = np.exp(np.clip(main[:, 2:4], -20, 20)) * strides
        boxes, class_scores = cxcywh_to_xyxy(np.concatenate([centres, sizes], 1)), main[:, 5:] * main[:, 4:5]
    elif layout == "yolov5":
        boxes, class_scores = cxcywh_to_xyxy(main[:, :4]), main[:, 5:] * main[:, 4:5]
    elif layout == "picodet":
        if image is None:
            raise TrtpipeError(f"output '{spec.name}': layout picodet places boxes on the image's grid, but no one "
                               "image input (rank 4) gives its size")
        boxes, class_scores = picodet_decode(outputs, index, spec, image)
    elif layout == "heatmap":
        level = spec.threshold if spec.threshold is not None else REGION_LEVEL
        min_area = spec.min_area if spec.min_area is not None else REGION_MIN_AREA
        boxes, peaks = heatmap_regions(main.reshape(main.shape[-2:]), level, min_area, image)
        keep = peaks >= conf  # regions never overlap: nothing for NMS to do
        return Detections(boxes[keep], peaks[keep], np.zeros(int(keep.sum()), np.int64))
    else:
        boxes = main
        scores = np.asarray(outputs[spec.score_output][index], np.float64)
        if scores.ndim == 2 and len(scores) == len(boxes):
            class_scores = scores
        else:
            scores = _a_value_a_box(outputs, index, spec, "score_output", len(boxes)).astype(np.float64)
            classes = (np.zeros(len(boxes), np.int64) if spec.class_output is None else
                       _a_value_a_box(outputs, index, spec, "class_output", len(boxes)).astype(np.int64))
            keep = scores >= conf
            return nms(Detections(boxes[keep], scores[keep], classes[keep]), _nms_iou(spec))
    classes = class_scores.argmax(axis=1) if class_scores.shape[1] else np.zeros(len(boxes), np.int64)
    scores = class_scores.max(axis=1) if class_scores.shape[1] else np.zeros(len(boxes))
    keep = scores >= conf
    return nms(Detections(boxes[keep], scores[keep], classes[keep]), _nms_iou(spec))


def _a_value_a_box(outputs: dict, index: int, spec, key: str, boxes: int) -> np.ndarray:
    """Return sample `index` of the output that the spec's `key` (score_output, class_output) names, flat: one
    value a box of `spec.name`; raise, naming both, when it holds another count (the key names the wrong output)."""
    name = getattr(spec, key)
    values = np.asarray(outputs[name][index])
    if values.size != boxes or (values.ndim and max(values.shape) != boxes):  # [boxes], or with axes of 1
        raise TrtpipeError(f"output '{name}', the {key} of '{spec.name}', has shape {list(values.shape)} a sample, not one "
                           f"value for each of the {boxes} boxes of '{spec.name}' ({LAYOUTS[spec.layout]}); fix {key} in "
                           "the spec's [[outputs]]")
    return values.reshape(-1)


def image_size(inputs) -> tuple[int, int] | None:
    """Return the height and width of the only 4-D input (NCHW, or NHWC when its last axis is 1 or 3), else None."""
    images = [np.shape(a) for a in inputs.values() if np.ndim(a) == 4]
    if len(images) != 1:
        return None
    shape = images[0]
    return (shape[1], shape[2]) if shape[3] in (1, 3) and shape[1] not in (1, 3) else (shape[2], shape[3])


def _nms_iou(spec) -> float:
    return spec.iou if spec.iou is not None else NMS_IOU


def match(candidate: Detections, baseline: Detections, threshold: float = MATCH_IOU) -> tuple[np.ndarray, np.ndarray]:
    """Return, per candidate box (score order as given), the IoU with the baseline box it matched (0: none),
    and the index of that box (-1): greedy by score, same class, IoU >= `threshold`, each baseline box once."""
    ious = np.zeros(len(candidate))
    matched = np.full(len(candidate), -1)
    if not len(candidate) or not len(baseline):
        return ious, matched
    overlap = iou_matrix(candidate.boxes, baseline.boxes)
    overlap[candidate.classes[:, None] != baseline.classes[None, :]] = 0
    taken = np.zeros(len(baseline), bool)
    for i in np.argsort(-candidate.scores, kind="stable"):
        row = np.where(taken, 0.0, overlap[i])
        j = int(row.argmax())
        if row[j] >= threshold:
            taken[j], ious[i], matched[i] = True, row[j], j
    return ious, matched


def average_precision(scores: np.ndarray, true_positive: np.ndarray, positives: int) -> float:
    """Return the all-point interpolated AP of detections (scores, TP flags) against `positives` truths."""
    if positives == 0:
        return float("nan")
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(true_positive[order])
    fp = np.cumsum(~true_positive[order])
    recall = np.concatenate([[0.0], tp / positives, [1.0]])
    precision = np.concatenate([[1.0], tp / np.maximum(tp + fp, 1), [0.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    steps = np.flatnonzero(recall[1:] != recall[:-1])
    return float(np.sum((recall[steps + 1] - recall[steps]) * precision[steps + 1]))


@dataclass
class DetectionSample:
    """A sample to draw: the input image, the baseline's and the candidate's boxes."""

    sample: str
    image: np.ndarray | None
    baseline: Detections
    candidate: Detections
    misses: int


class DetectionTask(Task):
    name = "detection"
    judged = ("map50", "f1", "box_iou", "precision", "recall")
    primary = "map50"

    def __init__(self, spec):
        super().__init__(spec)
        layout = spec.layout
        if layout is not None and layout not in LAYOUTS:
            raise TrtpipeError(f"--spec: [[outputs]] {spec.name}: layout {layout} is not one of "
                               f"{', '.join(LAYOUTS)} ({'; '.join(f'{k}: {v}' for k, v in LAYOUTS.items())})")
        self.layout_why = "given in the spec's [[outputs]]" if layout is not None else ""
        if layout == "separate" and spec.score_output is None:
            raise TrtpipeError(f"--spec: [[outputs]] {spec.name}: layout separate needs score_output (and class_output)")
        if layout == "picodet":
            levels = spec.score_outputs or [], spec.box_outputs or []
            if not levels[0] or len(levels[0]) != len(levels[1]) or spec.name not in levels[0] + levels[1]:
                raise TrtpipeError(f"--spec: [[outputs]] {spec.name}: layout picodet needs score_outputs and "
                                   "box_outputs, one of each per level in the same order, finest stride first, with "
                                   "name one of them")
        self.scores: list[np.ndarray] = []  # candidate scores, classes and TP flags over the set, for AP
        self.classes: list[np.ndarray] = []
        self.hits: list[np.ndarray] = []
        self.truths: dict[int, int] = {}
        self.matched_ious: list[float] = []
        self.score_errors: list[float] = []
        self.candidate_boxes = 0
        self.tp = 0
        self.conf = default_conf(spec)
        self.samples: list[DetectionSample] = []
        self.centres: list[np.ndarray] = []  # the FP32 boxes' centres over the set, to confirm the layout
        self.image_size: tuple[int, int] | None = None  # height, width of the image input, when there is one

    @property
    def compares_elements(self) -> bool:
        """False for a model's own detections: FP32 and the candidate may keep different counts of boxes."""
        return self.spec.layout != "detections"

    @property
    def reads(self) -> list[str]:
        named = [self.spec.name, self.spec.score_output, self.spec.class_output,
                 *(self.spec.score_outputs or []), *(self.spec.box_outputs or [])]
        return list(dict.fromkeys(n for n in named if n is not None))

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        from dataclasses import replace

        from trtpipe.quality.tasks.classification import thumbnail

        self.image_size = self.image_size or image_size(inputs)
        if self.spec.layout is None:  # read from the first batch's shape: a dynamic dimension has a size there
            layout, self.layout_why = infer_layout(self.output, baseline.shape, self.image_size, baseline)
            self.spec = replace(self.spec, layout=layout)
        if self.spec.layout == "picodet":
            self._check_picodet(want)
        elif self.spec.layout == "heatmap":
            if not (baseline.ndim == 3 or (baseline.ndim == 4 and baseline.shape[1] == 1)):
                raise TrtpipeError(f"output '{self.output}' has shape {list(baseline.shape)}, which layout heatmap cannot "
                                   f"read ({LAYOUTS['heatmap']}); set task = \"dense\" for a map of several channels")
        else:
            self._check_shape(baseline)
        for i, sample in enumerate(ids):
            base = decode(want, i, self.spec, image=self.image_size)
            ranked = decode(got, i, self.spec, AP_CONF, self.image_size)
            self.centres.append((base.boxes[:, :2] + base.boxes[:, 2:]) / 2)
            at_conf = ranked.scores >= self.conf
            cand = Detections(ranked.boxes[at_conf], ranked.scores[at_conf], ranked.classes[at_conf])
            ious, matched = match(cand, base)
            for cls in base.classes.tolist():
                self.truths[cls] = self.truths.get(cls, 0) + 1
            _, ranked_matched = match(ranked, base)
            self.scores.append(ranked.scores)
            self.classes.append(ranked.classes)
            self.hits.append(ranked_matched >= 0)
            if not self.compares_elements:  # the raw metrics over the boxes both kept, paired by the match
                pairs = matched >= 0
                self.raw.update(cand.boxes[pairs][None], base.boxes[matched[pairs]][None])
            self.tp += int((matched >= 0).sum())
            self.matched_ious += ious[matched >= 0].tolist()
            self.score_errors += np.abs(cand.scores[matched >= 0] - base.scores[matched[matched >= 0]]).tolist()
            self.candidate_boxes += len(cand)
            misses = int((matched < 0).sum() + len(base) - (matched >= 0).sum())
            if (len(base) or len(cand)) and (len(self.samples) < PICTURES or misses > self.samples[-1].misses):
                self.samples.append(DetectionSample(sample, thumbnail(inputs, i), base, cand, misses))
                self.samples.sort(key=lambda s: -s.misses)
                del self.samples[PICTURES:]

    def _check_shape(self, baseline: np.ndarray) -> None:
        layout = self.spec.layout
        if layout == "detections":
            width = baseline.shape[-1] if baseline.ndim >= 2 else 0
            if baseline.ndim not in (2, 3) or not (width == 4 and self.spec.score_output or width in (5, 6)):
                raise TrtpipeError(f"output '{self.output}' has shape {list(baseline.shape[1:])} a run, which layout "
                                   f"detections cannot read ({LAYOUTS[layout]}); set score_output in its [[outputs]], or "
                                   "another layout")
            return
        if layout == "separate":
            if baseline.ndim != 3 or baseline.shape[2] != 4:
                raise TrtpipeError(f"output '{self.output}' has shape {list(baseline.shape)}, which layout separate cannot "
                                   f"read ({LAYOUTS[layout]}); set layout in the spec's [[outputs]], or name the boxes")
            return
        width = (baseline.shape[1] if layout == "yolov8" else baseline.shape[2]) if baseline.ndim == 3 else 0  # yolox: as yolov5
        if width < 5:
            raise TrtpipeError(f"output '{self.output}' has shape {list(baseline.shape)}, which layout {layout} cannot "
                               f"read ({LAYOUTS[layout]}); set layout in the spec's [[outputs]]")
        if self.spec.classes is not None and width - (4 if layout == "yolov8" else 5) != self.spec.classes:
            raise TrtpipeError(f"output '{self.output}' has {width} values per box, not {self.spec.classes} classes plus "
                               f"the box ({LAYOUTS[layout]}); fix classes or layout in the spec's [[outputs]]")
        boxes = baseline.shape[2] if layout == "yolov8" else baseline.shape[1]
        if width - (4 if layout == "yolov8" else 5) > boxes:
            # YOLOX's [1, 3549, 6] read as YOLOv8: 3545 classes on 6 boxes. No detector has more classes than boxes.
            raise TrtpipeError(f"output '{self.output}' {list(baseline.shape)} read as layout {layout} ({LAYOUTS[layout]}) "
                               f"has {width - (4 if layout == 'yolov8' else 5)} classes on {boxes} boxes, more classes "
                               "than boxes; set layout in the spec's [[outputs]] (yolov5 for [batch, boxes, 5+classes])")

    def _check_picodet(self, want) -> None:
        """Raise unless each level is a score map and a box distribution on one grid of the image."""
        if self.image_size is None:
            raise TrtpipeError(f"output '{self.output}': layout picodet places boxes on the image's grid, but no one "
                               "image input (rank 4) gives its size")
        height, width = self.image_size
        classes = set()
        for score_name, box_name in zip(self.spec.score_outputs, self.spec.box_outputs):
            scores, boxes = want[score_name], want[box_name]
            if scores.ndim != 3 or boxes.ndim != 3 or scores.shape[1] != boxes.shape[1] or boxes.shape[2] % 4 \
                    or boxes.shape[2] < 8:
                raise TrtpipeError(f"outputs '{score_name}' {list(scores.shape)} and '{box_name}' {list(boxes.shape)} "
                                   f"are not one level of layout picodet ({LAYOUTS['picodet']}); fix score_outputs and "
                                   "box_outputs in the spec's [[outputs]]")
            if picodet_stride(scores.shape[1], height, width) is None:
                raise TrtpipeError(f"output '{score_name}' has {scores.shape[1]} cells, which no stride of "
                                   f"{', '.join(map(str, PICODET_STRIDES))} gives on the {width}x{height} image; fix "
                                   "score_outputs in the spec's [[outputs]]")
            if np.nanmin(scores) < 0 or np.nanmax(scores) > 1:
                raise TrtpipeError(f"output '{score_name}' has FP32 scores outside 0..1; layout picodet reads class "
                                   "scores as probabilities (the sigmoid inside the export, as PaddleDetection writes "
                                   "it); fix score_outputs in the spec's [[outputs]]")
            classes.add(scores.shape[2])
        if len(classes) != 1 or (self.spec.classes is not None and classes != {self.spec.classes}):
            raise TrtpipeError(f"output '{self.output}': the picodet levels have {sorted(classes)} classes"
                               f"{'' if self.spec.classes is None else f', not {self.spec.classes}'}; fix classes or "
                               "score_outputs in the spec's [[outputs]]")

    def finish(self) -> None:
        super().finish()
        if not self.truths:
            conf = default_conf(self.spec)
            raise Degenerate(f"output '{self.output}': the FP32 baseline detects nothing above conf {conf:g} in "
                             f"{self.raw.count} samples, so no box can be compared; likely cause: data without the "
                             "objects this model finds, preprocessing that differs from training, or a wrong layout; "
                             "use data with objects or lower conf in [[outputs]]")
        if self.spec.layout != "detections":  # the model's own boxes, which may be in 0..1: no layout to confirm
            self.confirm()

    def confirm(self) -> None:
        """Raise unless the FP32 boxes look like boxes in the image: most centres inside it, and spread
        over it, not all at one place (other values read as boxes by a wrong layout)."""
        centres = np.concatenate(self.centres) if self.centres else np.zeros((0, 2))
        fix = (f"layout {self.spec.layout} ({self.layout_why}); set layout in the spec's [[outputs]] for "
               f"'{self.output}': yolov8, yolov5, yolox, separate, picodet, heatmap or detections, as docs/validation.md "
               "describes them")
        if self.image_size is not None:
            height, width = self.image_size
            inside = ((centres[:, 0] >= -OUTSIDE * width) & (centres[:, 0] <= (1 + OUTSIDE) * width)
                      & (centres[:, 1] >= -OUTSIDE * height) & (centres[:, 1] <= (1 + OUTSIDE) * height))
            if inside.mean() < 0.5:
                raise TrtpipeError(f"output '{self.output}': {1 - inside.mean():.0%} of the {len(centres)} FP32 boxes have "
                                   f"their centre outside the {width}x{height} image, read as {fix}")
        scale = max(self.image_size) if self.image_size is not None else None
        spread = float(np.ptp(centres, axis=0).max()) if len(centres) else 0.0
        if len(centres) >= 3 and scale is not None and spread < SAME_PLACE * scale:
            x, y = centres.mean(axis=0)
            raise TrtpipeError(f"output '{self.output}': all {len(centres)} FP32 boxes are centred within {spread:.3g} "
                               f"pixels of ({x:.3g}, {y:.3g}), read as {fix}")

    def described(self) -> dict[str, str]:
        return {**super().described(), "layout": self.spec.layout, "layout_why": self.layout_why}

    def metrics(self) -> dict[str, float]:
        hits = np.concatenate(self.hits) if self.hits else np.zeros(0, bool)
        scores = np.concatenate(self.scores) if self.scores else np.zeros(0)
        classes = np.concatenate(self.classes) if self.classes else np.zeros(0, np.int64)
        truths = sum(self.truths.values())
        tp = self.tp
        precision = tp / self.candidate_boxes if self.candidate_boxes else (1.0 if not truths else 0.0)
        recall = tp / truths if truths else 1.0
        aps = [average_precision(scores[classes == c], hits[classes == c], n) for c, n in self.truths.items()]
        return {
            "map50": float(np.mean(aps)) if aps else float("nan"),
            "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
            "box_iou": float(np.mean(self.matched_ious)) if self.matched_ious else 0.0,
            "precision": precision, "recall": recall,
            "score_error_median": float(np.median(self.score_errors)) if self.score_errors else float("nan"),
            "baseline_boxes": truths, "candidate_boxes": self.candidate_boxes,
        }

    def picture(self):
        from trtpipe.quality.pictures import BoxSamples

        return BoxSamples(self.samples)
