"""Without a task in the spec, validate judges each output by the task `trtpipe init` guesses, says so
in the report, and reads a detector's layout from its shape; a layout the FP32 boxes do not confirm
(more classes than boxes, boxes outside the image or all in one place) is exit 2 naming the key."""

import json

import numpy as np
import onnx
import pytest
from damage import scale_channels

from models import save, save_batches, yolo_like
from trtpipe.quality.tasks.detection import decode, infer_layout, yolox_grid
from trtpipe.spec import OutputSpec


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    save_batches(root / "val", np.random.default_rng(3).uniform(0, 1, (32, 3, 64, 64)).astype(np.float32))
    return root


def _head(cli, root, name, fp16=True, **kwargs):
    save(yolo_like(**kwargs), root / f"{name}.onnx")
    if fp16:
        code, _, err = cli("quantize", root / f"{name}.onnx", "--precision", "fp16", "-o", root / f"{name}.fp16.onnx")
        assert code == 0, err
    return root / f"{name}.onnx"


def _validate(cli, candidate, baseline, data, *args):
    return cli("validate", candidate, "--baseline", baseline, "--data", data, *args)


@pytest.mark.parametrize("layout,width", [("yolov8", 22), ("yolov5", 23)])
def test_no_spec_infers_detection_and_the_layout_and_says_why(cli, images, layout, width):
    model = _head(cli, images, layout, layout=layout)
    code, out, err = _validate(cli, model.with_suffix(".fp16.onnx"), model, images / "val", "--json")
    assert code == 0, err
    output = json.loads(out)["outputs"]["output0"]
    assert (output["task"], output["layout"]) == ("detection", layout)
    assert output["why"].startswith("no task in the spec; inferred as 'trtpipe init' does: image input and output 'output0'")
    shape = f"[batch, {width}, 64]" if layout == "yolov8" else f"[batch, 64, {width}]"
    assert output["layout_why"].startswith(f"inferred from {shape}")
    assert output["map50"] > 0.95 and output["baseline_boxes"] > 100
    _, markdown, _ = _validate(cli, model.with_suffix(".fp16.onnx"), model, images / "val")
    assert f"## output0 (detection, layout {layout})" in markdown and "Task: no task in the spec; inferred" in markdown


def test_no_spec_fails_the_issues_yolov8n_with_class_scores_scaled_by_a_fifth(cli, images):
    model = _head(cli, images, "scaled")
    damaged = scale_channels(onnx.load(str(images / "scaled.fp16.onnx")), "output0", 22, {4 + c: 0.2 for c in range(18)})
    save(damaged, images / "scaled.damaged.onnx")
    code, out, _ = _validate(cli, images / "scaled.damaged.onnx", model, images / "val", "--json")
    report = json.loads(out)
    assert code == 1 and report["outputs"]["output0"]["task"] == "detection"
    # scores x0.2 fall below conf: F1 at the operating point fails (mAP ranks to 0.001, so the order it sees is kept)
    assert "f1" in {c["metric"] for c in report["checks"] if not c["passed"]}


@pytest.mark.parametrize("kwargs,spec,needle", [
    # YOLOX's [batch, boxes, 5+classes] declared as YOLOv8: 60 "classes" on 23 "boxes"
    ({"layout": "yolov5"}, 'layout = "yolov8"', "has 60 classes on 23 boxes, more classes than boxes; set layout"),
    ({"box_pixels": 640.0}, "", "FP32 boxes have their centre outside the 64x64 image, read as layout yolov8"),
    ({"box_pixels": 0.5}, "", "FP32 boxes are centred within"),  # normalized boxes in a 64x64 image: the top-left corner
])
def test_a_layout_the_outputs_do_not_confirm_is_exit_2_naming_the_key(cli, images, kwargs, spec, needle):
    model = _head(cli, images, "wrong", fp16=False, **kwargs)
    args = []
    if spec:
        (images / "model.toml").write_text(f'[[outputs]]\nname = "output0"\ntask = "detection"\n{spec}\n')
        args = ["--spec", images / "model.toml"]
    code, _, err = _validate(cli, model, model, images / "val", *args)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert needle in err and "layout" in err


def test_a_rank3_output_no_yolo_layout_reads_is_judged_generic_and_says_why(cli, images):
    """[batch, 4, 64]: four values per box and no class is neither YOLO layout, so no detection is guessed."""
    model = _head(cli, images, "boxes_only", fp16=False, classes=0)
    code, out, err = _validate(cli, model, model, images / "val", "--json")
    assert code == 0, err
    output = json.loads(out)["outputs"]["output0"]
    assert output["task"] == "generic" and "no task recognised" in output["why"]


def test_infer_layout_reads_the_shorter_axis_as_values_per_box():
    assert infer_layout("o", [1, 84, 8400])[0] == "yolov8"
    assert infer_layout("o", [1, 3549, 6])[0] == "yolov5"  # YOLOX-nano at 416: 4 + objectness + 1 class
    with pytest.raises(Exception, match="neither YOLOv8's"):
        infer_layout("o", [1, 100, 4])


def test_yolox_undecoded_boxes_are_placed_on_their_grid():
    """YOLOX's export writes x, y as offsets in a cell and w, h as logs of the stride (ddddocr's detector):
    decoded on the 64x64 image's grid (8x8 + 4x4 + 2x2 cells), one box lands where YOLOX's own
    post-processing puts it; the same tensor decoded to pixels reads as yolov5."""
    cells, strides = yolox_grid(64, 64)
    assert len(cells) == 84 and strides[0, 0] == 8 and strides[-1, 0] == 32
    raw = np.zeros((1, 84, 7), np.float32)
    raw[0, :, 2:4] = -3.0  # every other box tiny and unsure
    k = 2 * 8 + 3  # stride 8, row 2, column 3
    raw[0, k] = [0.5, 0.5, np.log(2), np.log(3), 0.9, 0.1, 0.8]  # centre (28, 20), 16 x 24, class 1
    layout, why = infer_layout("o", raw.shape, (64, 64), raw)
    assert layout == "yolox" and "grid cell" in why
    dets = decode({"o": raw}, 0, OutputSpec("o", "detection", "yolox"), image=(64, 64))
    np.testing.assert_allclose(dets.boxes, [[20, 8, 36, 32]], atol=1e-4)
    assert dets.classes.tolist() == [1] and abs(dets.scores[0] - 0.72) < 1e-6
    decoded = raw.copy()
    decoded[0, :, :2] = (raw[0, :, :2] + cells) * strides
    assert infer_layout("o", decoded.shape, (64, 64), decoded)[0] == "yolov5"
    with pytest.raises(Exception, match="YOLOX grid cells; set layout yolov5"):
        decode({"o": raw[:, :80]}, 0, OutputSpec("o", "detection", "yolox"), image=(64, 64))
