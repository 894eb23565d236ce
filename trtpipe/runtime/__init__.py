"""The runtime services embed: `Engine(path)(inputs) -> outputs` on pycuda, and `OnnxRunner` with the
same interface. Importing this package imports neither TensorRT, pycuda nor ONNX Runtime."""

from trtpipe.runtime.runner import Runner

__all__ = ["Engine", "OnnxRunner", "Runner"]


def __getattr__(name):
    if name == "Engine":
        from trtpipe.runtime.engine import Engine

        return Engine
    if name == "OnnxRunner":
        from trtpipe.runtime.onnxrt import OnnxRunner

        return OnnxRunner
    raise AttributeError(name)
