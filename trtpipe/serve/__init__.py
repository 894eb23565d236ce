"""Serving: engines and ONNX models on Triton Inference Server.

- `models`: a candidate file (engine or ONNX) as a model Triton serves: tensors, batch limit, metadata.
- `environment`: what the bundled Triton needs of its environment, and free ports.
- `server`: `trtpipe serve`, the models on a repository written for the run, served by `tritonserver`.
- `tritonserver`: the Triton server nvidia-pytriton bundles, started on a repository.
- `guard`: the HTTP front that refuses requests the model cannot take before Triton sees them.
- `limits`: a request's bounds from the model, and the one-line reply of a refused one.
- `batches`: one execution of a batched model, each request answered (python_model.py uses it).
- `repository`: `trtpipe triton`, a model repository for a Triton deployment.
- `loadtest`: `trtpipe loadtest`, throughput and latency through tritonclient, every answer checked.

Nothing here imports graph/ or build.py: a service installs the runtime and this package alone.
"""
