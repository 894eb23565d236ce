"""The task metrics against hand-computed cases, the spec's [[outputs]], and degenerate data."""

import json

import numpy as np
import pytest

from models import conv_net, mlp, save, save_batches
from trtpipe.errors import TrtpipeError
from trtpipe.quality.tasks import Degenerate, make_task, make_tasks
from trtpipe.quality.tasks.classification import margins, probabilities
from trtpipe.quality.tasks.dense import masks
from trtpipe.quality.tasks.detection import Detections, average_precision, decode, iou_matrix, match, nms
from trtpipe.quality.tasks.embedding import nearest, neighbour_agreement
from trtpipe.quality.validate import Check, deciding, headline
from trtpipe.runtime.runner import IOSpec
from trtpipe.spec import OutputSpec, load_spec


def test_iou_hand_computed():
    a = np.array([[0, 0, 10, 10.0]])
    b = np.array([[5, 0, 15, 10.0], [20, 20, 30, 30], [0, 0, 10, 10]])
    np.testing.assert_allclose(iou_matrix(a, b), [[50 / 150, 0, 1]])


def test_nms_keeps_the_best_box_per_class_and_overlapping_boxes_of_other_classes():
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [0, 0, 10, 10], [50, 50, 60, 60.0]])
    kept = nms(Detections(boxes, np.array([0.9, 0.8, 0.7, 0.6]), np.array([0, 0, 1, 0])), iou=0.5)
    assert kept.scores.tolist() == [0.9, 0.7, 0.6] and kept.classes.tolist() == [0, 1, 0]


def test_yolov8_layout_decodes_centre_boxes_and_class_scores():
    # one sample, 2 classes, 3 candidate boxes: [4+2, 3]
    out = np.zeros((1, 6, 3))
    out[0, :4, 0] = [10, 10, 4, 6]  # cx, cy, w, h
    out[0, 4:, 0] = [0.1, 0.8]
    out[0, :4, 1] = [30, 30, 2, 2]
    out[0, 4:, 1] = [0.2, 0.1]  # below conf 0.25
    dets = decode({"o": out}, 0, OutputSpec("o", "detection", "yolov8"))
    np.testing.assert_allclose(dets.boxes, [[8, 7, 12, 13]])
    assert dets.classes.tolist() == [1] and dets.scores.tolist() == [0.8]
    yolov5 = np.array([[[10, 10, 4, 6, 0.5, 0.2, 0.9]]])  # objectness 0.5 x class 0.9
    dets = decode({"o": yolov5}, 0, OutputSpec("o", "detection", "yolov5"))
    assert dets.classes.tolist() == [1] and dets.scores.tolist() == [pytest.approx(0.45)]


def test_match_needs_the_same_class_and_iou_half():
    base = Detections(np.array([[0, 0, 10, 10], [20, 20, 30, 30.0]]), np.array([0.9, 0.9]), np.array([0, 1]))
    cand = Detections(np.array([[1, 0, 11, 10], [20, 20, 30, 30.0], [40, 40, 50, 50]]), np.array([0.8, 0.7, 0.6]),
                      np.array([0, 0, 0]))
    ious, matched = match(cand, base)
    assert matched.tolist() == [0, -1, -1]  # the second box is in place but of the wrong class
    assert ious[0] == pytest.approx(90 / 110)


def test_average_precision_hand_computed():
    # ranked TP, FP, TP against 2 truths: precision 1 at recall 0.5, 2/3 at recall 1
    assert average_precision(np.array([0.9, 0.8, 0.7]), np.array([True, False, True]), 2) == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert average_precision(np.array([0.9]), np.array([True]), 2) == pytest.approx(0.5)


def test_dense_masks_threshold_one_channel_and_argmax_several():
    one = np.array([[[[0.1, 0.6], [0.4, 0.9]]]])
    assert masks(one, 1, 0.5).tolist() == [[[0, 1], [0, 1]]]
    several = np.array([[[[1, 0]], [[0, 2]], [[3, 1]]]])  # [1, 3, 1, 2]
    assert masks(several, 1, 0.5).tolist() == [[[2, 1]]]


def test_neighbour_agreement_counts_shared_neighbours():
    base = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]])
    assert neighbour_agreement(base, base, 1) == 1.0
    swapped = base[[0, 2, 1, 3]]  # samples 1 and 2 trade places: half the nearest neighbours change
    assert neighbour_agreement(swapped, base, 1) == 0.0


def test_neighbour_agreement_forgives_the_order_of_near_ties_only():
    """Sample 0's two nearest are 0.002 apart in FP32: a candidate that swaps them keeps its neighbour;
    one that swaps it for a sample 0.5 further away does not."""
    angles = np.radians([0, 10, 10.4, 70, 75])
    base = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    near = base.copy()
    near[2] = [np.cos(np.radians(9.6)), np.sin(np.radians(9.6))]  # now nearer to 0 than sample 1 is
    assert nearest(near, 1)[0, 0] == 2 and nearest(base, 1)[0, 0] == 1
    assert neighbour_agreement(near, base, 1) == 1.0
    assert neighbour_agreement(near, base, 1, near_tie=0.0) < 1.0
    far = base.copy()
    far[3] = [np.cos(np.radians(1)), np.sin(np.radians(1))]  # sample 3 moves next to 0: FP32 has it 0.64 away
    assert neighbour_agreement(far, base, 1) < 1.0


def test_probabilities_and_margins():
    assert probabilities(np.array([[0.2, 0.8]])).tolist() == [[0.2, 0.8]]
    np.testing.assert_allclose(probabilities(np.array([[0.0, np.log(3)]])), [[0.25, 0.75]])
    np.testing.assert_allclose(margins(np.array([[0.1, 0.6, 0.3]])), [0.3])


def test_the_worst_channel_is_seen_behind_a_large_one():
    task = make_task(OutputSpec("o"))
    rng = np.random.default_rng(0)
    want = np.concatenate([rng.normal(0, 100, (8, 1, 50)), rng.normal(0, 0.01, (8, 1, 50))], axis=1)  # [8, 2, 50]
    got = want.copy()
    got[:, 1] = -got[:, 1]  # the small channel inverted
    task.update({"o": got}, {"o": want}, [str(i) for i in range(8)], {})
    summary = task.summary()
    assert summary["cosine"] > 0.9999 and summary["channel_cosine_min"] == pytest.approx(-1.0) and summary["worst_channel"] == 1


def test_an_rnn_state_with_samples_on_axis_1_is_judged_per_sample():
    # silero-vad's LSTM state: [layers 2, batch, hidden 128]. Read on axis 0 its two layers were the
    # "samples" (4 over two batches of 8), and one broken sample hid in a layer-long vector.
    rng = np.random.default_rng(0)
    want = rng.normal(0, 1, (2, 8, 128))
    got = want.copy()
    got[:, 3] = -got[:, 3]  # sample 3's state inverted
    by_layer, by_sample = make_task(OutputSpec("stateN")), make_task(OutputSpec("stateN", batch_axis=1))
    for task in (by_layer, by_sample):
        task.update({"stateN": got}, {"stateN": want}, [str(i) for i in range(8)], {})
    assert by_layer.summary()["samples"] == 2 and by_layer.summary()["cosine_min"] > 0.7
    summary = by_sample.summary()
    assert summary["samples"] == 8 and summary["cosine_min"] == pytest.approx(-1.0)
    assert summary["cosine"] == pytest.approx(6 / 8)
    with pytest.raises(TrtpipeError, match=r"\[\[outputs\]\] stateN: batch_axis 3 is not an axis of its shape \[2, 8, 128\]"):
        make_task(OutputSpec("stateN", batch_axis=3)).update({"stateN": got}, {"stateN": want}, ["a"] * 8, {})


def test_constant_and_non_finite_baselines_are_degenerate():
    task = make_task(OutputSpec("o"))
    task.update({"o": np.zeros((2, 3))}, {"o": np.zeros((2, 3))}, ["a", "b"], {})
    with pytest.raises(Degenerate, match="'o'.*0 .*every element.*likely cause"):
        task.finish()
    with pytest.raises(Degenerate, match="'o'.*NaN or Inf on sample b"):
        make_task(OutputSpec("o")).update({"o": np.zeros((2, 3))}, {"o": np.array([[1, 2, 3], [1, np.inf, 3.0]])},
                                          ["a", "b"], {})


def test_spec_outputs_parse_and_reject_unknown_keys(tmp_path):
    path = tmp_path / "model.toml"
    path.write_text('name = "m"\ntask = "detection"\n[[outputs]]\nname = "boxes"\ntask = "detection"\nlayout = "separate"\n'
                    'score_output = "scores"\nclass_output = "labels"\nconf = 0.4\n')
    spec = load_spec(path)
    assert spec.outputs == [OutputSpec("boxes", "detection", "separate", conf=0.4, score_output="scores", class_output="labels")]
    path.write_text('name = "m"\n[[outputs]]\nname = "state"\nbatch_axis = 1\n')
    assert load_spec(path).outputs == [OutputSpec("state", batch_axis=1)]
    path.write_text('name = "m"\n[[outputs]]\nname = "o"\nthreshhold = 0.3\n')
    with pytest.raises(TrtpipeError, match="unknown key 'threshhold'"):
        load_spec(path)
    path.write_text('name = "m"\n[[outputs]]\nname = "o"\ntask = "segmentation"\n')
    with pytest.raises(TrtpipeError, match="task is 'segmentation', not one of"):
        load_spec(path)


def test_default_tasks_judge_every_float_output_by_its_task_and_integers_exactly(tmp_path):
    outputs = [IOSpec("ids", "int64", (-1, 8)), IOSpec("logits", "float32", (-1, 10)), IOSpec("feat", "float32", (-1, 4, 4)),
               IOSpec("mask", "bool", (-1, 8))]
    path = tmp_path / "model.toml"
    path.write_text('name = "m"\ntask = "classification"\n')
    tasks = make_tasks(load_spec(path), outputs)
    assert [(t.output, t.name) for t in tasks] == [("logits", "classification"), ("feat", "generic"), ("ids", "exact"),
                                                  ("mask", "exact")]
    path.write_text('name = "m"\n[[outputs]]\nname = "logits"\ntask = "exact"\n')
    with pytest.raises(TrtpipeError, match="task exact judges integer and bool outputs.*float32.*use generic"):
        make_tasks(load_spec(path), outputs)
    path.write_text('name = "m"\ntask = "exact"\n')
    with pytest.raises(TrtpipeError, match="task is 'exact', not one of"):
        load_spec(path)  # a model's task is its floats'; exact is named per output
    path.write_text('name = "m"\n[[outputs]]\nname = "missing"\n')
    with pytest.raises(TrtpipeError, match="'missing', which the model does not have"):
        make_tasks(load_spec(path), outputs)


def test_the_deciding_check_is_the_worst_failure_else_the_nearest_to_failing():
    checks = [Check("cosine", "o", 0.995, 0.99), Check("top1_agreement", "o", 0.995, 0.98), Check("snr_db", "o", 50.0, 20.0)]
    assert deciding(checks).metric == "cosine"  # it used half of its allowed loss; top-1 a quarter, SNR 20/50
    checks.append(Check("f1", "d", 0.5, 0.9))
    assert deciding(checks).metric == "f1"
    report = {"outputs": {"o": {}, "d": {}}, "checks": [{**c.__dict__} for c in checks]}
    assert headline(report).startswith("d: f1 0.5 (min 0.9); below minimum: f1 0.5 < 0.9")


def test_the_progress_line_shows_the_output_that_decided_not_the_first():
    from trtpipe.quality.validate import Report

    report = Report("c.onnx", "b.onnx", "int8", False, 32,
                    checks=[Check("cosine", "output", 1.0, 0.99), Check("cosine", "stateN", 0.9827, 0.99),
                            Check("channel_cosine_min", "stateN", 0.97, 0.95)])
    assert not report.passed
    assert report.deciding_checks() == "stateN: cosine 0.98270, channel_cosine_min 0.97000"
    report.checks = report.checks[:1]
    assert report.deciding_checks() == "cosine 1.00000"  # one output: no name needed


def test_validate_exits_2_on_nan_in_the_data_and_on_a_constant_output(tmp_path, cli):
    save(mlp(batch="N"), tmp_path / "mlp.onnx")
    x = save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (16, 16)).astype(np.float32))
    x[3, 5] = np.nan
    save_batches(tmp_path / "nan", x)
    code, _, err = cli("validate", tmp_path / "mlp.onnx", "--baseline", tmp_path / "mlp.onnx", "--data", tmp_path / "nan")
    assert code == 2 and "nan/000.npy: input 'x' holds NaN or Inf (sample 3 of the file)" in err and "Traceback" not in err
    # a conv net fed zeros still gives its bias: a constant output, which no metric can judge
    save(conv_net(batch="N"), tmp_path / "conv.onnx")
    save_batches(tmp_path / "zeros", np.zeros((4, 3, 16, 16), np.float32))
    code, _, err = cli("validate", tmp_path / "conv.onnx", "--baseline", tmp_path / "conv.onnx", "--data", tmp_path / "zeros")
    assert code == 2 and "output 'logits'" in err and "the same for every one of the 4 samples" in err
    assert "likely cause" in err and "Traceback" not in err


def test_report_json_names_runners_and_the_deciding_check(tmp_path, cli):
    save(mlp(batch="N"), tmp_path / "mlp.onnx")
    save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (16, 16)).astype(np.float32))
    code, out, _ = cli("validate", tmp_path / "mlp.onnx", "--baseline", tmp_path / "mlp.onnx", "--data", tmp_path / "data", "--json")
    report = json.loads(out)
    assert code == 0 and report["mode"] == "simulated" and report["baseline_mode"] == "baseline"
    assert report["candidate_runner"] == report["baseline_runner"] == "ONNX Runtime CPUExecutionProvider"
    # no spec: [batch, 8] is judged as a classifier, as `trtpipe init` would guess it, and the report says so
    assert report["decided_by"]["output"] == "probs" and report["outputs"]["probs"]["task"] == "classification"
    assert "output 'probs' is [batch, 8]: one score per class" in report["outputs"]["probs"]["why"]


@pytest.mark.parametrize("task", ["classification", "embedding", "dense"])
def test_an_output_whose_first_axis_is_no_batch_is_one_line(task):
    """An end-to-end detector's NMS output [num_dets, 4] holds 21 detections for a batch of 16 images: the
    classification task took its rows for samples and ended in an IndexError traceback (the generic task
    reads values, and still judges any rows: test_an_output_without_a_batch_axis_is_one_sample_per_run)."""
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(21, 4)).astype(np.float32)
    images = rng.normal(size=(16, 3, 8, 8)).astype(np.float32)
    ids = [f"{i}.png" for i in range(16)]
    with pytest.raises(TrtpipeError, match=r"output 'det_boxes': 21 on its batch axis \(0\) for a batch of 16 samples"):
        make_task(OutputSpec("det_boxes", task)).update({"det_boxes": rows}, {"det_boxes": rows}, ids, {"images": images})


def test_tuning_and_sensitivity_judge_with_the_batchs_own_samples():
    """judge_model counted a batch's samples by the rows of its first output: an NMS output's 21 detections
    of 16 images were 21 samples, and the classification task read image 21 of 16 (IndexError)."""
    from onnx import TensorProto, helper

    from trtpipe.data import Batch
    from trtpipe.graph import onnxio
    from trtpipe.quality.tasks import judge_model

    shape = helper.make_tensor("pairs", TensorProto.INT64, [2], [-1, 2])
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "pairs"], ["rows"])], "rows",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["M", 2])], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = onnxio.IR_VERSION
    x = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    batch = Batch(["a.npy", "b.npy", "c.npy"], {"x": x})
    tasks = lambda outputs: [make_task(OutputSpec("rows", "classification"))]
    with pytest.raises(TrtpipeError, match="output 'rows': 6 on its batch axis .0. for a batch of 3 samples"):
        judge_model(model, tasks, [batch], [{"rows": x.reshape(-1, 2)}])


def test_an_output_alike_for_every_sample_names_the_way_to_leave_it_unjudged():
    """A decoder step's first-layer cache is the same for every sample that shares its prompt: the refusal said
    only 'validate on varied data', though [[outputs]] listing the outputs to judge is the way past it."""
    task = make_task(OutputSpec("present.0.key"))
    same = np.ones((3, 4)) * np.arange(4)
    task.update({"present.0.key": same}, {"present.0.key": same}, ["a", "b", "c"], {})
    with pytest.raises(Degenerate, match=r"same for every one of the 3 samples.*\[\[outputs\]\]"):
        task.finish()
