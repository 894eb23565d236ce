"""FP16 that is safe by construction: each failure class runs in ONNX Runtime against FP32 and builds."""

import json

import cases
import numpy as np
import pytest
from conftest import needs_rtx
from helpers import build_engines, cosine, run, table_for
from onnx import TensorProto

from trtpipe.graph import onnxio
from trtpipe.graph.cleanup import cleanup
from trtpipe.graph.half import convert
from trtpipe.graph.keep import observe_ranges
from trtpipe.graph.typed import kept_nodes, typed_graph, write_typed_onnx
from trtpipe.targets import Precision


def reasons(kept):
    return {k.node: k.reason for k in kept}


def test_out_of_range_batchnorm_stays_fp32_and_matches(tmp_path):
    model, feeds = cases.out_of_range_batchnorm()
    typed = typed_graph(model, Precision.FP16, None)
    assert "bn1.var" in reasons(typed.kept)["bn1"] and "beyond fp16" in reasons(typed.kept)["bn1"]
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    got, = run(typed.model, feeds, tmp_path / "fp16.onnx")
    assert cosine(got, expected) >= 0.9999
    assert typed.cleanup is not None and typed.cleanup.batchnorms_folded == 1


def test_initializers_listed_as_inputs_become_weights_and_the_fp16_model_loads(tmp_path):
    model, feeds = cases.initializers_as_inputs()
    typed = typed_graph(model, Precision.FP16, None)
    assert [v.name for v in typed.model.graph.input] == ["x"]
    assert typed.cleanup.initializer_inputs == 5 and typed.cleanup.batchnorms_folded == 1
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    got, = run(typed.model, feeds, tmp_path / "fp16.onnx")  # refused before: FP16 data, FLOAT input declarations
    assert cosine(got, expected) >= 0.9999


def test_range_and_shape_computation_keep_their_types(tmp_path):
    model, feeds = cases.range_shape_subgraph()
    typed = typed_graph(model, Precision.FP16, None)
    why = reasons(typed.kept)
    assert "no float16" in why["range"]
    for node in ("cast_w", "cast_h", "area", "floor"):
        assert why[node].startswith("shape computation")
    assert "conv" not in why and "shift" not in why  # the data path is FP16
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    got, = run(typed.model, feeds, tmp_path / "fp16.onnx")  # 49 * 53 = 2597: a Reshape in FP16 would fail
    assert got.shape == (1, 4, 49 * 53)
    assert cosine(got, expected) >= 0.9999


def test_activations_beyond_fp16_on_calibration_data_stay_fp32(tmp_path):
    model, feeds = cases.activation_beyond_fp16()
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    cleaned, _ = cleanup(model)
    ranges = observe_ranges(cleaned, [feeds])
    assert ranges["square"].amax > 65504  # what FP16 would hold: TensorRT would write inf there
    blind = convert(cleaned, Precision.FP16)  # constants alone are all in range
    assert blind.kept == [] and onnxio.tensor_types(blind.model)["square"] == TensorProto.FLOAT16
    # (ONNX Runtime's CPU provider runs an FP16 Mul in FP32, so it does not show the overflow itself.)
    seen = convert(cleaned, Precision.FP16, ranges=ranges)
    why = reasons(seen.kept)
    assert "on calibration data" in why["square"] and "on calibration data" in why["shrink"]
    assert onnxio.tensor_types(seen.model)["square"] == TensorProto.FLOAT
    got, = run(seen.model, feeds, tmp_path / "fp16.onnx")
    assert cosine(got, expected) >= 0.9999



def test_a_floor_that_fp16_flushes_to_zero_keeps_its_max_in_fp32(tmp_path):
    """DNSMOS's STFT: log(max(|X|^2, 1e-12)), the Keras idiom. Max was exempt from the constant rule (a bound
    beyond FP16's max only saturates), so its floor went to FP16 as 0 and a silent frame's log was -inf:
    deploy's FP16 of DNSMOS gave non-finite scores on 2 of 8 clips. A floor that flushes to zero keeps
    its Max in FP32; a clamp at FP32's max still converts."""
    from onnx import helper, numpy_helper

    import models

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])
    nodes = [helper.make_node("Mul", ["x", "x"], ["power"], name="power"),
             helper.make_node("Max", ["floor", "power"], ["floored"], name="floor"),
             helper.make_node("Log", ["floored"], ["log"], name="log"),
             helper.make_node("Min", ["log", "ceiling"], ["y"], name="ceiling")]
    inits = [numpy_helper.from_array(np.array([1e-12], np.float32), "floor"),
             numpy_helper.from_array(np.array([np.finfo(np.float32).max], np.float32), "ceiling")]
    model = models._model(helper.make_graph(nodes, "g", [x], [y], inits))
    audio = np.random.default_rng(0).normal(0, 0.1, (4, 64)).astype(np.float32)
    audio[:, 20:40] = 0.0  # a lost packet: digital silence
    feeds = {"x": audio}
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    typed = typed_graph(model, Precision.FP16, None)
    why = reasons(typed.kept)
    assert "floor" in why and "loses 100% of its non-zero values to zero" in why["floor"]
    assert "ceiling" not in why  # FP32's max saturates to inf in FP16: still no bound, converted as before
    got, = run(typed.model, feeds, tmp_path / "fp16.onnx")
    assert np.isfinite(got).all() and np.isfinite(expected).all()
    assert cosine(got, expected) >= 0.9999

def _with_spec_data(tmp_path, model, feeds):
    """Save `model` and a spec whose calibration directory holds `feeds`' samples (and no --data is given)."""
    import models

    models.save(model, tmp_path / "model.onnx")
    models.save_batches(tmp_path / "calib", np.concatenate([feeds["x"]] * 4))
    spec = tmp_path / "model.toml"
    spec.write_text('[[inputs]]\nname = "x"\nshape = [1, 3, 8, 8]\n[data]\ncalibration = "calib"\n')
    return spec


def test_quantize_with_a_spec_reads_its_calibration_data_for_fp16_ranges(cli, tmp_path):
    """The spec's calibration directory is --data's default for FP16's ranges too, as it is for calibration:
    `quantize --spec` read constants alone, and SwiftF0's power spectra overflowed FP16 to inf."""
    model, feeds = cases.activation_beyond_fp16()
    spec = _with_spec_data(tmp_path, model, feeds)
    code, _out, err = cli("quantize", tmp_path / "model.onnx", "--precision", "fp16", "--spec", spec,
                          "-o", tmp_path / "fp16.onnx")
    assert code == 0, err
    typed = onnxio.load(tmp_path / "fp16.onnx")
    why = {k["node"]: k["reason"] for k in kept_nodes(typed)}
    assert "on calibration data" in why.get("square", ""), why
    assert onnxio.tensor_types(typed)["square"] == TensorProto.FLOAT


@needs_rtx
def test_build_with_a_spec_reads_its_calibration_data_for_fp16_ranges(cli, tmp_path):
    model, feeds = cases.activation_beyond_fp16()
    spec = _with_spec_data(tmp_path, model, feeds)
    code, _out, err = cli("build", tmp_path / "model.onnx", "--precision", "fp16", "--target", "sm_89", "--backend",
                          "tensorrt-rtx", "--spec", spec, "-o", tmp_path / "engines")
    assert code == 0, err
    sidecar = json.loads((tmp_path / "engines" / "model.fp16.sm89.engine.json").read_text())
    assert "on calibration data" in {k["node"]: k["reason"] for k in sidecar["kept_fp32"]}.get("square", ""), sidecar


@needs_rtx
def test_build_keeps_the_ranges_its_caller_observed(tmp_path):
    """deploy observes the activation ranges once and hands them to every build (BuildOptions.ranges); build
    dropped them, so deploy's FP16 kept no node for its activations: SwiftF0's power spectra gave inf on
    5 of 32 lines in deploy's FP16 while `build --data` of the same spec kept them FP32."""
    import models
    from trtpipe.build import BuildOptions, build
    from trtpipe.targets import Target

    model, feeds = cases.activation_beyond_fp16()
    models.save(model, tmp_path / "model.onnx")
    cleaned, _ = cleanup(model)
    options = BuildOptions(target=Target.parse("sm_89"), backend="tensorrt-rtx", ranges=observe_ranges(cleaned, [feeds]))
    result, = build(tmp_path / "model.onnx", tmp_path / "engines", ["fp16"], options)
    why = {k["node"]: k["reason"] for k in kept_nodes(onnxio.load(result.typed_onnx))}
    assert "on calibration data" in why.get("square", ""), why


def test_if_subgraphs_stay_fp32_reading_outer_values_in_fp32(tmp_path):
    model, feeds = cases.if_subgraph()
    typed = typed_graph(model, Precision.FP16, None)
    assert reasons(typed.kept)["choose"].startswith("control flow")
    for x in (feeds["x"], -feeds["x"]):  # both branches
        expected, = run(model, {"x": x}, tmp_path / "fp32.onnx")
        got, = run(typed.model, {"x": x}, tmp_path / "fp16.onnx")
        assert cosine(got, expected) >= 0.9999


def test_what_decides_an_if_is_computed_in_half_not_kept_as_a_shape():
    """openWakeWord's hey-jarvis runs its verifier when the first score passes 0.5: walked back as a shape,
    the condition kept all 24 nodes before it in FP32, and the FP16 engine was the FP32 one to the byte."""
    model, _ = cases.if_subgraph()
    kept = reasons(typed_graph(model, Precision.FP16, None).kept)
    assert set(kept) == {"choose"}, kept


def test_kept_nodes_are_recorded_in_the_typed_onnx_and_shown_by_inspect(tmp_path):
    from trtpipe.describe import describe

    model, _ = cases.range_shape_subgraph()
    path = write_typed_onnx(model, Precision.FP16, tmp_path / "typed.onnx", None)
    kept = kept_nodes(onnxio.load(path))
    assert {"node": "range", "op": "Range", "reason": "ONNX Range (opset 17) has no float16 type"} in kept
    assert describe(path)["kept_fp32"] == kept


@needs_rtx
@pytest.mark.parametrize("case,shapes", [
    ("out_of_range_batchnorm", []),
    ("range_shape_subgraph", ["x:1x3x49x53/1x3x49x53/1x3x64x64"]),
    ("activation_beyond_fp16", []),
])
def test_fp16_engines_build_and_record_kept_nodes(case, shapes, tmp_path):
    model, feeds = getattr(cases, case)()
    result, = build_engines(model, feeds, tmp_path, ["fp16"], shapes)
    sidecar = json.loads((result.engine.parent / f"{result.engine.name}.json").read_text())
    assert sidecar["kept_fp32"] == kept_nodes(onnxio.load(result.typed_onnx))
    if case != "activation_beyond_fp16":  # without calibration data nothing there is out of range
        assert sidecar["kept_fp32"]


@pytest.mark.parametrize("precision", [Precision.FP16, Precision.INT8])
def test_com_microsoft_ops_stay_fp32_and_their_readers_get_their_type(precision, tmp_path):
    """A BERT through ONNX Runtime's transformer optimizer: shape inference types nothing after its first
    com.microsoft op, so the half pass left those ops' readers unconverted beside FP16 weights; ONNX Runtime
    refused the FP16 graph (MatMul bound to float and float16) and INT8 tuning ended deploy in exit 2."""
    model, feeds = cases.contrib_ops_between_matmuls()
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    table = table_for(model, feeds) if precision is Precision.INT8 else None
    typed = typed_graph(model, precision, table)
    kept = reasons(typed.kept)
    assert kept["gelu"].startswith("custom-domain op") and kept["skip_norm"].startswith("custom-domain op")
    got, = run(typed.model, feeds, tmp_path / f"{precision}.onnx")
    assert cosine(got, expected) >= 0.999


@pytest.mark.parametrize("precision", [Precision.FP16, Precision.BF16])
def test_an_output_that_passes_an_input_through_stays_exact(precision, tmp_path):
    """A scripted refinement loop returned its input as features_out: the half graph read it through a Cast
    to FP16 and back, so the engine's copy of its own input was off by 1e-3, and that copy, not the model's
    answer, was the output that decided the FP16 verdict."""
    model, feeds = cases.input_passed_through()
    typed = typed_graph(model, precision, None)
    assert "copy" in reasons(typed.kept)
    outputs = dict(zip(["y", "x_out"], run(typed.model, feeds, tmp_path / f"{precision}.onnx")))
    assert np.array_equal(outputs["x_out"], feeds["x"])


@pytest.mark.parametrize("precision", [Precision.FP16, Precision.INT8])
def test_sequences_stay_fp32_beside_the_loop_that_fills_them(precision, tmp_path):
    """A scripted loop appending to a list: the half pass retyped SequenceEmpty's dtype to FLOAT16 while the Loop
    that fills the sequence stays FP32, and ONNX Runtime refused the graph (Loop: element type 1 against 10);
    INT8 tuning ended deploy in exit 2."""
    model, feeds = cases.sequence_through_a_loop()
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    table = table_for(model, feeds) if precision is Precision.INT8 else None
    typed = typed_graph(model, precision, table)
    assert {"empty", "join"} <= set(reasons(typed.kept))
    got, = run(typed.model, feeds, tmp_path / f"{precision}.onnx")
    assert cosine(got, expected) >= 0.999
