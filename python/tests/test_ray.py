"""Fan-out across Ray worker processes draws exactly what one process draws."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ray = pytest.importorskip("ray") if os.environ.get("CI") != "true" else __import__("ray")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import ray_fanout  # noqa: E402

import simbatch  # noqa: E402


@pytest.fixture(scope="module")
def local_cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_fan_out_matches_one_process(local_cluster):
    workers, per_worker, steps, seed = 2, 64, 30, 500
    results = ray_fanout.fan_out("BallOnPlate-v0", workers, per_worker, steps, seed=seed)
    assert len(results) == workers

    # One process, all environments, the same per-worker action streams.
    env = simbatch.VectorEnv("BallOnPlate-v0", workers * per_worker)
    env.reset(seed=seed)
    rngs = [np.random.default_rng(seed + w) for w in range(workers)]
    total = np.zeros(env.num_envs)
    episodes = 0
    for _ in range(steps):
        actions = np.concatenate(
            [r.uniform(-1.0, 1.0, size=(per_worker, 2)).astype(np.float32) for r in rngs]
        )
        obs, reward, terminated, truncated, _ = env.step(actions)
        total += reward
        episodes += int(np.sum(terminated | truncated))
    np.testing.assert_array_equal(np.concatenate([r["obs"] for r in results]), obs)
    np.testing.assert_array_equal(np.concatenate([r["returns"] for r in results]), total)
    assert sum(r["episodes"] for r in results) == episodes
    assert episodes > 0
