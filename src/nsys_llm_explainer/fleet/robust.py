"""The robust band used to call a value an outlier among ranks or collectives.

band = median + K x MAD_SCALE x MAD. MAD_SCALE makes the MAD estimate the standard
deviation of normally distributed values, so K = 3 is the familiar 3-sigma line: a rank
that only differs by noise crosses it about once in 740 draws (0.13%), i.e. fewer than one
false straggler in ten 64-rank jobs, while one outlier cannot inflate the band the way it
inflates a standard deviation. A floor of MIN_EXCESS_PCT above the median keeps identical
ranks (MAD close to 0) from being flagged for differences nobody could act on. It takes at
least MIN_RANKS values: with two, both sit exactly one MAD from their median.
"""

from __future__ import annotations

import numpy as np

K = 3.0
MAD_SCALE = 1.4826
MIN_EXCESS_PCT = 2.0
MIN_RANKS = 3


def band(values: np.ndarray, k: float = K) -> tuple[float, float, float]:
    """(median, MAD, upper limit) of `values`."""
    v = np.asarray(values, dtype=np.float64)
    med = float(np.median(v))
    mad = float(np.median(np.abs(v - med)))
    upper = max(med + k * MAD_SCALE * mad, med * (1.0 + MIN_EXCESS_PCT / 100.0))
    return med, mad, upper


def above(values: np.ndarray, k: float = K) -> np.ndarray:
    """Boolean mask of the values beyond the upper band."""
    _, _, upper = band(values, k)
    return np.asarray(values, dtype=np.float64) > upper
