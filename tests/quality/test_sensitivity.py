"""Per-layer sensitivity ranks the layer whose quantization hurts most first."""

import json

import numpy as np

from models import conv_net, save
from trtpipe.calibrators.amax import compute_amax
from trtpipe.calibrators.cache import CalibrationTable, render
from trtpipe.calibrators.collect import collect_histograms
from trtpipe.calibrators.graph import quantized_activations


def test_a_badly_scaled_layer_ranks_first(tmp_path, cli):
    model = conv_net(batch="N")
    x = np.random.default_rng(0).random((32, 3, 16, 16), np.float32)
    histograms = collect_histograms(model, quantized_activations(model), [{"input": x}])
    table = CalibrationTable({name: compute_amax(h, "max") for name, h in histograms.items()})
    table.amax["r0"] /= 50  # conv1's input clipped to a fiftieth of its range
    (tmp_path / "c.cache").write_text(render(table))
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "x.npy", x)

    code, out, err = cli("sensitivity", save(model, tmp_path / "conv.onnx"), "--cache", tmp_path / "c.cache",
                         "--data", tmp_path / "data", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows[0]["node"] == "conv1" and {r["node"] for r in rows} == {"conv0", "conv1", "fc"}
    assert rows[0]["cosine"] < 0.95
    assert min(r["cosine"] for r in rows[1:]) > 0.99


def test_a_cache_of_another_model_is_named(tmp_path, cli):
    (tmp_path / "other.cache").write_text(render(CalibrationTable({"not_in_this_model": 1.0})))
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "x.npy", np.zeros((2, 3, 16, 16), np.float32))
    code, _, err = cli("sensitivity", save(conv_net(batch="N"), tmp_path / "conv.onnx"), "--cache", tmp_path / "other.cache",
                       "--data", tmp_path / "data")
    assert code == 2 and "other.cache" in err and "calibrate" in err and "Traceback" not in err


def test_an_int64_first_output_does_not_hide_the_float_one(tmp_path, cli):
    """A model whose first output is an int64 passthrough: rows are scored on the float output."""
    import onnx
    from onnx import TensorProto, helper

    model = conv_net(batch="N")
    model.graph.node.append(helper.make_node("ArgMax", ["logits"], ["classes"], axis=1, keepdims=0, name="argmax"))
    model.graph.output.insert(0, helper.make_tensor_value_info("classes", TensorProto.INT64, ["N"]))
    onnx.checker.check_model(model)
    path = _clipped_conv1(tmp_path, model)
    (tmp_path / "model.toml").write_text('name = "conv"\ntask = "classification"\n[[inputs]]\nname = "input"\n'
                                         'shape = [-1, 3, 16, 16]\n')
    code, out, err = cli("sensitivity", path, "--cache", tmp_path / "c.cache",
                         "--data", tmp_path / "data", "--spec", tmp_path / "model.toml", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows[0]["node"] == "conv1" and rows[0]["cosine"] < 0.95
    assert {r["metric"] for r in rows} == {"logits top1_agreement"}
    assert all(r["score"] == r["top1_agreement"] for r in rows)  # top-1 ties here: the raw cosine breaks them
    assert {"node", "op", "cosine", "score", "top1_agreement"} <= set(rows[0])
    code, out, _ = cli("sensitivity", tmp_path / "conv.onnx", "--cache", tmp_path / "c.cache", "--data", tmp_path / "data",
                       "--spec", tmp_path / "model.toml")
    assert code == 0 and "logits top1_agreement" in out and "conv1 (Conv)" in out.splitlines()[2]


def _clipped_conv1(tmp_path, model=None):
    """Save `model` (conv_net), a cache whose conv1 input is clipped to a fiftieth of its range, and 32 samples."""
    model = conv_net(batch="N") if model is None else model
    x = np.random.default_rng(0).random((32, 3, 16, 16), np.float32)
    histograms = collect_histograms(model, quantized_activations(model), [{"input": x}])
    table = CalibrationTable({name: compute_amax(h, "max") for name, h in histograms.items()})
    table.amax["r0"] /= 50
    (tmp_path / "c.cache").write_text(render(table))
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "x.npy", x)
    return save(model, tmp_path / "conv.onnx")


def _ranked(tmp_path, cli, generic: str):
    """Return the model and `sensitivity --json`'s rows with its logits judged generic with the keys `generic`."""
    model = _clipped_conv1(tmp_path)
    (tmp_path / "model.toml").write_text('name = "conv"\n[[inputs]]\nname = "input"\nshape = [-1, 3, 16, 16]\n'
                                         '[[outputs]]\nname = "logits"\ntask = "generic"\n' + generic)
    code, out, err = cli("sensitivity", model, "--cache", tmp_path / "c.cache", "--data", tmp_path / "data",
                         "--spec", tmp_path / "model.toml", "--json")
    assert code == 0, err
    return model, json.loads(out)


def test_an_answer_judged_within_a_tolerance_is_ranked_by_it(tmp_path, cli):
    """A spec that reads its output as points within a distance (UVDoc's unwarping grid, in pixels):
    the rows are scored by the share of samples within it and ordered by the farthest point, where
    the cosine of every layer's answer read 1.00000 and ranked nothing."""
    (tmp_path / "point.py").write_text("def point(logits):\n    return logits[:, :2]\n")
    model, rows = _ranked(tmp_path, cli, 'transform = "point.py:point"\ntolerance = 0.05\n')
    assert {r["metric"] for r in rows} == {"logits within_tolerance"}
    assert rows[0]["node"] == "conv1" and rows[0]["score"] < 1.0
    assert all(r["score"] == 1.0 for r in rows[1:])
    assert [r["distance_max"] for r in rows] == sorted((r["distance_max"] for r in rows), reverse=True)
    code, out, _ = cli("sensitivity", model, "--cache", tmp_path / "c.cache", "--data", tmp_path / "data",
                       "--spec", tmp_path / "model.toml")
    assert code == 0 and "farthest" in out and "conv1 (Conv)" in out.splitlines()[2]


def test_an_answer_read_at_a_threshold_is_ranked_by_its_decisions(tmp_path, cli):
    _, rows = _ranked(tmp_path, cli, "threshold = 0.0\n")
    assert {r["metric"] for r in rows} == {"logits decision_agreement"}
    assert rows[0]["node"] == "conv1" and rows[0]["score"] < 1.0
