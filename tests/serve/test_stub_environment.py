"""Triton's Python stub imports what model.py imports, in the environment trtpipe gives it.

The stub runs this interpreter isolated (no PYTHONPATH) in the environment `trtpipe serve` gives
Triton (server_environment: the stub site first on its path, numpy 1.x and the packages that must
match it): a release of any package the stub imports that needs
another numpy breaks every Python-backend model at load, as ml_dtypes 0.7 did. This runs what
model.py runs, in that environment, before a server has to find out.
"""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
from serve_helpers import needs_pytriton

import models
from trtpipe import serve
from trtpipe.runtime import OnnxRunner
from trtpipe.serve.environment import server_environment

pytestmark = needs_pytriton()
PROVIDED_BY_THE_STUB = {"triton_python_backend_utils"}
MODEL_PY = Path(serve.__file__).parent / "python_model.py"  # copied as <model>/1/model.py


def imported_modules(path: Path) -> set[str]:
    """Return every module a file imports, at the top or inside functions."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names - PROVIDED_BY_THE_STUB


def test_model_py_imports_are_found():
    assert {"numpy", "trtpipe.runtime", "trtpipe.runtime.cuda"} <= imported_modules(MODEL_PY)


def test_the_stub_environment_imports_and_runs_what_model_py_does(tmp_path):
    models.save(models.conv_net(batch="N"), tmp_path / "conv.onnx")
    sample = np.random.default_rng(0).random((2, 3, 16, 16), dtype=np.float32)
    np.save(tmp_path / "sample.npy", sample)
    modules = sorted(imported_modules(MODEL_PY))
    script = f"""
import importlib, sys
import numpy as np
assert int(np.__version__.split(".")[0]) < 2, f"the stub would run numpy {{np.__version__}}, not 1.x"
for name in {modules!r}:
    importlib.import_module(name)
from trtpipe.runtime import Engine, OnnxRunner  # model.py opens one of the two
with OnnxRunner({str(tmp_path / "conv.onnx")!r}, threads=1) as runner:
    np.save({str(tmp_path / "logits.npy")!r}, runner({{"input": np.load({str(tmp_path / "sample.npy")!r})}})["logits"])
"""
    result = subprocess.run([sys.executable, "-I", "-c", script], env=server_environment(), capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    with OnnxRunner(tmp_path / "conv.onnx") as runner:
        np.testing.assert_allclose(np.load(tmp_path / "logits.npy"), runner({"input": sample})["logits"], rtol=1e-5, atol=1e-6)
