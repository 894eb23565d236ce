"""The review's defects that need no GPU, each tested on the real thing where it exists here:
TensorRT-RTX's own DataType, network and parser, real ONNX graphs, the real CLI. Where TensorRT 10
itself is needed (timing cache, calibrator), a stand-in follows its documented contract and says so."""

import os
import stat
import threading

import numpy as np
import onnx
import pytest
from conftest import needs_rtx
from onnx import TensorProto, helper

from models import _model, dynamic_mlp, mlp, save
from trtpipe.errors import TrtpipeError
from trtpipe.targets import Target

# --- data types: trt.nptype raises for BF16 and FP8 --------------------------------------------

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


# --- shape-tensor inputs: refused at build, by name --------------------------------------------

@needs_rtx
def test_a_shape_tensor_input_is_refused_with_the_fix(tmp_path):
    from trtpipe.build import BuildOptions, build

    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    graph = helper.make_graph(nodes, "reshape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
                                                 helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, -1])])
    save(_model(graph), tmp_path / "reshape.onnx")
    with pytest.raises(TrtpipeError, match="input 'shape' is a shape tensor.*make it a constant"):
        build(tmp_path / "reshape.onnx", tmp_path, ["fp32"], BuildOptions(target=Target(8, 9), backend="tensorrt-rtx"))
    assert not list(tmp_path.glob("*.engine"))


# --- timing cache: TensorRT's refusal is checked before building -----------------------------------

class StandInConfig:
    """TensorRT 10's IBuilderConfig timing-cache contract (TensorRT-RTX's are no-ops, so it cannot show it):
    set_timing_cache returns False for a cache from another GPU or version; get_timing_cache is then None."""

    def __init__(self, accepts: bool):
        self.accepts, self.attached = accepts, None

    def create_timing_cache(self, data: bytes):
        return ("cache", data)

    def set_timing_cache(self, cache, ignore_mismatch: bool) -> bool:
        if self.accepts or ignore_mismatch:
            self.attached = cache
        return self.accepts or ignore_mismatch


def test_a_timing_cache_tensorrt_refuses_stops_the_build_before_it_starts(tmp_path):
    from trtpipe.build import _attach_timing_cache

    stale = tmp_path / "other-gpu.cache"
    stale.write_bytes(b"timing cache of another GPU")
    with pytest.raises(TrtpipeError, match=r"--timing-cache .*other-gpu\.cache: TensorRT will not use it.*delete it"):
        _attach_timing_cache(StandInConfig(accepts=False), stale)
    config = StandInConfig(accepts=True)
    assert _attach_timing_cache(config, tmp_path / "new.cache") == ("cache", b"") == config.attached


# --- implicit INT8: calibration shapes, errors TensorRT swallows, --data over a cache, flags ------

@needs_rtx
def test_a_static_network_calibrates_at_its_own_batch_not_eight(tmp_path):
    import tensorrt_rtx as trt

    from trtpipe.build import _io_tensors, calibration_shapes

    save(mlp(batch=4), tmp_path / "mlp.onnx")
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    assert trt.OnnxParser(network, trt.Logger(trt.Logger.ERROR)).parse_from_file(str(tmp_path / "mlp.onnx"))
    tensors, _ = _io_tensors(network, builder, {}, tmp_path / "mlp.onnx")
    assert calibration_shapes(tensors) == {"x": (4, 16)}


def _feed(batches, tmp_path, reuse_cache=True):
    from calibrators.tensorrt import CalibrationFeed

    return CalibrationFeed(iter(batches), {"x": (4, 16)}, tmp_path / "x.cache", "TRT-101300-EntropyCalibration2", reuse_cache)


def test_a_batch_of_the_wrong_shape_is_an_error_raised_after_tensorrt_returns(tmp_path):
    feed = _feed([{"x": np.zeros((4, 16), np.float32)}, {"x": np.zeros((4, 12), np.float32)}], tmp_path)
    assert feed.guard(lambda: feed.next_batch(["x"]), None)["x"].shape == (4, 16)
    assert feed.guard(lambda: feed.next_batch(["x"]), None) is None  # what TensorRT sees: the end
    with pytest.raises(TrtpipeError, match=r"input 'x' comes in batches of shape \[4, 12\].*calibrates at \[4, 16\]"):
        feed.raise_error()


def test_a_short_last_batch_ends_calibration_quietly(tmp_path):
    feed = _feed([{"x": np.zeros((4, 16), np.float32)}, {"x": np.zeros((3, 16), np.float32)}], tmp_path)
    assert feed.next_batch(["x"]) is not None and feed.next_batch(["x"]) is None
    feed.raise_error()
    assert feed.batches_read == 1


def test_any_exception_in_a_callback_is_kept_not_swallowed(tmp_path):
    feed = _feed([], tmp_path)
    feed.guard(lambda: feed.write_cache(b"not a cache"), None)
    with pytest.raises(TrtpipeError, match="calibration failed inside TensorRT's calibrator"):
        feed.raise_error()


def test_data_given_means_tensorrt_calibrates_from_it_not_from_the_old_cache(tmp_path):
    from calibrators.cache import CalibrationTable, write_cache

    write_cache(CalibrationTable({"x": 1.0}), tmp_path / "x.cache")
    assert b"x:" in _feed([], tmp_path, reuse_cache=True).read_cache()
    assert _feed([], tmp_path, reuse_cache=False).read_cache() is None


def test_unquantized_layers_get_the_builder_flag_of_their_type():
    from trtpipe.build import implicit_flags

    assert implicit_flags("fp32") == ("INT8",)
    assert implicit_flags("fp16") == ("INT8", "FP16")
    assert implicit_flags("bf16") == ("INT8", "BF16")


@needs_rtx
def test_exclude_finds_the_tensorrt_layers_named_after_onnx_nodes(tmp_path):
    import tensorrt_rtx as trt

    from trtpipe.build import excluded_layers

    save(dynamic_mlp(), tmp_path / "mlp.onnx")
    network = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_network(0)
    assert trt.OnnxParser(network, trt.Logger(trt.Logger.ERROR)).parse_from_file(str(tmp_path / "mlp.onnx"))
    assert [layer.name for layer in excluded_layers(network, tmp_path / "mlp.onnx", ["fc1"])] == ["fc1"]
    assert excluded_layers(network, tmp_path / "mlp.onnx", []) == []


# --- one logger per process ---------------------------------------------------------------------

@needs_rtx
def test_every_engine_and_build_shares_one_logger():
    import tensorrt_rtx as trt

    from trtpipe.runtime.logger import shared_logger

    first = shared_logger(trt)
    assert shared_logger(trt, verbose=True) is first
    assert first.min_severity == trt.Logger.VERBOSE


# --- local_target: CUDA device 0, not nvidia-smi's first GPU ----------------------------------------

@pytest.fixture
def two_gpu_smi(tmp_path, monkeypatch):
    """nvidia-smi as on a host with an L4 (index 0) and an A100 (index 1): it answers --id=N as the real one does."""
    script = tmp_path / "nvidia-smi"
    script.write_text('#!/bin/sh\ncase "$1" in\n  --id=1) echo "NVIDIA A100-SXM4-80GB, 8.0";;\n'
                      '  --id=0) echo "NVIDIA L4, 8.9";;\n  *) echo "NVIDIA L4, 8.9"; echo "NVIDIA A100-SXM4-80GB, 8.0";;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("trtpipe.targets._cuda_device0", lambda: None)  # as on a machine without pycuda


def test_local_target_follows_cuda_visible_devices(two_gpu_smi, monkeypatch):
    from trtpipe.targets import local_target

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert local_target().capability == (8, 9)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert local_target().capability == (8, 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(TrtpipeError, match="hides every GPU"):
        local_target()


# --- PendingResult: read once, and the engine's lock released once ---------------------------------

class _FailingDone:
    def synchronize(self):
        raise RuntimeError("an illegal memory access was encountered")


class _Session:
    """The parts of ExecutionSession a PendingResult touches: its lock, its done event, its context."""

    def __init__(self):
        import contextlib

        self.lock, self.done, self.ctx, self.pending = threading.Lock(), _FailingDone(), contextlib.nullcontext(), None

    def finished(self, pending):
        self.pending = None
        self.lock.release()


def test_a_failed_result_read_twice_never_releases_another_callers_lock():
    from trtpipe.runtime.engine import PendingResult

    session = _Session()
    session.lock.acquire()  # as run_async leaves it
    pending = PendingResult(session, {}, keep=("inputs",))
    with pytest.raises(RuntimeError, match="illegal memory access"):
        pending.result()
    assert pending.keep is None
    session.lock.acquire()  # the next caller's call is now running
    with pytest.raises(RuntimeError, match="illegal memory access"):
        pending.result()
    assert session.lock.locked()


# --- device arrays: what TensorRT would reject, refused first -------------------------------------

class _CudaArray:
    def __init__(self, pointer, shape, typestr="<f4", strides=None, stream=None):
        self.__cuda_array_interface__ = {"data": (pointer, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3, "stream": stream}


def test_device_arrays_of_the_wrong_dtype_empty_or_unaligned_are_refused():
    from trtpipe.runtime.buffers import device_array
    from trtpipe.runtime.engine import check_device_array

    def check(array):
        check_device_array("m", "output buffer 'y'", device_array(array), np.dtype("float32"), 0)

    with pytest.raises(TrtpipeError, match="'y' is float16, the engine's is float32"):
        check(_CudaArray(1 << 20, (8, 8), "<f2"))
    with pytest.raises(TrtpipeError, match="'y' is empty"):
        check(_CudaArray(0, (0, 8)))
    with pytest.raises(TrtpipeError, match="not aligned to 256 bytes"):
        check(_CudaArray((1 << 20) + 32, (8, 8)))
    with pytest.raises(TrtpipeError, match="not contiguous"):
        device_array(_CudaArray(1 << 20, (8, 8), strides=(4, 32)))
    assert device_array(_CudaArray(1 << 20, (8, 1), strides=(4, 99), stream=7)).stream == 7  # size-1 strides are free
