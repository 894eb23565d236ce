"""Triton Python-backend model written by `trtpipe triton`: runs trtpipe runners inside Triton.

Copied as `<model>/1/model.py` into a model repository, for engines Triton's TensorRT backend cannot
load (TensorRT-RTX plans need libtensorrt_rtx, not libnvinfer) and for ONNX models served the way
`trtpipe serve` serves them. The config's `trtpipe.files` parameter maps a compute capability (or
"onnx") to the file beside this one; each instance opens the file for its GPU. Requests Triton's
dynamic batcher hands over together run as one batch.

This file runs in Triton's Python stub: it imports only numpy, Triton's utilities and trtpipe.runtime.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def _capability(device: int) -> str:
    from trtpipe.runtime.cuda import CudaContext

    major, minor = CudaContext(device).capability
    return f"{major}.{minor}"


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        here = os.path.join(args["model_repository"], args["model_version"])
        files = json.loads(config["parameters"]["trtpipe.files"]["string_value"])
        if "onnx" in files:  # an ONNX model: ONNX Runtime, on the CUDA provider when it loads
            from trtpipe.runtime import OnnxRunner

            self.runner = OnnxRunner(os.path.join(here, files["onnx"]), threads=1)
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
        try:
            if self.batching and len(requests) > 1 and _stackable(feeds, names):
                sizes = [len(f[names[0]]) for f in feeds]
                merged = self.runner({n: np.concatenate([f[n] for f in feeds]) for n in names})
                ends = np.cumsum(sizes)
                results = [{k: v[end - size:end] for k, v in merged.items()} for size, end in zip(sizes, ends)]
            else:
                results = [self.runner(f) for f in feeds]
        except Exception as exc:  # noqa: BLE001 - the client gets the message, the model keeps serving
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))) for _ in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor(n, np.ascontiguousarray(r[n])) for n in self.outputs])
                for r in results]

    def finalize(self):
        self.runner.close()


def _stackable(feeds, names) -> bool:
    return all(len({f[n].shape[1:] for f in feeds}) == 1 for n in names)
