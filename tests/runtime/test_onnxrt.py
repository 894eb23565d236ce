"""The ONNX Runtime runner's contract with the CUDA provider, checked where no GPU is: what it asks
the provider for, and what it lets ONNX Runtime print. scripts/h200_ort_gpu.sh runs it on the H200."""

import numpy as np
import pytest

from models import mlp, save
from trtpipe.runtime.onnxrt import OnnxRunner


def test_the_cuda_provider_is_asked_for_fp32_math_and_its_fallback_stays_off_stdout(tmp_path, monkeypatch, capsys):
    import onnxruntime as ort

    path = save(mlp(), tmp_path / "mlp.onnx")
    real, asked = ort.InferenceSession, []

    def session(model, options, providers):
        asked.append(providers)
        if any(isinstance(p, tuple) and p[0] == "CUDAExecutionProvider" for p in providers):
            # What onnxruntime-gpu does when its CUDA provider cannot start (seen on the H200 with no device visible).
            print("*************** EP Error ***************\nFalling back to ['CPUExecutionProvider'] and retrying.")
            return real(model, options, providers=["CPUExecutionProvider"])
        return real(model, options, providers=providers)

    monkeypatch.setattr(ort, "InferenceSession", session)
    with OnnxRunner(path, ["CUDAExecutionProvider", "CPUExecutionProvider"]) as runner:
        out = runner({"x": np.ones(runner.inputs[0].shape, np.float32)})
    # TF32 (the provider's default) rounds MatMul/Conv inputs to 10 mantissa bits: on the H200 it moved
    # EfficientNet-lite0's FP32 logits by up to 0.0135 from the CPU's, against 1e-5 with it off.
    assert asked[0][0] == ("CUDAExecutionProvider", {"use_tf32": "0"})
    assert runner.provider == "CPUExecutionProvider" and np.isfinite(next(iter(out.values()))).all()
    assert capsys.readouterr().out == ""


def test_spin_false_lets_the_intra_op_threads_sleep_and_the_answers_stay_the_same(tmp_path):
    path = save(mlp(), tmp_path / "mlp.onnx")
    x = {"x": np.random.default_rng(0).random((4, 16), dtype=np.float32)}
    with OnnxRunner(path, threads=2) as spinning, OnnxRunner(path, threads=2, spin=False) as sleeping:
        assert sleeping.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning") == "0"
        with pytest.raises(RuntimeError, match="does not have configuration"):  # ONNX Runtime's default: spinning
            spinning.session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
        np.testing.assert_array_equal(sleeping(x)["probs"], spinning(x)["probs"])
