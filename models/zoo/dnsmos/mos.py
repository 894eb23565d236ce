"""DNSMOS's three raw scores as its package reports them: speechmos's `get_polyfit_val` (not personalized)
maps SIG, BAK and OVRL each through its own quadratic onto the 1-5 mean opinion score scale."""

import numpy as np

# speechmos 0.0.1.1, dnsmos.py, DNSMOS.get_polyfit_val with is_personalized_MOS False: SIG, BAK, OVRL.
QUADRATICS = ([-0.08397278, 1.22083953, 0.0052439], [-0.13166888, 1.60915514, -0.39604546],
              [-0.06766283, 1.11546468, 0.04602535])


def opinion_scores(raw):
    """Return SIG, BAK and OVRL on the 1-5 scale, [samples, 3, 1]: three points of one coordinate each, so
    that a tolerance is the mean of the three scores' changes."""
    return np.stack([np.polyval(q, raw[:, k]) for k, q in enumerate(QUADRATICS)], axis=1)[..., None]
