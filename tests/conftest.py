import importlib.util
import os
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# scripts/ after tests/: the tests import the scripts they test and the GPU stand-in, and both folders hold
# a zoo.py: the tests mean their own.
sys.path.append(str(Path(__file__).resolve().parents[1] / "scripts"))
os.environ.setdefault("TRTPIPE_NO_PROGRESS", "1")
# A shell starts a command it runs in the background (`make test &`, nohup) with SIGINT ignored, and
# every command the tests start would inherit that: the Ctrl-C tests need it delivered. A handler of
# Python's own is reset to the default in the commands the tests start.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

HAS_RTX = importlib.util.find_spec("tensorrt_rtx") is not None
needs_rtx = pytest.mark.skipif(not HAS_RTX, reason="tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")


@pytest.fixture
def cli(tmp_path):
    """Run the trtpipe CLI in-process; return (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    from trtpipe.cli import main

    def run(*args):
        result = CliRunner().invoke(main, [str(a) for a in args])
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr

    return run
