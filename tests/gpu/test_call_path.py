"""The runtime's per-call path on a real GPU, with the stand-in execution context (scripts/gpu_standin.py): what is
set on the context only when it changes, and CUDA-graph replay of the enqueue, with its fall-back.

The stand-in counts the calls the session makes on it, and its kernel reads and writes the addresses
bound at launch (or at capture, for a graph): a replayed graph that were stale would write the wrong
buffer or compute over the wrong length, which the answers below would show."""

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


@pytest.fixture(scope="module")
def ctx():
    from trtpipe.runtime.cuda import CudaContext

    torch.zeros(1, device="cuda")
    ctx = CudaContext(0)
    yield ctx
    ctx.release()


@pytest.fixture(scope="module")
def kernel(ctx):
    return compile_kernel(ctx)


@pytest.fixture
def opened(ctx, kernel):
    sessions = []

    def make(**options):
        session, standin = make_session(ctx, kernel, profile=((1, 1), (1024, 1 << 20)), **options)
        sessions.append(session)
        return session, standin

    yield make
    for session in sessions:
        session.free()


def test_shapes_and_addresses_are_set_only_when_they_change(opened):
    session, standin = opened()
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.normal(size=(8, 256)).astype(np.float32)
        np.testing.assert_array_equal(session.run({"x": x})["y"], 2 * x + 1)
    assert standin.calls_by == {"set_input_shape": 1, "set_tensor_address": 2, "get_tensor_shape": 1}
    x = rng.normal(size=(4, 256)).astype(np.float32)  # a new shape inside the grown buffers: same addresses
    np.testing.assert_array_equal(session.run({"x": x})["y"], 2 * x + 1)
    assert standin.calls_by == {"set_input_shape": 2, "set_tensor_address": 2, "get_tensor_shape": 2}
    assert session.buffers["x"].grown == 1 and session.buffers["y"].grown == 1
    x, y = torch.randn(4, 256, device="cuda"), torch.empty(4, 256, device="cuda")
    for _ in range(3):
        session.run({"x": x}, out={"y": y})
    torch.cuda.synchronize()
    assert torch.equal(y, 2 * x + 1)
    assert standin.calls_by == {"set_input_shape": 2, "set_tensor_address": 4, "get_tensor_shape": 2}
    assert standin.calls == 9


def test_a_graph_is_captured_on_the_second_like_call_and_replayed_on_new_data(opened):
    session, standin = opened(cuda_graph=True)
    x, y = torch.zeros(16, 1024, device="cuda"), torch.empty(16, 1024, device="cuda")
    for value in range(6):
        x.fill_(value)
        assert session.run({"x": x}, out={"y": y})["y"] is y
        torch.cuda.synchronize()
        assert (y == 2 * value + 1).all(), f"call {value}"
    assert standin.calls == 2, "one plain enqueue, one captured, four graph launches"
    assert session.graph is not None and session.graph_refused is None
    other = torch.full_like(y, -1.0)  # a new output address: the graph writing the old one would leave -1 here
    x.fill_(7)
    session.run({"x": x}, out={"y": other})
    torch.cuda.synchronize()
    assert (other == 15).all() and (y == 11).all()
    assert session.graph is None and standin.calls == 3


def test_a_graph_serves_numpy_calls_and_a_new_shape_drops_it(opened):
    session, standin = opened(cuda_graph=True)
    rng = np.random.default_rng(1)
    for shape in [(8, 300)] * 4 + [(3, 300)] * 3 + [(8, 300)] * 2:
        x = rng.normal(size=shape).astype(np.float32)
        np.testing.assert_array_equal(session.run({"x": x})["y"], 2 * x + 1)
    # (8, 300): plain, capture, 2 launches; (3, 300): plain, capture, launch; (8, 300): plain, capture
    assert standin.calls == 6


def test_a_refused_call_after_a_capture_does_not_leave_the_stale_graph_to_run(opened):
    session, _ = opened(cuda_graph=True)
    x, y = torch.ones(8, 256, device="cuda"), torch.empty(8, 256, device="cuda")
    session.run({"x": x}, out={"y": y})
    session.run({"x": x}, out={"y": y})
    assert session.graph is not None
    longer = torch.full((16, 256), 2.0, device="cuda")  # the context takes this shape before the output is refused
    with pytest.raises(TrtpipeError, match="holds 8192 bytes"):
        session.run({"x": longer}, out={"y": y})
    wide = torch.empty(16, 256, device="cuda")
    session.run({"x": longer}, out={"y": wide})
    torch.cuda.synchronize()
    assert (wide == 5).all(), "the graph captured for 8 rows ran instead"


def test_an_enqueue_a_capture_cannot_hold_runs_without_a_graph(opened):
    session, standin = opened(cuda_graph=True, synchronizing=True)
    rng = np.random.default_rng(2)
    for _ in range(4):
        x = rng.normal(size=(8, 256)).astype(np.float32)
        np.testing.assert_array_equal(session.run({"x": x})["y"], 2 * x + 1)
    assert session.graph is None and "capturing" in session.graph_refused  # CUDA's refusal, as pycuda raised it
    assert standin.calls == 5, "plain, the refused capture, then plain from there on"


def test_a_replayed_graph_waits_for_a_side_stream_write(opened):
    session, _ = opened(cuda_graph=True)
    side = torch.cuda.Stream()
    x = torch.zeros(1024, 1024, device="cuda")
    y = torch.empty_like(x)
    for trial in range(5):
        torch.cuda.synchronize()
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)  # ~50 ms of GPU time before the write
            x.fill_(float(trial))
            session.run({"x": x}, out={"y": y})
        torch.cuda.synchronize()
        assert (y == 2 * trial + 1).all(), f"trial {trial}: read before the side stream's write finished"
    assert session.graph is not None
