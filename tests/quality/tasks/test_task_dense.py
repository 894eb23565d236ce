"""Dense maps are judged by their thresholded masks: PP-OCRv4's text detector on scanned text.
The INT8 typed ONNX that sensitivity's mask-IoU ranking suggests (six layers kept out) passes; one
layer's scale off by 100x fails; photos without text are an error, not a verdict."""

import json

import numpy as np
import onnx
import pytest
from damage import scale_layer
from zoo import PPOCR_DET, page_photos, wheel_model

from trtpipe.quality.validate import compare, thresholds_for
from trtpipe.runtime.onnxrt import OnnxRunner
from trtpipe.spec import load_spec

SPEC = """name = "ppocr-det"
[[inputs]]
name = "x"
shape = [-1, 3, 320, 320]
[preprocess]
size = [320, 320]
scale = 0.00392156862745098
mean = [0.485, 0.456, 0.406]
std = [0.229, 0.224, 0.225]
[data]
calibration = "calib"
validation = "val"
[[outputs]]
name = "sigmoid_0.tmp_0"
task = "dense"
threshold = 0.3  # PP-OCR's DB post-processing threshold
"""
# `trtpipe sensitivity --spec` on this data ranks these first by mask IoU (0.78 to 0.98 alone);
# with them quantized the INT8 map's IoU is 0.71, without them 0.96.
KEPT_OUT = ["p2o.Conv.0", "p2o.Conv.1", "p2o.Conv.2", "p2o.Conv.3", "p2o.Conv.21", "p2o.Conv.25"]


@pytest.fixture(scope="module")
def ocr(tmp_path_factory):
    from click.testing import CliRunner

    from trtpipe.cli import main

    root = tmp_path_factory.mktemp("ocr")
    (root / "ocr.onnx").write_bytes(wheel_model(*PPOCR_DET).read_bytes())
    (root / "model.toml").write_text(SPEC)
    page_photos(root / "calib", offsets=(32, 160), flipped=True)
    page_photos(root / "val", extra=("coffee",))
    args = [["calibrate", root / "ocr.onnx", "--spec", root / "model.toml", "--method", "max", "-o", root / "ocr.cache"],
            ["quantize", root / "ocr.onnx", "--precision", "int8", "--cache", root / "ocr.cache", "--unquantized", "fp32",
             "-o", root / "ocr.int8.onnx"] + [a for name in KEPT_OUT for a in ("--exclude", name)]]
    for arguments in args:
        result = CliRunner().invoke(main, [str(a) for a in arguments])
        assert result.exit_code == 0, result.output
    return root


def test_int8_passes_and_one_layer_100x_off_fails(ocr, cli):
    code, out, _ = cli("validate", ocr / "ocr.int8.onnx", "--baseline", ocr / "ocr.onnx", "--spec", ocr / "model.toml",
                       "--report", ocr / "reports", "--json")
    report = json.loads(out)
    assert code == 0, report["checks"]
    text = report["outputs"]["sigmoid_0.tmp_0"]
    assert text["task"] == "dense" and text["iou"] > 0.93 and text["pixel_agreement"] > 0.99
    assert report["decided_by"]["metric"] in ("iou", "pixel_agreement")
    assert (ocr / "reports" / "ocr.int8.onnx.sigmoid_0_tmp_0.png").exists()

    spec = load_spec(ocr / "model.toml")
    damaged = scale_layer(onnx.load(ocr / "ocr.int8.onnx"), "p2o.Conv.10", 100)
    with OnnxRunner(ocr / "ocr.onnx") as fp32, OnnxRunner("damaged.onnx", model=damaged) as bad:
        report = compare(bad, fp32, spec, ocr / "val", "int8", thresholds=thresholds_for("int8", spec), show_progress=False)
    assert not report.passed
    assert "iou" in {c.metric for c in report.checks if not c.passed}
    assert report.outputs["sigmoid_0.tmp_0"]["iou"] < 0.85


def test_photos_without_text_are_an_error_naming_the_output(ocr, cli):
    from PIL import Image
    from skimage import data

    (ocr / "cats").mkdir()
    Image.fromarray(data.chelsea()).save(ocr / "cats" / "chelsea.png")
    Image.fromarray(np.ascontiguousarray(data.chelsea()[:, ::-1])).save(ocr / "cats" / "mirrored.png")
    code, _, err = cli("validate", ocr / "ocr.int8.onnx", "--baseline", ocr / "ocr.onnx", "--spec", ocr / "model.toml",
                       "--data", ocr / "cats")
    assert code == 2 and "Traceback" not in err
    assert "sigmoid_0.tmp_0" in err and "likely cause" in err and "without" in err

