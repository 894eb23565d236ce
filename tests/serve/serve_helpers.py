"""What every serving test shares: the two stacks it runs on, and the skip when the serving extra is missing."""

from __future__ import annotations

import pytest

# Every serving test runs on both stacks of `trtpipe serve`: the same protocol, limits and answers.
STACKS = ["triton", "direct"]


def needs_pytriton():
    import importlib.util

    return pytest.mark.skipif(importlib.util.find_spec("pytriton") is None or importlib.util.find_spec("tritonclient") is None,
                              reason="nvidia-pytriton and tritonclient are not installed: pip install 'trtpipe[serve]'")
