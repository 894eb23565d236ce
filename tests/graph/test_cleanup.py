"""Cleanup before precision: BatchNormalization and constants folded, dims named, and the fold checked."""

import cases
import numpy as np
import pytest
from conftest import needs_rtx
from helpers import build_engines, run

from trtpipe.errors import TrtpipeError
from trtpipe.graph import cleanup as cleanup_module
from trtpipe.graph.cleanup import cleanup, name_dims


def ops(model):
    return [node.op_type for node in model.graph.node]


def test_batchnorm_after_conv_is_folded_and_the_result_matches(tmp_path):
    model, feeds = cases.out_of_range_batchnorm()
    cleaned, report = cleanup(model)
    assert ops(cleaned).count("BatchNormalization") == 1  # bn1 follows a Mul: nothing to fold it into
    assert "bn0" not in {n.name for n in cleaned.graph.node}
    assert report.batchnorms_folded == 1
    assert report.max_relative_error is not None and report.max_relative_error < 1e-4
    expected, = run(model, feeds, tmp_path / "original.onnx")
    got, = run(cleaned, feeds, tmp_path / "cleaned.onnx")
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_constant_nodes_and_transposed_weights_become_initializers():
    model, _ = cases.constant_node_weights()
    cleaned, report = cleanup(model)
    assert "Constant" not in ops(cleaned) and "Transpose" not in ops(cleaned)
    assert report.constants_to_initializers == 2
    initializers = {init.name: list(init.dims) for init in cleaned.graph.initializer}
    conv, fc = (next(n for n in cleaned.graph.node if n.name == name) for name in ("conv", "fc"))
    assert initializers[conv.input[1]] == [16, 3, 3, 3]
    assert initializers[fc.input[1]] == [16, 20]  # the Transpose folded: [K, N]



def test_fp16_weights_reach_their_conv_as_initializers_and_get_quantized(tmp_path):
    """ONNX Runtime's CPU optimizer puts a Cast to float32 after each FP16 weight (it has no FP16 Conv);
    cleanup folds those Casts, so Q/DQ insertion sees the weight: 0% of Slovorez's weights were quantized."""
    from helpers import cosine, table_for

    from trtpipe.graph.coverage import weight_coverage
    from trtpipe.graph.qdq import insert_qdq
    from trtpipe.targets import Precision

    model, feeds = cases.fp16_weights()
    cleaned, _report = cleanup(model)
    conv = next(n for n in cleaned.graph.node if n.op_type == "Conv")
    initializers = {init.name for init in cleaned.graph.initializer}
    assert conv.input[1] in initializers
    assert not [n for n in cleaned.graph.node if n.op_type == "Cast" and set(n.input) & initializers]
    typed, quantized = insert_qdq(cleaned, table_for(cleaned, feeds), Precision.INT8)
    assert quantized == ["conv"] and weight_coverage(typed).fraction == 1.0
    expected, = run(model, feeds, tmp_path / "original.onnx")
    got, = run(typed, feeds, tmp_path / "int8.onnx")
    assert cosine(got, expected) > 0.999

def dims(value):
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def test_anonymous_and_repeated_dim_names_get_names_of_their_own():
    model, _ = cases.shared_dim_names()
    renamed = name_dims(model)
    batch, _, height, width = dims(model.graph.input[0])
    assert len({batch, height, width}) == 3 and "?" not in (batch, height, width)
    assert set(renamed) == {"x:0", "x:2", "x:3", "y:0", "y:2", "y:3"}

    from onnx import TensorProto, helper
    model.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "size", "size"]))
    name_dims(model)
    assert dims(model.graph.input[0]) == ["batch", 3, "size", "x_dim3"]  # the first axis keeps the name


def test_a_fold_that_changes_the_outputs_is_refused(monkeypatch):
    model, _ = cases.conv_transpose()
    real = cleanup_module.ort_basic

    def broken(m):
        folded = real(m)
        weight = next(i for i in folded.graph.initializer if i.name == "up.w")
        from onnx import numpy_helper
        weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 1.01, "up.w"))
        return folded

    monkeypatch.setattr(cleanup_module, "ort_basic", broken)
    with pytest.raises(TrtpipeError, match="changed the model's outputs"):
        cleanup(model)


@needs_rtx
def test_independent_height_and_width_build_with_different_sizes(tmp_path):
    model, _ = cases.shared_dim_names()
    results = build_engines(model, {}, tmp_path, ["fp16"], shapes=["x:1x3x32x48/2x3x64x96/4x3x128x160"])
    profile = next(t for t in results[0].info.tensors if t.mode == "input").profile
    assert profile == [[1, 3, 32, 48], [2, 3, 64, 96], [4, 3, 128, 160]]


@needs_rtx
def test_without_names_of_their_own_tensorrt_ties_height_to_width(tmp_path):
    """The reason for name_dims: the exported graph itself does not build for height != width."""
    from trtpipe import backend as backends
    from trtpipe.build import BuildOptions, build_engine
    from trtpipe.spec import parse_shapes
    from trtpipe.targets import Precision, Target

    model, _ = cases.shared_dim_names()
    raw = tmp_path / "raw.onnx"
    raw.write_bytes(model.SerializeToString())
    options = BuildOptions(target=Target.parse("sm_89"), backend="tensorrt-rtx",
                           shapes=parse_shapes(["x:1x3x32x48/2x3x64x96/4x3x128x160"]))
    backend = backends.load(backends.choose_spec("tensorrt-rtx", options.target))
    with pytest.raises(TrtpipeError, match="failed to build"):
        build_engine(raw, tmp_path / "raw.engine", Precision.FP32, options, backend, raw)


def test_an_ir_3_export_is_cleaned_into_valid_onnx(tmp_path):
    """Inception v1 as the onnx wheel ships it (onnx-caffe2, IR 3, opset 9, weights made by ConstantOfShape):
    IR 3 wants every initializer listed as a graph input, and cleanup takes them out of the inputs and folds
    the weights into new ones. The typed FP16 ONNX was refused on saving ('in initializer but not in graph
    input; please report this') and the opset could not be raised for BF16, INT8 and FP8 ('Input
    conv1/7x7_s2_w_0 is undefined'). A cleaned graph is now IR 4 at least."""
    from pathlib import Path

    import onnx

    from trtpipe.graph import onnxio
    from trtpipe.quantize import quantize

    path = Path(onnx.__file__).parent / "backend/test/data/light/light_inception_v1.onnx"
    if not path.is_file():
        pytest.skip(f"onnx {onnx.__version__} ships no {path.name}")
    model = onnxio.load(path)
    assert model.ir_version == 3
    cleaned, report = cleanup(model)
    assert report.initializer_inputs == 118 and "ConstantOfShape" not in ops(cleaned)  # the weights folded
    onnx.checker.check_model(cleaned)
    onnxio.with_opset(cleaned, 13)
    quantize(path, "fp16", tmp_path / "m.fp16.onnx")
    assert onnxio.typed_precision(onnxio.load(tmp_path / "m.fp16.onnx")) == "fp16"
