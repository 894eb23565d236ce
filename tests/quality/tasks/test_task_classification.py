"""Classification is judged by the classes it picks: the shipped digits CNN on its real validation
digits. The INT8 typed ONNX passes; one layer 100x off and one class's logit zeroed fail on top-1."""

import json

import onnx
import pytest
from damage import scale_layer, zero_channel
from shipped import ROOT, shipped

from trtpipe import data
from trtpipe.quality.validate import compare, thresholds_for, write_report
from trtpipe.runtime.onnxrt import OnnxRunner
from trtpipe.spec import load_spec

SPEC = ROOT / "models" / "digits" / "model.toml"


@pytest.fixture(scope="module")
def digits():
    return shipped("digits", "digits.onnx", "digits.int8.onnx")


def test_undamaged_int8_passes_and_says_how_it_ran(digits, cli, tmp_path):
    code, out, _err = cli("validate", digits / "digits.int8.onnx", "--baseline", digits / "digits.onnx", "--spec", SPEC,
                         "--limit", 128, "--report", tmp_path, "--json")
    report = json.loads(out)
    assert code == 0, report["checks"]
    logits = report["outputs"]["logits"]
    assert logits["task"] == "classification" and logits["top1_agreement"] >= 0.98
    assert logits["accuracy"] > 0.95 and "baseline_accuracy" in logits and logits["confident_samples"] > 100
    assert {"top1_agreement", "confident_top1_agreement", "cosine"} <= {c["metric"] for c in report["checks"]}
    assert report["mode"] == "simulated" and report["baseline_mode"] == "baseline"
    markdown = (tmp_path / "digits.int8.onnx.md").read_text()
    assert "simulated: the ONNX ran in ONNX Runtime CPUExecutionProvider; no engine ran" in markdown
    assert "## logits (classification)" in markdown


def test_an_fp32_onnx_candidate_is_simulated_too(digits, cli):
    code, out, _ = cli("validate", digits / "digits.onnx", "--baseline", digits / "digits.onnx", "--spec", SPEC,
                       "--limit", 32, "--json")
    report = json.loads(out)
    assert code == 0 and report["precision"] == "fp32"
    assert report["mode"] == "simulated" and report["measured"] is False


@pytest.mark.parametrize("damage,flipped_from", [
    (lambda m: scale_layer(m, "/13/Gemm", 100), None),  # the classifier's input on a grid 100x too coarse
    (lambda m: zero_channel(m, "logits", 3, 10, axis_rank=2), 3),  # class 3's logit zeroed
], ids=["layer-scale-100x", "class-3-zeroed"])
def test_damaged_candidates_fail_on_top1(digits, damage, flipped_from, tmp_path):
    spec = load_spec(SPEC)
    labels = data.read_labels(spec.labels)
    undamaged = onnx.load(digits / "digits.int8.onnx")
    with OnnxRunner(digits / "digits.onnx") as fp32, OnnxRunner("damaged.onnx", model=damage(undamaged)) as bad, \
            OnnxRunner("int8.onnx", model=undamaged) as int8:
        report = compare(bad, fp32, spec, spec.validation, "int8", labels, thresholds_for("int8", spec), limit=128,
                         show_progress=False)
        # The INT8 model's own flips (one in 128 of the reproducible export) are not the damage's.
        own = {f.sample for f in compare(int8, fp32, spec, spec.validation, "int8", labels, limit=128,
                                         show_progress=False).pictures["logits"].flips}
    failed = {c.metric for c in report.checks if not c.passed}
    assert {"top1_agreement", "confident_top1_agreement"} <= failed
    logits = report.outputs["logits"]
    assert logits["accuracy"] < logits["baseline_accuracy"] and logits["top1_flips"] >= 5
    flips = report.pictures["logits"].flips
    assert flips and all(f.image is not None and f.image.shape == (32, 32) for f in flips)
    if flipped_from is not None:
        assert all(f.baseline_class == flipped_from for f in flips if f.sample not in own)
    written = write_report(report, tmp_path, "damaged")
    assert (tmp_path / "damaged.logits.png") in written
