"""One TensorRT logger per process, shared by every engine and build."""

from conftest import needs_rtx


@needs_rtx
def test_every_engine_and_build_shares_one_logger():
    import tensorrt_rtx as trt

    from trtpipe.runtime.logger import shared_logger

    first = shared_logger(trt)
    assert shared_logger(trt, verbose=True) is first
    assert first.min_severity == trt.Logger.VERBOSE
