"""A stand-in for TensorRT's IExecutionContext on a real GPU, for the runtime's GPU tests and the
H200 proofs (TensorRT cannot run on the team's GPU: full TensorRT does not install here, and
TensorRT-RTX refuses compute capability 9.0).

It holds the parts of TensorRT's documented contract the runtime relies on:
- set_input_shape returns False for a shape outside the optimization profile [min, max];
- set_tensor_address returns False for a null address or one not aligned to 256 bytes, and then
  keeps the address it had (as TensorRT does);
- execute_async_v3 launches a real CUDA kernel on the stream it is given: y = 2x + 1 over the
  bound addresses, after spinning `spin_ns` nanoseconds of GPU time in one thread (a kernel of a
  known duration, for the benchmark's proof). Captured into a CUDA graph, the launch is recorded
  with the addresses and shape bound then, as TensorRT's enqueue is.
- with `synchronizing=True` it waits for its stream after the launch, as an engine with a plugin
  that synchronizes does: legal when run, refused by CUDA inside a stream capture.
"""

from __future__ import annotations

import math

import numpy as np

KERNEL = r"""
extern "C" __global__ void affine(const float *x, float *y, long long n, unsigned long long spin_ns) {
    if (spin_ns && blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long start, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < spin_ns);
    }
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i] + 1.0f;
}
"""


def compile_kernel(cuda_context):
    from pycuda.compiler import SourceModule

    with cuda_context:
        return SourceModule(KERNEL, no_extern_c=True).get_function("affine")


class StandInContext:
    """IExecutionContext for one input 'x' and one output 'y' of the same shape (float32)."""

    def __init__(self, kernel, profile=((1,), (1 << 40,)), spin_ns: int = 0, reject: frozenset = frozenset(),
                 synchronizing: bool = False):
        self.kernel = kernel
        self.synchronizing = synchronizing
        self.min, self.max = (tuple(p) for p in profile)
        self.spin_ns = spin_ns
        self.reject = reject  # names whose every address is refused (TensorRT's answer for a bad one)
        self.shapes, self.addresses, self.streams = {}, {}, {}
        self.calls = 0  # enqueues, captured ones included; a graph's launches run without one
        self.calls_by = {"set_input_shape": 0, "set_tensor_address": 0, "get_tensor_shape": 0}

    def set_input_shape(self, name, shape):
        self.calls_by["set_input_shape"] += 1
        shape = tuple(shape)
        if len(shape) != len(self.min) or any(not lo <= d <= hi for d, lo, hi in zip(shape, self.min, self.max)):
            return False
        self.shapes[name] = shape
        return True

    def get_tensor_shape(self, name):
        self.calls_by["get_tensor_shape"] += 1
        return self.shapes["x"]

    def set_tensor_address(self, name, pointer):
        self.calls_by["set_tensor_address"] += 1
        if name in self.reject or not pointer or pointer % 256:
            return False
        self.addresses[name] = pointer
        return True

    def execute_async_v3(self, stream_handle):
        n = math.prod(self.shapes["x"])
        self.calls += 1
        stream = self.streams[stream_handle]
        self.kernel(np.uintp(self.addresses["x"]), np.uintp(self.addresses["y"]), np.int64(n), np.uint64(self.spin_ns),
                    block=(256, 1, 1), grid=(max(1, (n + 255) // 256), 1), stream=stream)
        if self.synchronizing:
            stream.synchronize()
        return True


def make_session(ctx, kernel, rank: int = 2, cuda_graph: bool = False, **standin):
    """Return an ExecutionSession over a StandInContext with dynamic dims, and the stand-in."""
    from trtpipe.runtime.engine import ExecutionSession
    from trtpipe.runtime.runner import IOSpec

    profile = standin.pop("profile", ((1,) * rank, (1 << 30,) * rank))
    context = StandInContext(kernel, profile=profile, **standin)
    shape = (-1,) * rank
    session = ExecutionSession(context, [IOSpec("x", "float32", shape)], [IOSpec("y", "float32", shape)], ctx, "stand-in",
                               cuda_graph)
    context.streams[session.stream.handle] = session.stream
    return session, context


def standin_engine(ctx, kernel, rank: int = 2, **standin):
    """Return an Engine whose execution context is the stand-in: Engine's own infer/feeds/close code runs."""
    from trtpipe.runtime.engine import Engine

    session, context = make_session(ctx, kernel, rank, **standin)
    engine = Engine.__new__(Engine)
    engine.name = engine.path = "stand-in"
    engine.ctx, engine.session = ctx, session
    engine.inputs, engine.outputs = session.inputs, session.outputs
    engine.engine = engine.runtime = None
    return engine, context
