"""SmoothQuant: the smoothed FP32 graph computes the same thing, and INT8 of it loses less."""

import numpy as np
import onnxruntime as ort
from onnx import numpy_helper

from models import mlp, save, save_batches


def _outlier_data(directory, rng, samples=64):
    """Inputs whose channels 3 and 11 are 40x the others: what LayerNorm outputs look like."""
    x = rng.normal(0, 1, (samples, 16)).astype(np.float32)
    x[:, [3, 11]] *= 40
    return save_batches(directory, x)


def _run(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_smoothing_keeps_fp32_outputs_and_makes_int8_closer(tmp_path, cli):
    rng = np.random.default_rng(0)
    model = save(mlp(batch="N"), tmp_path / "mlp.onnx")
    x = _outlier_data(tmp_path / "data", rng)
    code, out, err = cli("smooth", model, "--data", tmp_path / "data", "--alpha", "0.8", "-o", tmp_path / "smooth.onnx")
    assert code == 0, err
    assert "2 activations smoothed" in out  # the graph input and the hidden layer

    np.testing.assert_allclose(_run(tmp_path / "smooth.onnx", x), _run(model, x), rtol=1e-4, atol=1e-6)

    errors = {}
    for name, source in (("plain", model), ("smoothed", tmp_path / "smooth.onnx")):
        cache, typed = tmp_path / f"{name}.cache", tmp_path / f"{name}.int8.onnx"
        assert cli("calibrate", source, "--data", tmp_path / "data", "--method", "max", "-o", cache)[0] == 0
        assert cli("quantize", source, "--precision", "int8", "--cache", cache, "-o", typed)[0] == 0
        errors[name] = np.abs(_run(typed, x) - _run(model, x)).mean()
    assert errors["smoothed"] < errors["plain"] / 2, errors


def test_smoothing_divides_channels_by_the_balanced_scale(tmp_path):
    from trtpipe.graph.smooth import smooth

    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (32, 16)).astype(np.float32)
    x[:, 5] *= 100
    smoothed, activations = smooth(mlp(batch="N"), [{"x": x}], alpha=0.5)
    assert activations == ["x", "h2"]
    inverse = {i.name: numpy_helper.to_array(i) for i in smoothed.graph.initializer}["x__smooth_inverse"]
    w0 = {i.name: numpy_helper.to_array(i) for i in mlp().graph.initializer}["w0"]
    expected = np.sqrt(np.abs(x).max(0)) / np.sqrt(np.abs(w0).max(1))
    np.testing.assert_allclose(1 / inverse, expected, rtol=1e-5)
    # alpha 0.5 takes the square root of channel 5's lead: about 100x before, about 10x after.
    before, after = np.abs(x).max(0), np.abs(x * inverse).max(0)
    assert before.max() / np.median(before) > 50
    assert after.max() / np.median(after) < 20


def test_smoothing_rejects_a_model_without_matmul(tmp_path, cli):
    from models import conv_net

    model = save(conv_net(), tmp_path / "conv.onnx")
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "0.npy", np.zeros((1, 3, 16, 16), np.float32))
    code, _, err = cli("smooth", model, "--data", tmp_path / "data", "-o", tmp_path / "out.onnx")
    assert code == 2 and "nothing to smooth" in err and "Traceback" not in err
    assert not (tmp_path / "out.onnx").exists()
