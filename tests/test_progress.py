"""Progress bars count whole samples and end on the last one, a short last batch included."""

import io

import pytest

from trtpipe.progress import progress_bar


@pytest.mark.parametrize("total", [None, 40])
def test_bar_ends_on_the_last_sample(monkeypatch, total):
    monkeypatch.delenv("TRTPIPE_NO_PROGRESS", raising=False)
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    with progress_bar(total, "calibrating m.onnx", "samples") as bar:
        for size in (16, 16, 8):
            bar.update(size)
    final = stream.getvalue().replace("\r", "\n").strip().splitlines()[-1]
    assert ("40/40 [" if total else "40 samples [") in final, final
    count = final.split("[")[0]  # the rate after it ("367116.32 samples/s") may hold any digits
    assert "40.0" not in count and "32" not in count
