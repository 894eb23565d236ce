import json
import os
import stat

import pytest
from conftest import needs_rtx

from trtpipe.backend import TENSORRT, TENSORRT_RTX, choose_spec
from trtpipe.errors import TrtpipeError
from trtpipe.targets import Precision, Target


@pytest.mark.parametrize("text,cap", [
    ("sm_90", (9, 0)), ("sm89", (8, 9)), ("9.0", (9, 0)), ("12.0", (12, 0)), ("sm_120", (12, 0)),
    ("T4", (7, 5)), ("A10", (8, 6)), ("A100", (8, 0)), ("L4", (8, 9)), ("L40S", (8, 9)), ("H100", (9, 0)),
    ("H200", (9, 0)), ("B200", (10, 0)), ("RTX 4090", (8, 9)), ("RTX 5090", (12, 0)),
    ("NVIDIA H100 80GB HBM3", (9, 0)), ("NVIDIA GeForce RTX 4090", (8, 9)),
])
def test_targets_parse(text, cap):
    assert Target.parse(text).capability == cap


def test_unknown_target_names_the_flag():
    with pytest.raises(TrtpipeError, match="--target Z9: unknown target"):
        Target.parse("Z9")


def test_precision_table():
    t4, h100, b200 = Target(7, 5), Target(9, 0), Target(10, 0)
    assert t4.hardware_supports(Precision.INT8) and not t4.hardware_supports(Precision.BF16)
    assert h100.hardware_supports(Precision.FP8) and not h100.hardware_supports(Precision.FP4)
    assert b200.hardware_supports(Precision.FP4)


def test_backend_flags_differ_without_if_chains():
    assert TENSORRT_RTX.builds_without_gpu and not TENSORRT.builds_without_gpu
    assert not TENSORRT_RTX.runs_on(Target(9, 0)) and TENSORRT.runs_on(Target(9, 0))
    ok, why = TENSORRT_RTX.supports(Target(9, 0), Precision.FP16)
    assert not ok and "does not run on compute capability 9.0" in why
    ok, why = TENSORRT_RTX.supports(Target(8, 0), Precision.FP8)
    assert not ok and "fp8 needs compute capability 8.9" in why
    assert choose_spec("auto", Target(9, 0)) is TENSORRT  # RTX cannot run sm_90


def test_plan_json(cli):
    code, out, _ = cli("plan", "--target", "A100", "--backend", "tensorrt-rtx", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["target"] == "sm80"
    rows = {r["precision"]: r for r in plan["precisions"]}
    assert rows["bf16"]["supported"] and not rows["fp8"]["supported"]
    assert "8.9" in rows["fp8"]["reason"]


def test_plan_auto_without_gpu_says_so(cli, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    code, _, err = cli("plan", "--target", "auto")
    assert code == 2 and "no NVIDIA GPU found" in err and "--target sm_89" in err


def test_import_needs_no_backend():
    import subprocess
    import sys

    code = ("import sys, trtpipe, trtpipe.cli, trtpipe.runtime, trtpipe.build, trtpipe.quality.validate; "
            "bad = [m for m in ('tensorrt', 'tensorrt_rtx', 'pycuda', 'torch') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_service_embedding_the_runtime_loads_no_graph_code_and_no_onnx():
    """docs/design.md: a service installs the runtime alone. Engine, bench and the server import nothing of
    graph/ or build.py, nor onnx; only running an ONNX (OnnxRunner) reaches graph/, lazily."""
    import subprocess
    import sys

    code = ("import sys, trtpipe.runtime.engine, trtpipe.runtime.bench, trtpipe.serve.server; "
            "bad = [m for m in sys.modules if m.split('.')[0] == 'onnx' or m.startswith(('trtpipe.graph', 'trtpipe.build'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    run = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


@needs_rtx
def test_a_target_the_installed_backend_cannot_build_says_so(cli, tmp_path):
    """sm_90 with only TensorRT-RTX installed: name what RTX builds, not only 'install tensorrt'."""
    import importlib.util

    import models

    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("full TensorRT is installed here: it builds for sm_90")
    models.save(models.mlp(), tmp_path / "m.onnx")
    code, _, err = cli("build", tmp_path / "m.onnx", "--precision", "fp16", "--target", "sm_90", "-o", tmp_path / "e")
    assert code == 2 and "tensorrt-rtx does not build for compute capability 9.0" in err and "8.9" in err
    assert not (tmp_path / "e").exists()


@pytest.fixture
def two_gpu_smi(tmp_path, monkeypatch):
    """nvidia-smi as on a host with an L4 (index 0) and an A100 (index 1): it answers --id=N as the real one does."""
    script = tmp_path / "nvidia-smi"
    script.write_text('#!/bin/sh\ncase "$1" in\n  --id=1) echo "NVIDIA A100-SXM4-80GB, 8.0";;\n'
                      '  --id=0) echo "NVIDIA L4, 8.9";;\n  *) echo "NVIDIA L4, 8.9"; echo "NVIDIA A100-SXM4-80GB, 8.0";;\nesac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr("trtpipe.targets._cuda_device0", lambda: None)  # as on a machine without pycuda


def test_local_target_follows_cuda_visible_devices(two_gpu_smi, monkeypatch):
    from trtpipe.targets import local_target

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert local_target().capability == (8, 9)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert local_target().capability == (8, 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(TrtpipeError, match="hides every GPU"):
        local_target()
