"""Data to scales: streaming histograms, TensorRT's entropy search, max/percentile/MSE, and the cache file.

Nothing here needs TensorRT or a GPU, except `calibrators.tensorrt` (TensorRT 10's implicit path).
"""

from calibrators.cache import CalibrationTable, read_cache, write_cache
from calibrators.histogram import StreamingHistogram

__all__ = ["CalibrationTable", "StreamingHistogram", "read_cache", "write_cache"]
