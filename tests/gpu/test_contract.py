"""The review's defects that need a GPU, on a real one with the stand-in execution context
(scripts/gpu_standin.py), which holds TensorRT's contract: it refuses null and unaligned addresses and shapes
outside the profile by returning False, as TensorRT does. Each test failed on the code before the
fixes (docs/logs/h200-tests-before.log) and passes after (docs/logs/h200-tests.log)."""

import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest

pycuda = pytest.importorskip("pycuda.driver", reason="pycuda is not installed: pip install 'trtpipe[gpu]'")
torch = pytest.importorskip("torch", reason="the device-array tests use torch tensors")

try:
    pycuda.init()
    HAS_GPU = pycuda.Device.count() > 0 and torch.cuda.is_available()
except pycuda.Error:
    HAS_GPU = False
pytestmark = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU (with torch's CUDA) on this machine")

from gpu_standin import compile_kernel, make_session

from trtpipe.errors import TrtpipeError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(scope="module")
def ctx():
    from trtpipe.runtime.cuda import CudaContext

    torch.zeros(1, device="cuda")  # torch holds the primary context too, as in a service
    ctx = CudaContext(0)
    yield ctx
    ctx.release()


@pytest.fixture(scope="module")
def kernel(ctx):
    return compile_kernel(ctx)


@pytest.fixture
def session(ctx, kernel):
    session, _ = make_session(ctx, kernel, profile=((1, 1), (1024, 1 << 20)))
    yield session
    session.free()


def test_a_tensor_written_on_a_side_stream_is_read_whole(session):
    side = torch.cuda.Stream()
    for trial in range(5):
        x = torch.zeros(1024, 1024, device="cuda")
        torch.cuda.synchronize()
        with torch.cuda.stream(side):  # torch's contract: x is ready on the current stream
            torch.cuda._sleep(100_000_000)  # ~50 ms of GPU time before the write
            x.fill_(3.0)
            y = session.run({"x": x})["y"]
        assert (y == 7.0).all(), f"trial {trial}: read before the side stream's write finished"


def test_an_output_buffer_of_another_dtype_or_too_few_bytes_is_refused(session):
    x = torch.ones(8, 256, device="cuda")
    half = torch.zeros(8, 256, dtype=torch.float16, device="cuda")  # as many elements, half the bytes
    with pytest.raises(TrtpipeError, match="output buffer 'y' is float16, the engine's is float32"):
        session.run({"x": x}, out={"y": half})
    small = torch.zeros(8, 255, device="cuda")
    with pytest.raises(TrtpipeError, match="holds 8160 bytes.*needs 8192"):
        session.run({"x": x}, out={"y": small})
    big = torch.zeros(9, 256, device="cuda")  # larger is fine: the engine writes the first 8x256
    session.run({"x": x}, out={"y": big})
    torch.cuda.synchronize()
    assert (big[:8] == 3).all() and (big[8] == 0).all()


def test_an_unaligned_view_or_an_empty_tensor_is_refused_not_silently_replaced(session):
    base = torch.arange(9 * 256, dtype=torch.float32, device="cuda").reshape(9, 256)
    session.run({"x": base[:8]})  # binds an address the next call must not fall back to
    view = base.view(-1)[1:1 + 8 * 256].view(8, 256)  # contiguous, 4 bytes past an aligned start
    with pytest.raises(TrtpipeError, match="not aligned to 256 bytes"):
        session.run({"x": view})
    with pytest.raises(TrtpipeError, match="is empty"):
        session.run({"x": torch.zeros(0, 256, device="cuda")})


def test_an_address_the_engine_rejects_is_an_error(ctx, kernel):
    session, _ = make_session(ctx, kernel, reject=frozenset({"y"}))
    try:
        with pytest.raises(TrtpipeError, match="rejected the address of 'y'"):
            session.run({"x": np.ones((4, 4), np.float32)})
    finally:
        session.free()


def test_a_shape_outside_the_profile_is_refused(session):
    with pytest.raises(TrtpipeError, match="outside the engine's optimization profile"):
        session.run({"x": np.ones((1025, 4), np.float32)})


def test_an_async_call_keeps_its_device_input_alive_until_read(session):
    x = torch.full((64, 1 << 16), 2.0, device="cuda")
    alive = weakref.ref(x)
    pending = session.run_async({"x": x})
    del x
    gc.collect()
    assert alive() is not None, "the input was freed while the GPU may still read it"
    np.testing.assert_array_equal(pending.result()["y"], 5.0)
    gc.collect()
    assert alive() is None


def test_close_with_an_unread_result_does_not_hang(ctx, kernel):
    session, _ = make_session(ctx, kernel)
    session.run_async({"x": np.ones((64, 1024), np.float32)})
    closer = threading.Thread(target=session.free, daemon=True)
    closer.start()
    closer.join(timeout=20)
    assert not closer.is_alive(), "free() waited forever on the unread result's lock"


def _in_fresh_process(code: str) -> str:
    """Run `code` in a Python without torch (nobody else holds the primary context); return its output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False, capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_a_context_released_from_another_thread_is_released_and_popped():
    out = _in_fresh_process("""
        import threading
        from trtpipe.runtime import driver_api
        from trtpipe.runtime.cuda import CudaContext
        ctx = CudaContext(0)
        with ctx:
            pass
        seen = {}
        def close():
            ctx.release()
            seen["current"] = driver_api.current_context()
        t = threading.Thread(target=close); t.start(); t.join()
        print(driver_api.primary_context_active(0), seen["current"], driver_api.current_context())
    """)
    assert out.split() == ["False", "0", "0"]


def test_an_engine_that_fails_to_load_gives_its_context_back(tmp_path):
    # The sidecar names a TensorRT-RTX engine for sm_89; a module standing in for tensorrt_rtx (only
    # its version is read before the failure) lets Engine reach the GPU check, which fails on this GPU.
    import hashlib
    import json

    engine = tmp_path / "m.engine"
    engine.write_bytes(b"not read: the capability check fails first")
    info = {"engine": "m.engine", "backend": "tensorrt-rtx", "backend_version": "0-standin", "target": "sm89",
            "compute_capability": "8.9", "precision": "fp32", "onnx": "m.onnx", "onnx_sha256": "0" * 64,
            "engine_sha256": hashlib.sha256(engine.read_bytes()).hexdigest()}
    (tmp_path / "m.engine.json").write_text(json.dumps(info))
    out = _in_fresh_process(f"""
        import sys, types
        sys.modules["tensorrt_rtx"] = types.SimpleNamespace(__version__="0-standin")
        from trtpipe.errors import TrtpipeError
        from trtpipe.runtime import driver_api
        from trtpipe.runtime.engine import Engine
        try:
            Engine({str(engine)!r})
        except TrtpipeError as exc:
            print("refused:", "built for sm89" in str(exc))
        print(driver_api.primary_context_active(0), driver_api.current_context())
    """)
    assert out.split() == ["refused:", "True", "False", "0"]
