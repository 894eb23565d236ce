"""An enqueue captured once as a CUDA graph and launched in its place (trtexec's --useCudaGraph).

A graph replays the kernels with the arguments they had at capture: the same tensor addresses and
shapes, and TensorRT's own state as it was then. So a graph serves only while nothing is rebound
on the execution context; whoever holds one destroys it when a shape or an address changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from trtpipe.runtime import driver_api


class CapturedGraph:
    """`enqueue()` as recorded on `stream` (it does not run then); `launch()` queues the recording."""

    def __init__(self, stream: int, enqueue: Callable[[], None]):
        self.stream = stream
        driver_api.begin_capture(stream)
        try:
            enqueue()
        except BaseException:
            # The stream stays in capture mode until the capture is ended, valid or not.
            with contextlib.suppress(driver_api.DriverError):
                driver_api.graph_destroy(driver_api.end_capture(stream), None)
            raise
        # Raises (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and the like) when enqueue did something a
        # capture cannot hold, such as a synchronization; the stream is out of capture mode either way.
        self.graph = driver_api.end_capture(stream)
        try:
            self.executable = driver_api.graph_instantiate(self.graph)
        except BaseException:
            driver_api.graph_destroy(self.graph, None)
            raise

    def launch(self) -> None:
        driver_api.graph_launch(self.executable, self.stream)

    def destroy(self) -> None:
        """Free the graph; a launch still in flight finishes first (CUDA frees it on completion)."""
        driver_api.graph_destroy(self.graph, self.executable)
