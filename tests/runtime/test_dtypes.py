"""TensorRT's data types as numpy names: BF16 and FP8 mapped (trt.nptype raises for them), packed INT4/FP4 refused by name."""

import numpy as np
import onnx
import pytest
from conftest import needs_rtx
from onnx import TensorProto, helper

from models import _model, save
from trtpipe.errors import TrtpipeError
from trtpipe.targets import Target


@needs_rtx
def test_every_tensorrt_type_maps_to_numpy_or_is_refused_by_name():
    import tensorrt_rtx as trt

    from trtpipe.runtime.dtypes import numpy_dtype

    with pytest.raises(TypeError):
        trt.nptype(trt.DataType.BF16)  # what the engine used to call
    assert numpy_dtype(trt.DataType.BF16).name == "bfloat16"
    assert numpy_dtype(trt.DataType.FP8).name == "float8_e4m3fn"
    assert numpy_dtype(trt.DataType.HALF) == np.float16 and numpy_dtype(trt.DataType.BOOL) == np.bool_
    for packed in (trt.DataType.INT4, trt.DataType.FP4):
        with pytest.raises(TrtpipeError, match="output 'y' is (INT4|FP4), packed"):
            numpy_dtype(packed, "output 'y'")


def _bf16_io_model() -> onnx.ModelProto:
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node("Relu", ["xf"], ["r"]),
             helper.make_node("Cast", ["r"], ["y"], to=TensorProto.BFLOAT16)]
    graph = helper.make_graph(nodes, "bf16io", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 8])])
    return _model(graph)


@needs_rtx
def test_an_engine_with_bf16_inputs_and_outputs_records_numpy_dtypes(tmp_path):
    from trtpipe.build import BuildOptions, build
    from trtpipe.runtime.sidecar import read_sidecar

    save(_bf16_io_model(), tmp_path / "bf16io.onnx")
    engine = build(tmp_path / "bf16io.onnx", tmp_path, ["fp32"], BuildOptions(target=Target(8, 9), backend="tensorrt-rtx"))[0].engine
    assert [(t.name, t.dtype) for t in read_sidecar(engine).tensors] == [("x", "bfloat16"), ("y", "bfloat16")]
    assert np.dtype("bfloat16").itemsize == 2  # the name the sidecar writes is one numpy reads back
