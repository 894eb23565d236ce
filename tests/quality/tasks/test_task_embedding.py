"""Embeddings are judged per sample and by their neighbours: the shipped MiniLM on its real
sentences. The INT8 typed ONNX passes; one layer's scale 100x off fails. An int64 passthrough
output (a copy of input_ids, put first) is judged exactly, as every integer output is, agrees by
construction and never headlines."""

import json

import onnx
import pytest
from damage import scale_layer
from onnx import helper
from shipped import ROOT, shipped

from trtpipe.quality.validate import compare, thresholds_for, write_report
from trtpipe.runtime.onnxrt import OnnxRunner
from trtpipe.spec import load_spec

SPEC = ROOT / "models" / "minilm" / "model.toml"
LIMIT = 16  # one batch: a transformer on a shared CPU is slow; enough for 5-neighbour sets


@pytest.fixture(scope="module")
def minilm():
    return shipped("minilm", "minilm.onnx", "minilm.int8.onnx")


def with_ids_first(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return `model` with an int64 copy of input_ids as its first output, as some exports have."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    model.graph.node.append(helper.make_node("Identity", ["input_ids"], ["ids_out"], name="ids_passthrough"))
    model.graph.output.insert(0, helper.make_tensor_value_info("ids_out", onnx.TensorProto.INT64, ["batch", "seq"]))
    return model


def test_int8_passes_and_an_int64_passthrough_agrees_and_never_headlines(minilm, cli, tmp_path):
    spec = load_spec(SPEC)
    with OnnxRunner("minilm.onnx", model=with_ids_first(onnx.load(minilm / "minilm.onnx"))) as fp32, \
            OnnxRunner("minilm.int8.onnx", model=with_ids_first(onnx.load(minilm / "minilm.int8.onnx"))) as int8:
        result = compare(int8, fp32, spec, spec.validation, "int8", thresholds=thresholds_for("int8", spec), limit=LIMIT,
                         show_progress=False)
    write_report(result, tmp_path / "reports", "minilm.int8.onnx")
    report = json.loads((tmp_path / "reports" / "minilm.int8.onnx.json").read_text())
    assert report["passed"], report["checks"]
    assert list(report["outputs"]) == ["embedding", "ids_out"] and report["passthrough"] == {}
    embedding = report["outputs"]["embedding"]
    assert embedding["task"] == "embedding" and embedding["cosine"] > 0.99 and embedding["neighbour_agreement"] >= 0.9
    assert report["outputs"]["ids_out"]["task"] == "exact" and report["outputs"]["ids_out"]["exact_match"] == 1.0
    assert report["decided_by"]["output"] == "embedding"
    assert (tmp_path / "reports" / "minilm.int8.onnx.embedding.png").exists()  # the histogram of cosines
    code, out, _ = cli("summary", tmp_path / "reports" / "minilm.int8.onnx.json")
    assert code == 0 and "ids_out" not in out and "| pass |" in out


def test_one_layer_100x_off_fails_on_cosine_and_neighbours(minilm):
    spec = load_spec(SPEC)
    damaged = scale_layer(onnx.load(minilm / "minilm.int8.onnx"), "/bert/encoder/layer.0/attention/self/value/MatMul", 100)
    with OnnxRunner(minilm / "minilm.onnx") as fp32, OnnxRunner("damaged.onnx", model=damaged) as bad:
        report = compare(bad, fp32, spec, spec.validation, "int8", thresholds=thresholds_for("int8", spec), limit=LIMIT,
                         show_progress=False)
    failed = {c.metric for c in report.checks if not c.passed}
    assert {"cosine", "neighbour_agreement"} <= failed
    assert report.to_json()["decided_by"]["metric"] in failed
