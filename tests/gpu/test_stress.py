"""The runtime under load on a real GPU, with the stand-in execution context (scripts/gpu_standin.py): many
threads on one Engine and on one Engine each, and 10,000 open/close cycles that must leave device
memory, the context stack and the primary context's retains where they were."""

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

pycuda = pytest.importorskip("pycuda.driver", reason="pycuda is not installed: pip install 'trtpipe[gpu]'")

try:
    pycuda.init()
    HAS_GPU = pycuda.Device.count() > 0
except pycuda.Error:
    HAS_GPU = False
pytestmark = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU on this machine")

from gpu_standin import compile_kernel, standin_engine

HERE = Path(__file__).resolve().parent
THREADS, CALLS = 16, 1000


def _hammer(engines, errors):
    def work(index):
        engine = engines[index % len(engines)]
        rng = np.random.default_rng(index)
        for call in range(CALLS):
            x = rng.normal(size=(int(rng.integers(1, 33)), 64)).astype(np.float32)
            if not np.array_equal(engine.infer({"x": x})["y"], 2 * x + 1):
                errors.append((index, call))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.mark.parametrize("engines", [1, THREADS], ids=["one-engine", "engine-per-thread"])
def test_sixteen_threads_a_thousand_calls_each_all_right(engines):
    from trtpipe.runtime.cuda import CudaContext

    holder = CudaContext(0)
    kernel = compile_kernel(holder)
    opened = [standin_engine(CudaContext(0), kernel)[0] for _ in range(engines)]
    errors = []
    try:
        _hammer(opened, errors)
    finally:
        for engine in opened:
            engine.close()
        holder.release()
    assert not errors, f"{len(errors)} wrong answers, first {errors[:3]}"


def test_ten_thousand_open_close_cycles_leave_nothing_behind():
    code = textwrap.dedent("""
        import numpy as np, pycuda.driver as cuda
        from gpu_standin import compile_kernel, standin_engine
        from trtpipe.runtime import driver_api
        from trtpipe.runtime.cuda import CudaContext
        holder = CudaContext(0)  # keeps the kernel's module loaded across the cycles
        kernel = compile_kernel(holder)
        def state():
            with holder:
                free = cuda.mem_get_info()[0]
            return free, driver_api.current_context(), cuda.Context.get_current() is None
        before = state()
        x = np.ones((8, 1024), np.float32)
        for cycle in range(10_000):
            engine = standin_engine(CudaContext(0), kernel)[0]
            assert (engine.infer({"x": x})["y"] == 3).all()
            engine.close()
        after = state()
        print("free MiB before/after:", before[0] >> 20, after[0] >> 20, "| current context before/after:",
              before[1], after[1], "| pycuda stack empty:", before[2], after[2])
        assert after[1:] == before[1:] and abs(after[0] - before[0]) <= 2 << 20, (before, after)
        holder.release()
        assert not driver_api.primary_context_active(0), "a cycle kept a retain of the primary context"
        print("primary context released: every retain was given back")
    """)
    root = HERE.parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "scripts"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=600)
    print(result.stdout)
    assert result.returncode == 0, result.stderr[-3000:]


def test_results_held_past_close_free_nothing_late():
    # A service may keep a PendingResult after closing its engine; the session it points to must not
    # still own a stream or event then: pycuda cannot destroy them once the context is released.
    code = textwrap.dedent("""
        import gc
        import numpy as np, pycuda.driver as cuda
        from gpu_standin import compile_kernel, standin_engine
        from trtpipe.runtime.cuda import CudaContext
        holder = CudaContext(0)
        kernel = compile_kernel(holder)
        def free_bytes():
            with holder:
                return cuda.mem_get_info()[0]
        before = free_bytes()
        kept = []
        for cycle in range(300):
            engine = standin_engine(CudaContext(0), kernel)[0]
            kept.append(engine.infer_async({"x": np.ones((8, 1024), np.float32)}))
            engine.close()
        del kept, engine
        gc.collect()
        after = free_bytes()
        print("free MiB before/after:", before >> 20, after >> 20)
        assert abs(after - before) <= 2 << 20, (before, after)
        holder.release()
    """)
    root = HERE.parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "scripts"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env, timeout=300)
    print(result.stdout)
    assert result.returncode == 0, result.stderr[-3000:]
