"""LORE's cell centres as lineless-table-rec reads them: DetProcess takes the sigmoid of the heatmap's first
channel (cell centres; the second, corners, it never reads), keeps its 3x3 local maxima and decodes a cell
at each of them scoring 0.15 or more."""

import numpy as np


def centres(hm):
    """Return the cell-centre probabilities [samples, 1, h, w]: sigmoid of channel 0 of the logits, computed
    without overflow (the logits reach -8e4 and +3e4)."""
    logits = np.asarray(hm[:, :1], np.float64)
    return np.exp(-np.logaddexp(0.0, -logits))
