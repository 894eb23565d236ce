"""Bad input: one line naming the file or flag and the fix, exit code 2, no traceback, no partial file."""

import subprocess
import sys

import numpy as np
import pytest
from conftest import needs_rtx

import models


def trtpipe(*args, cwd=None):
    result = subprocess.run([sys.executable, "-m", "trtpipe.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, check=False)
    return result.returncode, result.stdout, result.stderr


def assert_one_line_error(code, err, *needles):
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("trtpipe: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0]


@pytest.fixture
def files(tmp_path):
    good = tmp_path / "mlp.onnx"
    models.save(models.mlp(), good)
    dynamic = tmp_path / "dynamic.onnx"
    models.save(models.dynamic_mlp(), dynamic)
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    return tmp_path, good, dynamic, text, truncated


def test_python_dash_m_trtpipe_is_the_command(files):
    """`python -m trtpipe`, what a user without the console script on PATH types first, said it was no program."""
    tmp_path = files[0]
    result = subprocess.run([sys.executable, "-m", "trtpipe", "calibrate", tmp_path / "missing.onnx", "--data", tmp_path,
                             "-o", tmp_path / "c.cache"], capture_output=True, text=True, check=False)
    assert_one_line_error(result.returncode, result.stderr, "missing.onnx")


def test_not_onnx_and_truncated_onnx(files):
    root, _, _, text, truncated = files
    for bad in (text, truncated):
        code, _, err = trtpipe("quantize", bad, "--precision", "fp16", "-o", root / "out.onnx")
        assert_one_line_error(code, err, str(bad))
    assert not (root / "out.onnx").exists()


def test_missing_model(files):
    root = files[0]
    code, _, err = trtpipe("inspect", root / "nope.onnx")
    assert_one_line_error(code, err, "nope.onnx", "no such file")


def test_unknown_target(files):
    root, good = files[:2]
    code, _, err = trtpipe("build", good, "--target", "sm_xx", "-o", root / "engines")
    assert_one_line_error(code, err, "--target sm_xx")
    assert not (root / "engines").exists()


@needs_rtx
def test_precision_the_target_cannot_run(files):
    root, good = files[:2]
    code, _, err = trtpipe("build", good, "--precision", "fp8", "--target", "A100", "--cache", root / "c", "-o", root / "engines")
    assert_one_line_error(code, err, "fp8", "8.9")
    assert not (root / "engines").exists()


@needs_rtx
def test_dynamic_input_without_shapes(files):
    root, _, dynamic = files[:3]
    code, _, err = trtpipe("build", dynamic, "--precision", "fp16", "--target", "sm_89", "-o", root / "engines")
    assert_one_line_error(code, err, "--shapes x:MIN/OPT/MAX")
    assert not list((root / "engines").glob("*.engine"))


def test_unwritable_output_directory(files, tmp_path):
    good = files[1]
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = trtpipe("quantize", good, "--precision", "fp16", "-o", blocker / "sub" / "out.onnx")
    assert_one_line_error(code, err, "-o", "choose a writable path")


def test_bad_shapes_flag(files):
    root, _, dynamic = files[:3]
    code, _, err = trtpipe("build", dynamic, "--target", "sm_89", "--shapes", "x:1x16/8x16", "-o", root / "e")
    assert_one_line_error(code, err, "--shapes x:1x16/8x16")


def test_int8_without_cache(files):
    root, good = files[:2]
    code, _, err = trtpipe("quantize", good, "--precision", "int8", "-o", root / "q.onnx")
    assert_one_line_error(code, err, "--cache")


def test_corrupt_cache(files):
    root, good = files[:2]
    (root / "bad.cache").write_text("garbage\n")
    code, _, err = trtpipe("quantize", good, "--precision", "int8", "--cache", root / "bad.cache", "-o", root / "q.onnx")
    assert_one_line_error(code, err, "bad.cache", "line 1")
    assert not (root / "q.onnx").exists()


def test_nothing_to_quantize(tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    models.save(model, tmp_path / "relu.onnx")
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "a.npy", np.ones((2, 4), np.float32))
    code, _, err = trtpipe("calibrate", tmp_path / "relu.onnx", "--data", tmp_path / "data", "-o", tmp_path / "c.cache")
    assert_one_line_error(code, err, "relu.onnx", ["nothing", "to", "quantize"][0])
    assert not (tmp_path / "c.cache").exists()


def test_missing_or_short_external_weights_name_the_data_file(tmp_path):
    import onnx

    model = tmp_path / "ext.onnx"
    onnx.save(models.mlp(hidden=512), str(model), save_as_external_data=True, location="ext.onnx.data",
              size_threshold=0)
    data = tmp_path / "ext.onnx.data"
    data.write_bytes(data.read_bytes()[:100])
    code, _, err = trtpipe("inspect", model)
    assert_one_line_error(code, err, "external weights", "copy it again")
    data.unlink()
    code, _, err = trtpipe("inspect", model)
    assert_one_line_error(code, err, "'ext.onnx.data'", "missing")


@pytest.fixture(scope="module")
def already_quantized(tmp_path_factory):
    """The MLP as ONNX Runtime's quantize_dynamic (MatMulInteger) and quantize_static (Q/DQ) write it, its
    FP32 original's cache, samples and a spec naming them."""
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize_dynamic, quantize_static

    root = tmp_path_factory.mktemp("quantized")
    models.save(models.mlp(batch="N"), root / "mlp.onnx")
    samples = [np.random.default_rng(i).normal(0, 1, 16).astype(np.float32) for i in range(8)]
    (root / "data").mkdir()
    for i, sample in enumerate(samples):
        np.save(root / "data" / f"{i}.npy", sample)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{"x": s[None]} for s in samples])

        def get_next(self):
            return next(self.feeds, None)

    quantize_dynamic(root / "mlp.onnx", root / "dynamic.onnx", weight_type=QuantType.QInt8)
    quantize_static(root / "mlp.onnx", root / "static.onnx", Reader())
    (root / "model.toml").write_text('name = "mlp"\n[data]\ncalibration = "data"\nvalidation = "data"\n')
    code, _, err = trtpipe("calibrate", root / "mlp.onnx", "--data", root / "data", "-o", root / "mlp.cache")
    assert code == 0, err
    return root


# Every command that takes the model trtpipe is to quantize, or the FP32 baseline: {m} the model, {r} the folder.
QUANTIZED_INPUT = {
    "calibrate": "calibrate {m} --data {r}/data -o {r}/out/c.cache",
    "quantize": "quantize {m} --precision fp16 -o {r}/out/m.onnx",
    "build": "build {m} --precision fp16 --target sm_89 -o {r}/out",
    "smooth": "smooth {m} --data {r}/data -o {r}/out/m.onnx",
    "awq": "awq {m} --data {r}/data -o {r}/out/m.onnx",
    "sensitivity": "sensitivity {m} --cache {r}/mlp.cache --data {r}/data",
    "tune": "tune {m} --spec {r}/model.toml --precision int8 --target sm_89 --budget-min 0.1 -o {r}/out/t.cache",
    "deploy": "deploy {m} --data {r}/data --target sm_89 --budget-min 0.1 -o {r}/out",
    "validate --baseline": "validate {r}/mlp.onnx --baseline {m} --data {r}/data",
}


@pytest.mark.parametrize("command", QUANTIZED_INPUT)
@pytest.mark.parametrize("kind,nodes", [("dynamic", "MatMulInteger"), ("static", "QuantizeLinear")])
def test_an_already_quantized_model_is_refused_naming_its_nodes(already_quantized, command, kind, nodes):
    root, model = already_quantized, already_quantized / f"{kind}.onnx"
    code, _, err = trtpipe(*QUANTIZED_INPUT[command].format(m=model, r=root).split())
    assert_one_line_error(code, err, str(model), "already quantized", nodes, "FP32")
    assert not (root / "out").exists()


def test_a_dynamically_quantized_lstm_is_refused_as_already_quantized(tmp_path):
    """ONNX Runtime's quantize_dynamic turns an LSTM into com.microsoft DynamicQuantizeLSTM with INT8 weights and
    writes no other quantized op: a speaker embedder's LSTM-only export went through as FP32 and failed to build."""
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)
               for name, shape in (("W", (1, 16, 8)), ("R", (1, 16, 4)))]
    graph = helper.make_graph([helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=4)], "lstm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 1, 1, 4])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10  # what ONNX Runtime reads
    models.save(model, tmp_path / "lstm.onnx")
    quantize_dynamic(tmp_path / "lstm.onnx", tmp_path / "dynamic.onnx", weight_type=QuantType.QInt8)
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "0.npy", rng.normal(0, 1, (5, 1, 8)).astype(np.float32))
    code, _, err = trtpipe("calibrate", tmp_path / "dynamic.onnx", "--data", tmp_path / "data", "-o", tmp_path / "c.cache")
    assert_one_line_error(code, err, "already quantized (1 DynamicQuantizeLSTM)", "FP32")


@pytest.mark.parametrize("command", ["init {m} --data {r}/data -o {r}/out/m.toml", "init {m} -o {r}/out/m.toml",
                                     "deploy {m} --data {r}/data --target sm_89 --budget-min 0.1 -o {r}/out",
                                     "calibrate {m} --data {r}/data -o {r}/out/c.cache"])
def test_a_model_that_takes_strings_is_refused_in_one_line(tmp_path, command):
    """skl2onnx's text pipelines take a string tensor: init told to 'save the samples as object' (still no
    numbers) or wrote dtype float32 for it, and deploy then asked to convert the text to float32."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Cast", ["text"], ["value"], to=TensorProto.FLOAT)], "strings",
                              [helper.make_tensor_value_info("text", TensorProto.STRING, ["N", 1])],
                              [helper.make_tensor_value_info("value", TensorProto.FLOAT, ["N", 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    models.save(model, tmp_path / "strings.onnx")
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "0.npy", np.array(["1.5", "2"]))
    code, _, err = trtpipe(*command.format(m=tmp_path / "strings.onnx", r=tmp_path).split())
    assert_one_line_error(code, err, "input 'text' holds strings", "TensorRT")
    assert not (tmp_path / "out").exists()
