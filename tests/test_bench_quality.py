"""The bench-quality harness (scripts/bench_quality.py, scripts/peer_ort_quantize.py) without the peers'
environment: ONNX Runtime's quantize_static runs here from trtpipe's own onnxruntime, on a small conv
net built in the test whose pre-ReLU6 outputs reach far past 6, as EfficientNet-lite0's do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

pytest.importorskip("onnxruntime.quantization", reason="onnxruntime's quantization tools are not installed")


def relu6_net() -> onnx.ModelProto:
    """Conv (outputs up to about +-60), ReLU6, Conv, ReLU6, pool, Gemm: 3x16x16 -> 10 logits."""
    rng = np.random.default_rng(0)

    def init(name, shape, scale):
        return numpy_helper.from_array(rng.normal(0, scale, shape).astype(np.float32), name)

    inits = [init("w0", (16, 3, 3, 3), 4.0), init("b0", (16,), 1.0), init("w1", (16, 16, 3, 3), 0.2),
             init("b1", (16,), 0.1), init("fc", (10, 16), 0.5), init("fcb", (10,), 0.1),
             numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
    nodes = [helper.make_node("Conv", ["image", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], name="conv0"),
             helper.make_node("Clip", ["c0", "lo", "hi"], ["r0"], name="relu6_0"),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"], name="relu6_1"),
             helper.make_node("GlobalAveragePool", ["r1"], ["pool"], name="pool"),
             helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"),
             helper.make_node("Gemm", ["flat", "fc", "fcb"], ["logits"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "relu6_net", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 3, 16, 16])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def logits(model: onnx.ModelProto, images: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"image": images})[0]


def test_ort_peer_puts_qdq_on_layer_inputs_only(tmp_path):
    """TensorRT's placement (and ONNX Runtime's own TensorRT example): Q/DQ on the inputs of
    Conv/MatMul/Gemm, none on their outputs, biases float. With the Q/DQ that quantize_static put on
    every layer's output before (ReLU6 then read conv0's output on a grid for its whole range) the
    logits' cosine here was 0.941 at worst; without, 0.9999 (measured)."""
    source, out, calibration = tmp_path / "fp32.onnx", tmp_path / "ort.int8.onnx", tmp_path / "calibration.npz"
    model = relu6_net()
    onnx.save(model, source)
    rng = np.random.default_rng(1)
    np.savez(calibration, image=rng.normal(0, 1, (32, 3, 16, 16)).astype(np.float32))
    subprocess.run([sys.executable, str(SCRIPTS / "peer_ort_quantize.py"), "--onnx", str(source), "--calibration",
                    str(calibration), "--output", str(out)], check=True, capture_output=True)

    quantized = onnx.load(out)
    producers = {o: n.op_type for n in quantized.graph.node for o in n.output}
    dequantized = {n.output[0] for n in quantized.graph.node if n.op_type == "DequantizeLinear"}
    layers = [n for n in quantized.graph.node if n.op_type in ("Conv", "Gemm")]
    assert len(layers) == 3 and all(n.input[0] in dequantized for n in layers)
    # No Q reads a layer's output: the Clip reads conv0's FP32 output directly.
    assert not [n.input[0] for n in quantized.graph.node if n.op_type == "QuantizeLinear"
                and producers.get(n.input[0]) in ("Conv", "Gemm")]
    assert all(len(n.input) < 3 or n.input[2] not in dequantized for n in layers)  # biases stay float

    images = rng.normal(0, 1, (16, 3, 16, 16)).astype(np.float32)
    a, b = logits(model, images), logits(quantized, images)
    cosine = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cosine.min() > 0.99, cosine


def test_peer_output_reused_only_when_newer_than_every_input(tmp_path):
    """A peer's ONNX is reused until the model, the calibration samples or our peer script changes:
    the changed script of the ONNX Runtime peer must not be judged on an output of the old one."""
    import os

    from bench_quality import run_peer

    model, script, output = tmp_path / "model.onnx", tmp_path / "peer.py", tmp_path / "peer.onnx"
    model.write_text("model")
    script.write_text("script")
    count = (f"import pathlib; p = pathlib.Path({str(output)!r}); "
             "p.write_text(str(int(p.read_text()) + 1) if p.is_file() else '1')")
    command = [sys.executable, "-c", count]  # counts its runs in the output
    assert run_peer(command, output, tmp_path / "log", 60, [model, script]) == output
    assert output.read_text() == "1"
    run_peer(command, output, tmp_path / "log", 60, [model, script])
    assert output.read_text() == "1"  # reused
    later = output.stat().st_mtime + 10
    os.utime(script, (later, later))
    run_peer(command, output, tmp_path / "log", 60, [model, script])
    assert output.read_text() == "2"  # the script changed: run again


def test_peer_table_merge_keeps_rows_and_cells_not_rerun_and_replaces_rerun_ones(tmp_path):
    import bench_methods

    doc = tmp_path / "zoo.md"
    header = "| model | precision | minimum | trtpipe | peer |\n|---|---|---|---|---|"
    doc.write_text(f"# zoo\n\n{bench_methods.PEERS_START}\n{header}\n| yolov8n | int8 | x | old | old |\n"
                   f"| ppocr-det | int8 | y | kept | kept |\n| gtcrn | fp8 | w | old | peer's |\n{bench_methods.PEERS_END}\n\nafter\n")
    bench_methods.merge_peers_table(f"{header}\n| yolov8n | int8 | x | new | new |\n| basic-pitch | fp8 | z | added | added |\n"
                                    "| gtcrn | fp8 | w | new | not run |", doc)
    rows = [line.split("|")[1:6] for line in doc.read_text().splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [[c.strip() for c in r] for r in rows] == [["basic-pitch", "fp8", "z", "added", "added"],
                                                      ["gtcrn", "fp8", "w", "new", "peer's"],
                                                      ["ppocr-det", "int8", "y", "kept", "kept"],
                                                      ["yolov8n", "int8", "x", "new", "new"]]
    assert doc.read_text().endswith(f"{bench_methods.PEERS_END}\n\nafter\n")


def test_peer_cell_shows_trtpipes_deciding_check_when_the_peer_measured_it():
    import bench_methods

    ours = {"metric": "iou", "output": "y", "value": 0.82, "minimum": 0.9}
    peer = {"cosine": 0.99, "passed": False, "decided_by": {"metric": "cosine", "output": "z", "value": 0.9967},
            "checks": [{"metric": "cosine", "output": "z", "value": 0.9967, "minimum": 0.9999, "passed": False},
                       {"metric": "iou", "output": "y", "value": 0.8282, "minimum": 0.95, "passed": False}]}
    assert bench_methods.decided(peer, ours) == "iou 0.8282 **FAIL**"
    assert bench_methods.decided(peer) == "cosine 0.9967 **FAIL**"  # no check to match: its own
    assert bench_methods.decided({**peer, "quantized_layers": 0}, ours) == "iou 0.8282 **FAIL** (no layer quantized)"
    failed = {"reason": "validate: build/x/m.int8.onnxruntime.onnx: ONNX Runtime cannot load the model "
                        "([ONNXRuntimeError] : 1 : FAIL : This is an invalid model. Error: Duplicate name); check it with 'trtpipe inspect'"}
    assert bench_methods.decided(failed) == "validate: ONNX Runtime cannot load the model (Error: Duplicate name)"


def test_failed_peer_says_why_from_its_log(tmp_path):
    """A peer that wrote no ONNX gets the line of its log that says why (Model Optimizer's ERROR line, else the
    last line, run_peer's timeout included) in its row, not the log's path on this machine."""
    from bench_quality import peer_error, run_peer

    output, log = tmp_path / "peer.onnx", tmp_path / "peer.log"
    failing = "import sys; print('x - [modelopt][onnx] - ERROR - Internal error: bad graph'); print('Traceback'); sys.exit(1)"
    assert run_peer([sys.executable, "-c", failing], output, log, 60, []) is None
    assert peer_error(log) == "Internal error: bad graph"
    slow = "import time; print('calibrating', flush=True); time.sleep(30)"
    assert run_peer([sys.executable, "-c", slow], output, log, 1, []) is None
    assert log.read_text().startswith("calibrating") and peer_error(log) == "timed out after 1 s"


def test_ort_peer_reads_an_input_with_a_fixed_first_axis_a_whole_sample_a_step(tmp_path):
    """gtcrn's caches fix their first axis at 2 (the batch on axis 1), so the stacked file holds two rows a
    sample: each calibration step reads that many, as Model Optimizer's --calibration_shapes split does,
    where slicing every input by --batch-size gave ONNX Runtime one row of two and it refused the run."""
    source, out, calibration = tmp_path / "fp32.onnx", tmp_path / "ort.int8.onnx", tmp_path / "calibration.npz"
    weight = numpy_helper.from_array(np.random.default_rng(0).normal(0, 1, (4, 4)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm"),
             helper.make_node("MatMul", ["cache", "w"], ["cache_out"], name="mm_cache")]
    graph = helper.make_graph(nodes, "cached", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
                                                helper.make_tensor_value_info("cache", TensorProto.FLOAT, [2, 1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4]),
                               helper.make_tensor_value_info("cache_out", TensorProto.FLOAT, [2, 1, 4])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), source)
    rng = np.random.default_rng(1)
    np.savez(calibration, x=rng.normal(0, 1, (8, 4)).astype(np.float32),
             cache=rng.normal(0, 1, (16, 1, 4)).astype(np.float32))  # 8 samples, two cache rows each
    subprocess.run([sys.executable, str(SCRIPTS / "peer_ort_quantize.py"), "--onnx", str(source), "--calibration",
                    str(calibration), "--output", str(out), "--batch-size", "1"], check=True, capture_output=True)
    assert sum(n.op_type == "QuantizeLinear" for n in onnx.load(out).graph.node) >= 2


def test_a_peers_copy_of_a_model_carries_its_external_weights_and_the_peer_runs_in_the_outputs_folder(tmp_path):
    """malviz-r18 keeps its weights in model.onnx.data: both peers failed on a copy without it, and wrote their
    temporary files into the directory they were started from (the repository's root)."""
    from bench_quality import private_copy, run_peer

    source, work = tmp_path / "zoo", tmp_path / "work"
    source.mkdir()
    work.mkdir()
    onnx.save(relu6_net(), str(source / "net.onnx"), save_as_external_data=True, location="net.onnx.data",
              size_threshold=0)
    copy = private_copy(source / "net.onnx", work / "net.int8.peer.onnx")
    assert (work / "net.onnx.data").read_bytes() == (source / "net.onnx.data").read_bytes()
    onnx.checker.check_model(onnx.load(str(copy)))  # its weights load from beside it

    output = work / "left.txt"
    command = [sys.executable, "-c", "import pathlib; pathlib.Path('left.txt').write_text('here')"]
    assert run_peer(command, output, tmp_path / "log", 60, []) == output


PEERS_PYTHON = SCRIPTS.parent / "build" / "peers-venv" / "bin" / "python"


@pytest.mark.parametrize("peer", ["onnxruntime", "modelopt"])
def test_peers_calibrate_on_samples_of_their_own_lengths_one_run_each(tmp_path, peer):
    """TrueOCR's lines, khmersm's phrases, a scalar sample rate: no stacked array holds them. Each peer's reader
    takes one sample a run, each at its own shape: the scale is the largest |x| over every length (3, the last
    sample's; ONNX Runtime's MinMax, Model Optimizer's entropy, whose histogram here is three spikes), not the
    first run's alone (1)."""
    import bench_quality

    from trtpipe.spec import load_spec

    if peer == "modelopt" and not PEERS_PYTHON.is_file():
        pytest.skip("Model Optimizer runs in build/peers-venv (make build/peers-venv/.created), not made here")
    source, out = tmp_path / "fp32.onnx", tmp_path / f"{peer}.int8.onnx"
    # 16 wide: Model Optimizer leaves a MatMul of K or N under 16 unquantized
    weight = numpy_helper.from_array(np.random.default_rng(0).normal(0, 1, (16, 16)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "ragged",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "t", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "t", 16])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), source)
    (tmp_path / "calib").mkdir()
    for i, steps in enumerate((3, 7, 5)):
        np.save(tmp_path / "calib" / f"{i}.npy", np.full((steps, 16), i + 1.0, np.float32))
    (tmp_path / "model.toml").write_text('[[inputs]]\nname = "x"\nshape = [-1, -1, 16]\n[data]\ncalibration = "calib"\n')
    spec = load_spec(tmp_path / "model.toml")
    with pytest.raises(bench_quality.RaggedSamples, match="no stacked array holds them"):
        bench_quality.stack_calibration(spec, tmp_path / "calibration.npz")
    samples = bench_quality.sample_calibration(spec, tmp_path / "samples.npz")
    with np.load(samples) as archive:
        assert sorted(archive.files) == ["00000/x", "00001/x", "00002/x"] and archive["00001/x"].shape == (1, 7, 16)
    if peer == "onnxruntime":
        command = [sys.executable, str(SCRIPTS / "peer_ort_quantize.py")]
    else:
        command = [str(PEERS_PYTHON), str(SCRIPTS / "peer_modelopt_quantize.py"), "--quantize-mode", "int8"]
    subprocess.run([*command, "--onnx", str(source), "--calibration", str(samples), "--output", str(out)],
                   check=True, capture_output=True, cwd=tmp_path)
    quantized = onnx.load(out).graph
    x = {"x", *(o for n in quantized.node if n.op_type == "Cast" and n.input[0] == "x" for o in n.output)}  # MO: FP16
    reads_x = {n.input[1] for n in quantized.node if n.op_type == "QuantizeLinear" and n.input[0] in x}
    scales = {float(numpy_helper.to_array(t)) for t in quantized.initializer if t.name in reads_x}
    assert scales and all(s == pytest.approx(3.0 / 127, rel=1e-3) for s in scales), scales
