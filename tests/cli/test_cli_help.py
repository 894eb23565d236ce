"""Every command's --help has a one-line summary, help for every option and an example; the
command pages in docs/commands/ are what the CLI says (scripts/command_docs.py writes them)."""

import subprocess
import sys
from pathlib import Path

import pytest

from trtpipe.cli import main

ROOT = Path(__file__).resolve().parents[2]
import command_docs


@pytest.mark.parametrize("name", sorted(main.commands))
def test_help_has_a_summary_option_help_and_an_example(name):
    command = main.commands[name]
    summary = (command.help or "").strip().splitlines()
    assert summary and summary[0].endswith("."), f"{name}: the help's first line is its one-line summary"
    import click

    bare = [p.opts[0] for p in command.params if isinstance(p, click.Option) and not p.help and p.opts[0] != "--help"]
    assert not bare, f"{name}: options without help: {bare}"
    assert command_docs.examples(command), f"{name}: no 'Examples:' lines in its help"


def test_command_pages_are_up_to_date():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "command_docs.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_model_toml_reference_is_the_schema():
    """docs/model-toml.md is written from the schema load_spec checks against; every key has its text."""
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "spec_docs.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
