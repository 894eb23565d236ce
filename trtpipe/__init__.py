"""trtpipe: ONNX to FP16/INT8/FP8 TensorRT engines, proven accurate, run from a small runtime.

Importing trtpipe imports none of TensorRT, pycuda or PyTorch; the functions that need one say
which extra to install.
"""

import logging

__version__ = "0.1.0"

# Silent unless the application configures logging (trtpipe.log.configure does it for the commands).
logging.getLogger("trtpipe").addHandler(logging.NullHandler())
