"""trtpipe's log: library messages through `logging`, one level set by trtpipe.log.configure."""

from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

from trtpipe.cli import main
from trtpipe.log import LOGGER, configure


@pytest.fixture(autouse=True)
def restore_level():
    level, propagate = LOGGER.level, LOGGER.propagate
    yield
    LOGGER.setLevel(level)
    LOGGER.propagate = propagate


def test_library_messages_are_one_line_on_stderr_and_debug_only_when_verbose(capsys):
    configure()
    logging.getLogger("trtpipe.serve.environment").info("numpy for the stub\nin site")
    logging.getLogger("trtpipe.quantize").debug("hidden")
    assert capsys.readouterr().err == "trtpipe: numpy for the stub\\nin site\n"
    configure(verbose=True)
    logging.getLogger("trtpipe.quantize").debug("plan")
    assert capsys.readouterr().err == "trtpipe: plan [trtpipe.quantize]\n"


def test_configure_twice_adds_no_second_handler(capsys):
    configure()
    configure()
    logging.getLogger("trtpipe.x").warning("once")
    assert capsys.readouterr().err.count("once") == 1


@pytest.mark.parametrize("command", ["build", "serve", "deploy"])
def test_a_commands_verbose_lowers_the_one_level(tmp_path, command):
    """deploy builds engines too, and a failed build says 'rerun with --verbose' (brainmaze's spindle detector
    in BF16): deploy answered 'No such option: --verbose'."""
    out = ["-o", str(tmp_path / "out")] if command in ("build", "deploy") else []
    args = [command, str(tmp_path / "missing.onnx"), "--verbose"] + out
    CliRunner().invoke(main, args)
    assert LOGGER.getEffectiveLevel() == logging.DEBUG
    CliRunner().invoke(main, [command, str(tmp_path / "missing.onnx")] + args[3:])
    assert LOGGER.getEffectiveLevel() == logging.INFO
