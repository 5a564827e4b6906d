"""The README's training loop (examples/train_cem.py) runs and learns."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import train_cem  # noqa: E402


def test_cross_entropy_training_loop_improves_the_return():
    _, history = train_cem.train(iterations=6, num_envs=256, horizon=50, elite=32, seed=3)
    assert len(history) == 6
    assert history[-1] > history[0] + 1.0, history
