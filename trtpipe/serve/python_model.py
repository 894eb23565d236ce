"""Triton Python-backend model written by `trtpipe triton`: runs trtpipe runners inside Triton.

Copied as `<model>/1/model.py` into a model repository, for engines Triton's TensorRT backend cannot
load (TensorRT-RTX plans need libtensorrt_rtx, not libnvinfer) and for ONNX models served the way
`trtpipe serve` serves them. The config's `trtpipe.files` parameter maps a compute capability (or
"onnx") to the file beside this one; each instance opens the file for its GPU. Requests Triton's
dynamic batcher hands over together run as one batch; when that batch fails, each request runs
alone, so only a bad request fails. Every request is checked against `trtpipe.limits` (shapes,
batch, bytes) before it reaches the runner, and an error reply is one line without server paths.

This file runs in Triton's Python stub: it imports only numpy, Triton's utilities, trtpipe.runtime
trtpipe.serve.batches and trtpipe.serve.limits.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

from trtpipe.serve.batches import run_requests
from trtpipe.serve.limits import RequestLimits


def _capability(device: int) -> str:
    from trtpipe.runtime.cuda import CudaContext

    major, minor = CudaContext(device).capability
    return f"{major}.{minor}"


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        here = os.path.join(args["model_repository"], args["model_version"])
        parameters = {k: v["string_value"] for k, v in config["parameters"].items()}
        files = json.loads(parameters["trtpipe.files"])
        self.limits = RequestLimits.from_json(parameters["trtpipe.limits"])
        if "onnx" in files:  # an ONNX model: ONNX Runtime, on the CUDA provider when it loads
            from trtpipe.runtime import OnnxRunner

            # Not spinning: the intra-op threads share the cores with Triton's, and on 2 cores shared
            # with other jobs a spinning pool ran EfficientNet-lite0 at a third of the speed.
            self.runner = OnnxRunner(os.path.join(here, files["onnx"]), threads=int(parameters.get("trtpipe.threads", 1)),
                                     spin=False)
        else:
            device = int(args["model_instance_device_id"])
            capability = _capability(device)
            if capability not in files:
                raise pb_utils.TritonModelException(
                    f"no engine for compute capability {capability} in {here} (it has {', '.join(files)}); "
                    f"build one with trtpipe build --target sm_{capability.replace('.', '')}")
            from trtpipe.runtime import Engine

            self.runner = Engine(os.path.join(here, files[capability]), device=device)
        self.batching = int(config.get("max_batch_size", 0)) > 0
        self.outputs = [o["name"] for o in config["output"]]

    def execute(self, requests):
        names = [spec.name for spec in self.runner.inputs]
        feeds = [{n: pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in names} for r in requests]
        results = run_requests(self.runner, feeds, self.limits, self.batching)
        return [pb_utils.InferenceResponse(error=pb_utils.TritonError(r)) if isinstance(r, str) else
                pb_utils.InferenceResponse([pb_utils.Tensor(n, np.ascontiguousarray(r[n])) for n in self.outputs])
                for r in results]

    def finalize(self):
        self.runner.close()
