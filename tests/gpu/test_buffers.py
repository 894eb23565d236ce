"""The runtime's buffer layer on a real GPU, driven by a stand-in execution context.

TensorRT itself cannot run on the GPU the team has (see README), so `gpu_standin.StandInContext` plays
IExecutionContext: execute_async_v3 launches a real CUDA kernel (y = 2x + 1) on the addresses the
session bound, on the session's stream. Everything else (pinned and device buffers, asynchronous
copies, growth for new shapes, zero-copy device inputs, threads, freeing) is the real code.
"""

import threading

import numpy as np
import pytest

pycuda = pytest.importorskip("pycuda.driver", reason="pycuda is not installed: pip install 'trtpipe[gpu]'")

try:
    pycuda.init()
    HAS_GPU = pycuda.Device.count() > 0
except pycuda.Error:
    HAS_GPU = False
pytestmark = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU on this machine")

from gpu_standin import compile_kernel, make_session


@pytest.fixture
def session():
    from trtpipe.runtime.cuda import CudaContext

    ctx = CudaContext(0)
    session, _ = make_session(ctx, compile_kernel(ctx))
    yield session
    session.free()
    ctx.release()


def test_numpy_round_trip(session):
    x = np.random.default_rng(0).normal(size=(64, 1000)).astype(np.float32)
    np.testing.assert_array_equal(session.run({"x": x})["y"], 2 * x + 1)


def test_buffers_grow_only_for_larger_shapes(session):
    for shape in [(4, 256), (2, 256), (8, 256), (8, 256), (1, 16)]:
        x = np.random.default_rng(1).normal(size=shape).astype(np.float32)
        np.testing.assert_array_equal(session.run({"x": x})["y"], 2 * x + 1)
    assert session.buffers["x"].grown == 2 and session.buffers["y"].grown == 2


def test_async_result(session):
    x = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)
    pending = session.run_async({"x": x})
    np.testing.assert_array_equal(pending.result()["y"], 2 * x + 1)
    assert pending.done()


def test_zero_copy_from_torch(session):
    torch = pytest.importorskip("torch")
    x = torch.randn(128, 512, device="cuda")
    y = torch.empty_like(x)
    out = session.run({"x": x}, out={"y": y})
    assert out["y"] is y
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x + 1)


def test_many_threads(session):
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(25):
            x = rng.normal(size=(rng.integers(1, 64), 300)).astype(np.float32)
            if not np.array_equal(session.run({"x": x})["y"], 2 * x + 1):
                errors.append(seed)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_everything_freed_on_close():
    from trtpipe.runtime.cuda import CudaContext

    ctx = CudaContext(0)
    with ctx:
        free_before = pycuda.mem_get_info()[0]
    session, _ = make_session(ctx, compile_kernel(ctx), rank=1)
    x = np.ones(256 << 20 >> 2, np.float32)  # 256 MiB in, 256 MiB out
    session.run({"x": x})
    with ctx:
        assert pycuda.mem_get_info()[0] < free_before - (400 << 20)
    session.free()
    with ctx:
        assert pycuda.mem_get_info()[0] >= free_before - (16 << 20)
    ctx.release()
