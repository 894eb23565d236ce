"""Every command and Python snippet in README.md and docs/ runs, so the docs cannot drift from the code.

A page's ```console blocks hold `$ command` lines (a trailing backslash continues a line), run in
order in one workspace per page; a command is expected to exit 0, or the code its `# exit N`
comment names. ```python blocks run in the same workspace. The workspace holds what the pages
refer to: `model.onnx` (a digits classifier trained in the test), `model.toml`, and `data/calib`,
`data/val` of .npy samples with labels.

Markers, an HTML comment on the line before a block: `<!-- docs-test: gpu -->` runs the block only
where an engine can run (skipped here with the reason); `<!-- docs-test: zoo -->` runs it only under
`make zoo` (it downloads public models); `<!-- docs-test: serve ARGS -->` runs it while
`trtpipe serve ARGS` serves in the workspace (HTTP 8000, gRPC 8001, metrics 8002);
`<!-- docs-test: venv DIR -->` marks a page's install step: the checkout's tracked files are put at
`trtpipe/` in the workspace (the reader's clone), the block runs, and every later block of the page
runs in the virtual environment DIR it made, not in this checkout, so a missing install step fails;
`<!-- docs-test: skip REASON -->` is for blocks that cannot run anywhere a test does. A command that
trtpipe answers with its one line that a backend's extra is missing, where that package really is
absent, skips the rest of its page with the reason.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import models

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"(?P<markers>(?:<!-- docs-test: [^>]*? -->\n)*)```(?P<lang>console|python)\n(?P<body>.*?)```", re.DOTALL)
MARKER = re.compile(r"<!-- docs-test: ([^>]*?) -->")
RUN_ZOO = os.environ.get("TRTPIPE_DOCS_ZOO") == "1"

SPEC = """\
name = "model"
task = "classification"

[[inputs]]
name = "image"
shape = [-1, 1, 8, 8]

[shapes]
image = "1x1x8x8/16x1x8x8/64x1x8x8"

[data]
calibration = "data/calib"
validation = "data/val"
labels = "data/val/labels.txt"
"""


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    body: str
    markers: list[str]

    def marked(self, word: str) -> str | None:
        """Return the marker that starts with `word` (its arguments follow), else None."""
        return next((m for m in self.markers if m == word or m.startswith(word + " ")), None)

    @property
    def id(self) -> str:
        return f"{self.page.name}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [Block(page, text.count("\n", 0, m.start("body")) + 1, m["lang"], m["body"],
                  [marker.strip() for marker in MARKER.findall(m["markers"])]) for m in BLOCK.finditer(text)]


def commands(body: str) -> list[tuple[str, int]]:
    """Return (command, expected exit code) for each `$ ` line, continuation lines joined."""
    result, current = [], None
    for line in body.splitlines():
        if current is not None:
            current += " " + line.strip()
        elif line.startswith("$ "):
            current = line[2:].strip()
        else:
            continue  # output shown after a command
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        expected = re.search(r"#\s*exit (\d+)\s*$", current)
        result.append((current, int(expected[1]) if expected else 0))
        current = None
    return result


def make_workspace(path: Path) -> Path:
    """Write a digits classifier trained here (scikit-learn's 8x8 digits, 97% accurate) and its data."""
    from sklearn.datasets import load_digits
    from sklearn.neural_network import MLPClassifier

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    train, calib, val = slice(0, 1200), slice(1200, 1500), slice(1500, 1797)
    net = MLPClassifier(hidden_layer_sizes=(64,), max_iter=400, random_state=0)
    net.fit(images[train].reshape(-1, 64), digits.target[train])
    models.save(models.mlp_classifier(net.coefs_, net.intercepts_, (1, 8, 8)), path / "model.onnx")
    (path / "model.toml").write_text(SPEC)
    (path / "data").mkdir()
    models.save_batches(path / "data" / "calib", images[calib])
    models.save_batches(path / "data" / "val", images[val])
    ids = [f"{i - i % 16:03d}.npy[{i % 16}]" for i in range(val.stop - val.start)]
    (path / "data" / "val" / "labels.txt").write_text("".join(f"{i} {c}\n" for i, c in zip(ids, digits.target[val])))
    return path


def engine_runs_here() -> str | None:
    """Return why no engine can run here, or None when one can."""
    import importlib.util

    if importlib.util.find_spec("pycuda") is None:
        return "pycuda is not installed (no GPU runtime here)"
    if importlib.util.find_spec("tensorrt") is None:
        return "TensorRT is not installed; TensorRT-RTX engines need an SM 8.x/12.x GPU"
    return None


# The extras whose packages a page may need and this machine may lack: extra -> the module it installs.
BACKEND_EXTRAS = {"rtx": "tensorrt_rtx", "tensorrt": "tensorrt", "serve": "pytriton", "gpu": "pycuda.driver"}
INSTALL_HINT = re.compile(r"pip install 'trtpipe\[(?P<extra>[\w-]+)\]'")


class BackendAbsent(Exception):
    """A command refused because a backend's package is not installed here: the page cannot go on."""


def check_backend(block: Block, command: str, output: str) -> None:
    """Raise BackendAbsent when `output` ends in trtpipe's answer that an extra is missing, and it is.

    Only trtpipe's own one-line answer counts, and only when the module really cannot be found, so a
    broken command is never taken for a missing backend.
    """
    import importlib.util

    last = output.strip().splitlines()[-1] if output.strip() else ""
    hint = INSTALL_HINT.search(last) if last.startswith("trtpipe: error:") else None
    if hint and hint["extra"] in BACKEND_EXTRAS:
        module = BACKEND_EXTRAS[hint["extra"]]
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise BackendAbsent(f"{block.id}: `{command}` needs trtpipe[{hint['extra']}] ({module} is not installed)")


def _env(venv: Path | None = None) -> dict:
    """The blocks' environment: this checkout on the test's interpreter, or, after a page's install
    step (`docs-test: venv DIR`), that virtual environment alone, with what it installed."""
    env = dict(os.environ)
    env["PATH"] = f"{venv / 'bin' if venv else Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if venv:
        env["VIRTUAL_ENV"] = str(venv)
        env.pop("PYTHONPATH", None)
    else:
        env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}"
    env["TRTPIPE_NO_PROGRESS"] = "1"
    return env


def place_clone(workspace: Path) -> None:
    """Put the checkout's tracked files at workspace/trtpipe, where an install step finds "its clone"."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (workspace / "trtpipe" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, workspace / "trtpipe" / name)


PAGE_BLOCKS = {page: blocks(page) for page in PAGES}


class Server:
    """`trtpipe serve ARGS` in the workspace for the blocks that talk to it; stopped with SIGTERM."""

    def __init__(self, block: Block, args: str, workspace: Path, venv: Path | None = None):
        command = ["trtpipe", "serve", *shlex.split(args), "--http-port", "8000", "--grpc-port", "8001", "--metrics-port", "8002"]
        self.process = subprocess.Popen(command, cwd=workspace, env={**_env(venv), "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        # serve prints "ready" once every model has loaded (Triton's own health turns ready sooner)
        printed: list[str] = []
        reader = threading.Thread(target=lambda: printed.extend(self.process.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if any(line.startswith("ready") for line in printed):
                return
            if self.process.poll() is not None:
                reader.join(5)
                check_backend(block, f"trtpipe serve {args}", "".join(printed))
                raise AssertionError(f"trtpipe serve {args} stopped: {''.join(printed)[-1500:]}")
            time.sleep(0.5)
        self.stop()
        raise AssertionError(f"trtpipe serve {args} was not ready within 240 s")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=120)


def run_block(block: Block, workspace: Path, venv: Path | None = None) -> int:
    """Run one block in `workspace` (in `venv` when given); return how many commands or snippets ran."""
    if block.lang == "python":
        python = str(venv / "bin" / "python") if venv else sys.executable
        result = subprocess.run([python, "-c", block.body], cwd=workspace, env=_env(venv),
                                capture_output=True, text=True, timeout=600, check=False)
        if result.returncode != 0:
            check_backend(block, "its python block", result.stderr)
        assert result.returncode == 0, f"{block.id}: python block failed\n{result.stderr[-2000:]}"
        return 1
    ran = 0
    for command, expected in commands(block.body):
        result = subprocess.run(["bash", "-c", command], cwd=workspace, env=_env(venv),
                                capture_output=True, text=True, timeout=600, check=False)
        if result.returncode != expected:
            check_backend(block, command, result.stderr)
        assert result.returncode == expected, (
            f"{block.id}: `{command}` exited {result.returncode}, the page says {expected}\n"
            f"{result.stdout[-1500:]}\n{result.stderr[-1500:]}")
        ran += 1
    return ran


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """The workspace made once (training the classifier takes seconds); each page gets a copy."""
    return make_workspace(tmp_path_factory.mktemp("pristine"))


@pytest.mark.parametrize("page", [p for p in PAGES if PAGE_BLOCKS[p]], ids=lambda p: str(p.relative_to(ROOT)))
def test_page_runs(page, pristine, tmp_path):
    workspace = tmp_path / "workspace"
    shutil.copytree(pristine, workspace)
    ran, not_run, venv = 0, set(), None
    try:
        for block in PAGE_BLOCKS[page]:
            why = (block.marked("skip") or ("zoo: run by make zoo" if block.marked("zoo") and not RUN_ZOO else None)
                   or (f"gpu: {engine_runs_here()}" if block.marked("gpu") and engine_runs_here() else None))
            if why:
                not_run.add(why)
                continue
            if block.marked("venv"):  # the page's install step: later blocks run in what it installed
                place_clone(workspace)
                ran += run_block(block, workspace, venv)
                venv = workspace / block.marked("venv")[len("venv "):]
                continue
            if block.marked("serve"):
                server = Server(block, block.marked("serve")[len("serve "):], workspace, venv)
                try:
                    ran += run_block(block, workspace, venv)
                finally:
                    server.stop()
                continue
            ran += run_block(block, workspace, venv)
    except BackendAbsent as absent:
        pytest.skip(f"{absent}; {ran} commands and snippets ran before it")
    if not ran:
        pytest.skip(f"{page.name}: no block runs here ({'; '.join(sorted(not_run))})")


def test_commands_and_snippets_are_in_blocks_the_tests_run():
    """An indented `trtpipe ...` or `from trtpipe ...` line would never run: fence it as console or python."""
    for page in PAGES:
        outside = BLOCK.sub("", page.read_text())
        for line in outside.splitlines():
            text = line.strip()
            if line.startswith("    ") and text.startswith(("trtpipe ", "$ trtpipe ", "from trtpipe", "import trtpipe")):
                raise AssertionError(f"{page.name}: '{text}' is not in a ```console or ```python block")


def test_commands_parse_continuations_and_exit_codes():
    body = "$ trtpipe validate a.onnx \\\n    --baseline b.onnx  # exit 1\noutput line\n$ ls\n"
    assert commands(body) == [("trtpipe validate a.onnx --baseline b.onnx  # exit 1", 1), ("ls", 0)]


def test_every_documented_command_exists():
    """A `trtpipe X` in the docs names a real command, even in blocks the tests cannot run here."""
    from click.testing import CliRunner

    from trtpipe.cli import main

    names = set(main.commands)
    for page_blocks in PAGE_BLOCKS.values():
        for block in page_blocks:
            for command, _ in commands(block.body) if block.lang == "console" else []:
                for part in command.split("&&"):
                    words = shlex.split(part.split("#")[0]) or [""]
                    if words[0] == "trtpipe":
                        assert len(words) > 1 and words[1] in names | {"--help", "--version"}, f"{block.id}: {part}"
    assert CliRunner().invoke(main, ["--help"]).exit_code == 0
