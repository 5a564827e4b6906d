"""The Stable-Baselines3 adapter (`simbatch.sb3.SB3VecEnv`): the same transitions, bit for bit,
as SB3's own `DummyVecEnv` over single `simbatch.Env`s, PPO learning through it, and the rest of
SB3's `VecEnv` API. Skipped where Stable-Baselines3 is not installed (it pulls in PyTorch)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

import simbatch  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402
from simbatch.sb3 import SB3VecEnv  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize  # noqa: E402

SETTINGS = {"max_episode_steps": 30}


# BallToss is one throw per episode: it always terminates.
@pytest.mark.parametrize("env_id, endings", [("BallOnPlate-v0", {"terminated", "truncated"}), ("BallToss-v0", {"terminated"})])
def test_transitions_equal_sb3_dummy_vec_env_of_single_envs(env_id, endings):
    n, steps = 8, 120
    ours = SB3VecEnv(env_id, n, settings=SETTINGS)
    ref = DummyVecEnv([lambda: simbatch.Env(env_id, settings=SETTINGS) for _ in range(n)])
    assert ours.observation_space == ref.observation_space
    assert ours.action_space == ref.action_space
    ours.seed(7)
    ref.seed(7)
    a, b = ours.reset(), ref.reset()
    assert a.dtype == b.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(3)
    ended = {"terminated": 0, "truncated": 0}
    for _ in range(steps):
        actions = rng.uniform(-1, 1, (n, ours.action_space.shape[0])).astype(np.float32)
        oa, ra, da, ia = ours.step(actions)
        ob, rb, db, ib = ref.step(actions)
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(da, db)
        for i in np.flatnonzero(da):
            np.testing.assert_array_equal(ia[i]["terminal_observation"], ib[i]["terminal_observation"])
            assert ia[i]["TimeLimit.truncated"] == ib[i]["TimeLimit.truncated"]
            ended["truncated" if ia[i]["TimeLimit.truncated"] else "terminated"] += 1
        for i in np.flatnonzero(~da):
            assert ia[i] == {}
    # Every kind of ending the task has was compared (BallOnPlate: the horizon is 30 steps,
    # random actions drop the ball off the plate sooner in some episodes).
    assert {k for k, v in ended.items() if v > 0} == endings, ended
    ours.close()


def test_ppo_learns_ball_on_plate_through_the_adapter():
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(1)
    settings = {"max_episode_steps": 100}
    env = VecMonitor(SB3VecEnv("BallOnPlate-v0", 64, settings=settings))
    model = PPO("MlpPolicy", env, seed=0, n_steps=64, batch_size=1024, verbose=0)
    evaluation = VecMonitor(SB3VecEnv("BallOnPlate-v0", 64, settings=settings))
    before, _ = evaluate_policy(model, evaluation, n_eval_episodes=64, deterministic=True)
    model.learn(total_timesteps=200_000)
    after, _ = evaluate_policy(model, evaluation, n_eval_episodes=64, deterministic=True)
    # The return is at most 100 (a reward ≤ 1 a step over 100 steps); an untrained policy loses
    # the ball after about 20 steps.
    assert after > before + 20, (before, after)


def test_the_rest_of_the_vec_env_api():
    env = SB3VecEnv("BallToss-v0", 4, render_mode="rgb_array", render_size=(32, 24), render_envs=2)
    env.seed(11)
    obs = env.reset()
    assert obs.shape == (4, env.observation_space.shape[0])
    # Seeds are used once: the same seeds give the same first observations.
    env.seed(11)
    np.testing.assert_array_equal(env.reset(), obs)
    assert env.get_attr("render_mode") == ["rgb_array"] * 4
    assert env.get_attr("num_envs", indices=[1, 3]) == [4, 4]
    assert env.env_is_wrapped(VecMonitor) == [False] * 4
    pictures = env.get_images()
    assert [p is None for p in pictures] == [False, False, True, True]
    assert pictures[0].shape == (24, 32, 3) and pictures[0].dtype == np.uint8
    assert env.env_method("render_env", 0, 20, 16, indices=[2])[0].shape == (16, 20, 3)
    with pytest.raises(ValueError, match="set_attr"):
        env.set_attr("render_mode", None, indices=[0])
    with pytest.raises(IndexError, match="accepted: 0 … 3"):
        env.get_attr("num_envs", indices=[4])
    env.set_options({"reset_mask": [True] * 4})
    with pytest.raises(ValueError, match="options"):
        env.reset()
    with pytest.raises(RuntimeError, match="step_async"):
        env.step_wait()
    with pytest.raises(ValueError, match="SAME_STEP"):
        SB3VecEnv(simbatch.VectorEnv("BallToss-v0", 2))
    ready = SB3VecEnv(simbatch.VectorEnv("BallToss-v0", 2, autoreset_mode=AutoresetMode.SAME_STEP))
    assert ready.num_envs == 2
    # SB3's wrappers stack on it.
    normalized = VecNormalize(SB3VecEnv("BallOnPlate-v0", 4))
    normalized.reset()
    o, r, d, i = normalized.step(np.zeros((4, 2), dtype=np.float32))
    assert o.shape == (4, 10) and np.isfinite(o).all() and len(i) == 4
    env.close()
