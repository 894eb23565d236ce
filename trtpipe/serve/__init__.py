"""Serving: engines and ONNX models on Triton Inference Server.

- `models`: a candidate file (engine or ONNX) as a model Triton serves: tensors, batch limit, metadata.
- `environment`: what the bundled Triton needs of this process's environment, and free ports.
- `server`: `trtpipe serve`, the runners behind PyTriton's Triton.
- `repository`: `trtpipe triton`, a model repository for a Triton deployment.
- `loadtest`: `trtpipe loadtest`, throughput and latency through tritonclient, every answer checked.

Nothing here imports graph/ or build.py: a service installs the runtime and this package alone.
"""
