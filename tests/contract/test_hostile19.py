"""Session 19's classes, tried on commands the batteries had not tried them on.

- A whole run refused for one precision that cannot be had: deploy calibrated INT8 and FP8 for a graph whose
  FP16 and BF16 TensorRT had refused (test_deploy); `build --precision auto` of a model with nothing to quantize
  refused FP32, FP16 and BF16 with INT8.
- An output's role misread: a bfloat16 output was no float to init (test_starting_spec); validate and
  sensitivity without a spec read it as float already, and are held to it here.
- A file that is not a regular file where one is expected: a cache's sidecar through `inspect`, whose path
  the first battery gives only models (role "model").
- An input larger than memory: a .npy of 256 MB of which a command takes 4 samples, through every command
  that reads data with --limit, and init (which reads the first files for shapes).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import needs_rtx
from onnx import TensorProto
from test_starting_spec import _encoder

import models
from contract.test_hostile import SIDECAR_VARIANTS, check_refused, run_cli


@pytest.mark.parametrize("variant", sorted(SIDECAR_VARIANTS))
def test_inspect_refuses_a_cache_whose_sidecar_cannot_be_used(variant, tmp_path):
    make, name = SIDECAR_VARIANTS[variant]
    workspace, hostile, out = (tmp_path / d for d in ("ws", "hostile", "out"))
    for folder in (workspace, hostile, out):
        folder.mkdir()
    make(hostile / name)
    check_refused(["inspect", hostile / name], workspace, out, hostile, [f"{name}.json"])


@needs_rtx
def test_build_auto_of_a_model_with_nothing_to_quantize_builds_the_rest(tmp_path):
    """`auto` is what the model and target run: INT8 and FP8 of an element-wise scorer are skipped with a warning,
    as deploy skips them; asked for by name, INT8 is still one line and exit 2."""
    models.save(models.per_sample(), tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, 16).astype(np.float32), per_file=4)
    common = ["--data", tmp_path / "data", "--shapes", "x:1/8/32", "--target", "sm_89", "--backend", "tensorrt-rtx"]
    code, _out, err, _ = run_cli(["build", tmp_path / "m.onnx", *common, "-o", tmp_path / "auto"])
    assert code == 0, err
    assert {p.name.split(".")[1] for p in (tmp_path / "auto").glob("*.engine")} == {"fp32", "fp16", "bf16"}
    assert "int8 not built" in err and "fp8 not built" in err and "no Conv, MatMul or Gemm" in err
    hostile, out = tmp_path / "h", tmp_path / "int8"
    hostile.mkdir(), out.mkdir()
    check_refused(["build", tmp_path / "m.onnx", *common, "--precision", "int8", "-o", out / "engines"], tmp_path / "data",
                  out, hostile, ["no Conv, MatMul or Gemm"])


def test_sensitivity_and_validate_read_a_bfloat16_output_as_float(tmp_path):
    models.save(_encoder("logits", False, TensorProto.BFLOAT16), tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (16, 16)).astype(np.float32), per_file=4)
    code, out, err, exc = run_cli(["validate", tmp_path / "m.onnx", "--baseline", tmp_path / "m.onnx", "--data",
                                   tmp_path / "data", "--json"])
    assert code == 0, f"{err}{exc!r}"
    assert json.loads(out)["outputs"]["logits"]["task"] == "classification"
    code, _out, err, exc = run_cli(["calibrate", tmp_path / "m.onnx", "--data", tmp_path / "data", "-o", tmp_path / "c.cache"])
    assert code == 0, f"{err}{exc!r}"
    code, _out, err, exc = run_cli(["sensitivity", tmp_path / "m.onnx", "--cache", tmp_path / "c.cache", "--data",
                                    tmp_path / "data", "--limit", 8])
    assert code == 0, f"{err}{exc!r}"


LARGE = {  # {ws}: the model and the folder of the large file; {out}: a folder for outputs
    "calibrate": "calibrate {ws}/mlp.onnx --data {ws}/data --limit 4 -o {out}/c.cache",
    "validate": "validate {ws}/mlp.onnx --baseline {ws}/mlp.onnx --data {ws}/data --limit 4",
    "smooth": "smooth {ws}/mlp.onnx --data {ws}/data --limit 4 -o {out}/s.onnx",
    "init": "init {ws}/mlp.onnx --data {ws}/data -o {out}/m.toml",
}


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """A 256 MB .npy of 16-wide samples (sparse on disk: only its first 64 samples are written) for an MLP."""
    ws = tmp_path_factory.mktemp("large")
    models.save(models.mlp(batch="N"), ws / "mlp.onnx")
    (ws / "data").mkdir()
    array = np.lib.format.open_memmap(ws / "data" / "big.npy", mode="w+", dtype=np.float32, shape=(1 << 22, 16))
    array[:64] = np.random.default_rng(0).normal(0, 1, (64, 16))
    del array
    return ws


@pytest.mark.parametrize("command", sorted(LARGE))
def test_a_npy_larger_than_what_a_command_takes_is_not_read_whole(command, large, tmp_path):
    """Peak RSS of the command (in a process of its own, after the imports every command makes) stays far below
    the file's 256 MB: np.load read it whole, and the NaN check scanned all of it."""
    argv = LARGE[command].format(ws=large, out=tmp_path).split()
    script = f"""
import resource
import onnxruntime, onnx, trtpipe.calibrate, trtpipe.quality.validate, trtpipe.starting_spec
from click.testing import CliRunner
from trtpipe.cli import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = CliRunner().invoke(main, {argv!r})
assert result.exit_code in (0, 1), (result.exit_code, result.stderr, result.exception)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""
    ran = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    grown = int(ran.stdout.split()[-1]) >> 10
    assert grown < 128, f"{command}: peak RSS grew by {grown} MB for a 256 MB file"
