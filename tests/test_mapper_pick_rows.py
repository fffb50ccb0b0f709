"""The mapper's per-order pick (search._pick_rows) is search._pick applied row by row."""
import numpy as np

from sim.model.mapper.search import _pick, _pick_rows


def test_pick_rows_is_pick_of_every_row():
    rng = np.random.default_rng(7)
    for _ in range(300):
        rows, n = rng.integers(1, 7), rng.integers(1, 40)
        # few distinct values, so ties in every key are common; some infinite estimates
        est = rng.choice([100.0, 101.0, 102.5, 103.0, 200.0, np.inf], size=(rows, n))
        traffic = rng.choice([0.0, 5.0, 6.0, np.inf], size=(rows, n))
        volume = rng.choice([64, 128, 256], size=n).astype(np.int64)
        assert _pick_rows(est, traffic, volume) == [_pick(e, t, volume) for e, t in zip(est, traffic)]
