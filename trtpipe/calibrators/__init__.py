"""Data to scales: streaming histograms, TensorRT's entropy search, max/percentile/MSE, and the cache file.

Nothing here needs TensorRT or a GPU, except `trtpipe.calibrators.tensorrt` (TensorRT 10's implicit path).
"""

from trtpipe.calibrators.cache import CalibrationTable, read_cache, write_cache
from trtpipe.calibrators.histogram import StreamingHistogram

__all__ = ["CalibrationTable", "StreamingHistogram", "read_cache", "write_cache"]
