"""The runtime installs alone: a service that embeds an engine installs numpy and its GPU packages,
not the builder's (onnx, ONNX Runtime, matplotlib, Pillow, click, tqdm, ml_dtypes)."""

import subprocess
import sys
from pathlib import Path

import tomllib
from conftest import needs_rtx

from models import dynamic_mlp, save
from trtpipe.build import BuildOptions, build
from trtpipe.spec import parse_shapes
from trtpipe.targets import Target

ROOT = Path(__file__).resolve().parents[2]
BUILDER_PACKAGES = ["onnx", "onnxruntime", "matplotlib", "PIL", "click", "tqdm", "ml_dtypes"]
# Runs first in the child: any import of a builder package fails as it would where none is installed.
ABSENT = f"""
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BUILDER_PACKAGES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Absent())
"""


def run_without_the_builder(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ABSENT + code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)


def test_the_base_install_is_numpy_alone():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert [d.split(">")[0] for d in project["dependencies"]] == ["numpy"]


@needs_rtx
def test_engine_imports_and_checks_an_engine_without_the_builder(tmp_path):
    save(dynamic_mlp(), tmp_path / "mlp.onnx")
    options = BuildOptions(target=Target(8, 9), backend="tensorrt-rtx", shapes=parse_shapes(["x:1x16/8x16/64x16"]))
    engine = build(tmp_path / "mlp.onnx", tmp_path, ["fp16"], options)[0].engine
    result = run_without_the_builder(f"""
from trtpipe.runtime import Engine, Runner
from trtpipe.runtime.sidecar import verify_engine
from trtpipe.errors import TrtpipeError
print(verify_engine({str(engine)!r}).precision)
try:
    Engine({str(engine)!r})
except TrtpipeError as exc:
    print("refused:", exc)
for name in {BUILDER_PACKAGES!r}:
    assert name not in sys.modules, name
""")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "fp16"
    if len(lines) > 1:  # no GPU runtime here: the one-line answer names the extra, not a builder package
        assert lines[1].startswith("refused:") and "pip install 'trtpipe[gpu]'" in lines[1], lines[1]


def test_the_commands_without_the_pipeline_extra_say_what_to_install():
    result = run_without_the_builder("import runpy; runpy.run_module('trtpipe.cli', run_name='__main__')")
    assert result.returncode == 2
    assert result.stderr.strip() == "trtpipe: error: the trtpipe commands need the pipeline extra: pip install 'trtpipe[pipeline]'"
