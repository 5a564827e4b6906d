"""simbatch.VectorEnv against Gymnasium: its env checker, its own SyncVectorEnv's autoreset
semantics, seeding, masks, GPU vs CPU, errors, GIL release and NumPy batch access."""

from __future__ import annotations

import os
import threading
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import simbatch

ENV_IDS = list(simbatch.env_ids())
SHORT = {"max_episode_steps": 15}


def actions_for(env, step: int) -> np.ndarray:
    """Reproducible actions, a little beyond the action space (the core clips)."""
    rng = np.random.default_rng(1000 + step)
    low, high = env.single_action_space.low, env.single_action_space.high
    return (1.1 * rng.uniform(low, high, size=(env.num_envs, low.shape[0]))).astype(np.float32)


def gpu_env(env_id: str, num_envs: int, **kwargs):
    """A GPU-backed env; with CI=true a missing adapter fails the test, elsewhere it skips."""
    try:
        return simbatch.VectorEnv(env_id, num_envs, backend="gpu", **kwargs)
    except simbatch.SimbatchError as e:
        if os.environ.get("CI") == "true":
            raise AssertionError(f"CI=true but no GPU adapter: {e}") from e
        pytest.skip(f"no GPU adapter: {e}")


# Observations are positions, velocities and the like, unbounded by nature: their Box says so
# with infinite bounds, which Gymnasium's checker warns about (as it does for its own MuJoCo
# environments). Those two warnings are expected; any other fails the test.
UNBOUNDED_OBSERVATIONS = (
    "A Box observation space minimum value is -infinity",
    "A Box observation space maximum value is infinity",
)


def checked(env, **kwargs) -> None:
    """Gymnasium's env checker, failing on any warning but the unbounded observations'."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, **kwargs)
    unexpected = [str(w.message) for w in caught if not any(m in str(w.message) for m in UNBOUNDED_OBSERVATIONS)]
    assert not unexpected, unexpected


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_env_checker_passes(env_id):
    checked(simbatch.Env(env_id), skip_render_check=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_vector_spaces_and_returned_data(env_id):
    env = simbatch.VectorEnv(env_id, 7)
    gym.utils.env_checker.check_observation_space(env.single_observation_space)
    gym.utils.env_checker.check_action_space(env.single_action_space)
    assert env.observation_space.shape == (7, env.single_observation_space.shape[0])
    assert env.action_space.shape == (7, env.single_action_space.shape[0])
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, info = env.reset(seed=3)
    assert obs.dtype == np.float32 and obs in env.observation_space and info == {}
    again, _ = env.reset(seed=3)
    np.testing.assert_array_equal(obs, again)
    previous = obs
    for k in range(5):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs.shape == (7, env.single_observation_space.shape[0])
        assert reward.shape == (7,) and terminated.dtype == np.bool_ and truncated.dtype == np.bool_
        # Fresh arrays every step: nothing returned earlier is overwritten.
        assert obs is not previous and not np.shares_memory(obs, previous)
        previous = obs
    env.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_autoreset_matches_gymnasiums_sync_vector_env(env_id, mode):
    """Gymnasium's SyncVectorEnv over single simbatch.Env's is the reference for autoreset:
    same seeds (s + i), same actions → the same observations, rewards, flags and final obs."""
    n = 5
    ours = simbatch.VectorEnv(env_id, n, autoreset_mode=mode, settings=SHORT)
    ref = SyncVectorEnv([lambda: simbatch.Env(env_id, settings=SHORT) for _ in range(n)], autoreset_mode=mode)
    o1, _ = ours.reset(seed=21)
    o2, _ = ref.reset(seed=21)
    np.testing.assert_array_equal(o1, o2)
    ended = 0
    for k in range(40):
        a = actions_for(ours, k)
        r1 = ours.step(a)
        r2 = ref.step(a)
        for x, y in zip(r1[:4], r2[:4]):
            np.testing.assert_array_equal(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
        if mode == AutoresetMode.SAME_STEP and "final_obs" in r2[4]:
            np.testing.assert_array_equal(r1[4]["_final_obs"], r2[4]["_final_obs"])
            for i in np.flatnonzero(r2[4]["_final_obs"]):
                np.testing.assert_array_equal(r1[4]["final_obs"][i], r2[4]["final_obs"][i])
        else:
            assert "final_obs" not in r1[4]
        ended += int(np.sum(r1[2] | r1[3]))
    assert ended >= n, f"only {ended} episodes ended"


def test_disabled_autoreset_needs_an_explicit_masked_reset():
    env = simbatch.VectorEnv("BallOnPlate-v0", 3, autoreset_mode="disabled", settings={"max_episode_steps": 2})
    env.reset(seed=0)
    zero = np.zeros((3, 2), np.float32)
    env.step(zero)
    _, _, _, truncated, _ = env.step(zero)
    assert truncated.all()
    with pytest.raises(simbatch.EnvNeedsResetError, match="environment 0 has ended"):
        env.step(zero)
    env.reset(options={"reset_mask": np.array([True, True, True])})
    env.step(zero)


def test_masked_reset_touches_only_masked_envs():
    env = simbatch.VectorEnv("BrickPush-v0", 6)
    env.reset(seed=5)
    for k in range(3):
        env.step(actions_for(env, k))
    q_before = env.get_body("brick", "q")
    obs_before = np.empty((6, 11), np.float32)
    env._core.observe(obs_before)
    mask = np.array([False, True, False, False, True, False])
    obs, _ = env.reset(options={"reset_mask": mask})
    q_after = env.get_body("brick", "q")
    np.testing.assert_array_equal(q_after[~mask], q_before[~mask])
    np.testing.assert_array_equal(obs[~mask], obs_before[~mask])
    assert not np.any(np.all(q_after[mask] == q_before[mask], axis=1))
    seeds, episodes, elapsed = env.counters()
    np.testing.assert_array_equal(episodes, mask.astype(np.uint64))
    np.testing.assert_array_equal(elapsed, np.where(mask, 0, 3))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_seeding_does_not_depend_on_num_envs(env_id):
    small = simbatch.VectorEnv(env_id, 3)
    large = simbatch.VectorEnv(env_id, 40)
    a, _ = small.reset(seed=99)
    b, _ = large.reset(seed=99)
    np.testing.assert_array_equal(a, b[:3])
    for k in range(20):
        act = actions_for(large, k)
        r_small = small.step(act[:3])
        r_large = large.step(act)
        for x, y in zip(r_small[:4], r_large[:4]):
            np.testing.assert_array_equal(x, y[:3])
    # A list of seeds gives each env its own.
    c, _ = small.reset(seed=[99, 100, 101])
    d, _ = large.reset(seed=99)
    np.testing.assert_array_equal(c, d[:3])


@pytest.mark.parametrize("env_id", ["BallOnPlate-v0"])
def test_random_policy_on_gpu_matches_cpu(env_id):
    n = 64
    gpu = gpu_env(env_id, n)
    assert gpu.backend == "gpu"
    cpu = simbatch.VectorEnv(env_id, n)
    a, _ = cpu.reset(seed=7)
    b, _ = gpu.reset(seed=7)
    np.testing.assert_array_equal(a, b)  # draws are made on the host
    alive = np.ones(n, bool)
    worst = 0.0
    for k in range(30):
        act = (0.3 * actions_for(cpu, k)).astype(np.float32)
        oc, rc, tc, uc, _ = cpu.step(act)
        og, rg, tg, ug, _ = gpu.step(act)
        worst = max(worst, float(np.abs(oc - og)[alive].max(initial=0.0)))
        np.testing.assert_allclose(rg[alive], rc[alive], atol=1e-3)
        alive &= ~(tc | uc | tg | ug)
    assert worst < 1e-4, worst
    assert alive.sum() >= n // 2


def test_ball_toss_steps_on_the_gpu_event_kernel():
    """BallToss's bouncing ball steps on the GPU's event kernel on a GPU backend (f64: the CPU's
    transitions to the observations' f32 rounding); on the CPU backend it does not."""
    n = 8
    gpu = gpu_env("BallToss-v0", n, precision="f64")
    cpu = simbatch.VectorEnv("BallToss-v0", n)
    a, _ = cpu.reset(seed=5)
    b, _ = gpu.reset(seed=5)
    np.testing.assert_array_equal(a, b)
    for k in range(2):
        act = actions_for(cpu, k)
        oc, rc, *_ = cpu.step(act)
        og, rg, *_ = gpu.step(act)
        np.testing.assert_allclose(og, oc, atol=1e-5)
        np.testing.assert_allclose(rg, rc, atol=1e-5)
    assert gpu.unilateral_on_gpu
    assert not cpu.unilateral_on_gpu


def test_errors_carry_the_rust_message():
    with pytest.raises(ValueError, match="CartPole-v1.*accepted: BallOnPlate-v0"):
        simbatch.VectorEnv("CartPole-v1", 2)
    with pytest.raises(ValueError, match="start_x"):
        simbatch.VectorEnv("BallOnPlate-v0", 2, settings={"start_x": {"uniform": [-1.0, 1.0]}})
    with pytest.raises(ValueError, match="setting ball_mass"):
        simbatch.VectorEnv("BallOnPlate-v0", 2, settings={"ball_mass": {"gamma": [1, 2]}})
    # The distribution syntax has one parser, shared with the `simbatch` command: its messages.
    with pytest.raises(ValueError, match=r"setting start_y: uniform = \[0\.05, -0\.05\]; accepted: lo ≤ hi"):
        simbatch.VectorEnv("BallOnPlate-v0", 2, settings={"start_y": {"uniform": [0.05, -0.05]}})
    with pytest.raises(ValueError, match="setting ball_mass: log_uniform .*accepted: 0 < lo ≤ hi"):
        simbatch.VectorEnv("BallOnPlate-v0", 2, settings={"ball_mass": {"log_uniform": [0.0, 1.0]}})
    with pytest.raises(ValueError, match="num_envs"):
        simbatch.VectorEnv("BallOnPlate-v0", 0)
    env = simbatch.VectorEnv("BallOnPlate-v0", 2)
    env.reset(seed=0)
    bad = np.zeros((2, 2), np.float32)
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match=r"actions\[0\] \(tilt_rate_x\) for instance 1"):
        env.step(bad)
    with pytest.raises(ValueError, match="action buffer"):
        env.step(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="mass"):
        env.set_body("ball", "mass", np.array([[1.0], [-1.0]]))
    with pytest.raises(ValueError, match="no body"):
        env.get_body("wheel", "q")
    with pytest.raises(ValueError, match="autoreset_mode"):
        simbatch.VectorEnv("BallOnPlate-v0", 2, autoreset_mode="sometimes")


def test_shapes_and_seeds_are_checked_naming_the_field():
    """Arrays with the wrong number of values and seeds outside [0, 2**64) get a ValueError or
    TypeError naming the argument and what is accepted, not NumPy's reshape or overflow words;
    a flat array with one row per environment is accepted."""
    env = simbatch.VectorEnv("BallOnPlate-v0", 4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions: got shape \(3, 2\) \(6 values\); accepted: \(4, width\)"):
        env.step(np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"actions: got shape \(0,\)"):
        env.step(np.zeros(0, np.float32))
    flat = env.step(np.zeros(8, np.float32))[0]
    assert flat.shape == (4, env.single_observation_space.shape[0])
    with pytest.raises(ValueError, match=r"gravity: got shape \(4, 2\) \(8 values\); accepted: \(4, 3\)"):
        env.set_gravity(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"values: got shape \(3,\)"):
        env.set_body("ball", "mass", np.ones(3))
    with pytest.raises(ValueError, match=r"seed: got -1; accepted: an integer in \[0, 2\*\*64\)"):
        env.reset(seed=-1)
    with pytest.raises(ValueError, match=r"seed: got 18446744073709551616; accepted"):
        env.reset(seed=2**64)
    with pytest.raises(TypeError, match=r"seed: got 1.5 \(float\)"):
        env.reset(seed=1.5)
    with pytest.raises(ValueError, match=r"seed\[1\]: got -2; accepted"):
        env.reset(seed=[1, -2, 3, 4])
    with pytest.raises(TypeError, match=r"seed\[0\]: got 1.0 \(float\)"):
        env.reset(seed=[1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match=r"seed: got shape \(2,\), expected \(4,\)"):
        env.reset(seed=[1, 2])
    # The largest seed is accepted; environment i gets seed + i, wrapping as the streams do.
    top, _ = env.reset(seed=2**64 - 1)
    listed, _ = env.reset(seed=np.array([2**64 - 1, 0, 1, 2], dtype=np.uint64))
    np.testing.assert_array_equal(top, listed)


def test_counts_must_be_integers_that_fit():
    with pytest.raises(TypeError, match="num_envs"):
        simbatch.VectorEnv("BallOnPlate-v0", 1.5)
    with pytest.raises(TypeError, match="num_envs"):
        simbatch.VectorEnv("BallOnPlate-v0", True)
    with pytest.raises(ValueError, match="num_envs"):
        simbatch.VectorEnv("BallOnPlate-v0", -3)
    # Far beyond memory: refused up front with a MemoryError naming the field, the interpreter
    # survives and the next env works.
    with pytest.raises(MemoryError, match="num_envs"):
        simbatch.VectorEnv("BallOnPlate-v0", 10**9 * 1000)
    with pytest.raises(MemoryError, match="num_envs"):
        simbatch.VectorEnv("BallOnPlate-v0", 10**9)
    env = simbatch.VectorEnv("BallOnPlate-v0", np.int64(3))
    assert env.num_envs == 3


def test_two_threads_on_one_env_get_a_clear_error():
    env = simbatch.VectorEnv("BallOnPlate-v0", 20000)
    env.reset(seed=0)
    act = np.zeros((20000, 2), np.float32)
    errors: list[BaseException] = []
    done = threading.Event()

    def stepper():
        try:
            for _ in range(20):
                env.step(act)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=stepper)
    t.start()
    clashes = 0
    while not done.is_set():
        try:
            env.step(act)
        except RuntimeError as e:
            assert "in use by another thread" in str(e), e
            clashes += 1
    t.join()
    for e in errors:
        assert isinstance(e, RuntimeError) and "in use by another thread" in str(e), repr(e)
    # The two threads did overlap (the GIL is released while stepping), and every clash was
    # the clear error, never "Already borrowed" or a crash; the env still works afterwards.
    assert clashes + len(errors) > 0
    obs, *_ = env.step(act)
    assert np.isfinite(obs).all()


def test_the_gil_is_released_while_stepping():
    env = simbatch.VectorEnv("BallOnPlate-v0", 20000)
    env.reset(seed=0)
    act = np.zeros((20000, 2), np.float32)
    env.step(act)  # warm up
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    obs = np.empty((20000, 10), np.float32)
    reward = np.empty(20000, np.float32)
    te, tr = np.empty(20000, np.bool_), np.empty(20000, np.bool_)
    flags = np.zeros(20000, np.uint32)
    start = time.perf_counter()
    before = counter[0]
    env._core.step(act, obs, reward, te, tr, flags, None)
    during = counter[0] - before
    elapsed = time.perf_counter() - start
    stop.set()
    t.join()
    # Python ran in the other thread for most of the step (it could not if the GIL were held).
    assert elapsed > 0.005 and during > 1000, (elapsed, during)


def test_batch_access_for_monte_carlo_use():
    env = simbatch.VectorEnv("BallOnPlate-v0", 4, settings={"max_episode_steps": 1000})
    env.reset(seed=1)
    assert env.body_names == ["ground", "plate", "ball"]
    assert env.constraints == [("sphere_on_plane", ["plane_frame", "sphere_center", "radius"])]
    radius = env.get_param(0, "radius")
    assert radius.shape == (4, 1) and np.all((radius >= 0.015) & (radius <= 0.03))
    # Hold the plate at a fixed tilt θ about x with the ball at rest at the centre: the ball
    # rolls toward −y at 5/7 g sin θ (closed form), observed through NumPy.
    # The plate is driven by a motion law: its parameters are set, not its pose.
    theta = 0.08
    pose = np.tile([np.cos(theta / 2), np.sin(theta / 2), 0, 0, 0, 0, 0], (4, 1))
    with pytest.raises(ValueError, match="motion law"):
        env.set_body("plate", "pose", pose)
    assert env.get_motion("plate", "angles").shape == (4, 9)
    env.set_motion("plate", "base_rotation", pose[:, :4])
    env.set_motion("plate", "angles", np.zeros((4, 9)))
    np.testing.assert_allclose(env.get_body("plate", "pose"), pose, atol=1e-15)
    np.testing.assert_array_equal(env.get_body("plate", "velocity"), np.zeros((4, 6)))
    with pytest.raises(ValueError, match="base_rotation"):
        env.set_motion("plate", "base_rotation", np.zeros((4, 4)))
    centre = radius[:, 0, None] * np.array([[0.0, -np.sin(theta), np.cos(theta)]])
    env.set_body("ball", "q", np.hstack([np.tile([1.0, 0, 0, 0], (4, 1)), centre]))
    env.set_body("ball", "u", np.zeros((4, 6)))
    steps = 10
    for _ in range(steps):
        obs, *_ = env.step(np.zeros((4, 2), np.float32))
    t = steps * env.metadata["control_dt"]
    expected = -0.5 * 5.0 / 7.0 * 9.81 * np.sin(theta) * t * t
    np.testing.assert_allclose(obs[:, 1], expected, rtol=1e-6)
    np.testing.assert_allclose(env._core.get_time(), t, rtol=1e-12)
    # A plate at rest does no work; gravity's is in the energy, no loads are applied.
    np.testing.assert_allclose(env.get_work(), 0.0, atol=1e-12)
    g = env.get_gravity()
    np.testing.assert_array_equal(g, np.tile([0.0, 0.0, -9.81], (4, 1)))


def test_registered_with_gymnasium():
    vec = gym.make_vec("simbatch/BrickPush-v0", num_envs=6, vectorization_mode="vector_entry_point", backend="cpu")
    assert isinstance(vec, simbatch.VectorEnv) and vec.num_envs == 6
    obs, _ = vec.reset(seed=4)
    direct = simbatch.VectorEnv("BrickPush-v0", 6)
    np.testing.assert_array_equal(obs, direct.reset(seed=4)[0])
    single = gym.make("simbatch/BallOnPlate-v0")
    checked(single.unwrapped, skip_render_check=True)
    obs, _ = single.reset(seed=4)
    np.testing.assert_array_equal(obs, simbatch.VectorEnv("BallOnPlate-v0", 1).reset(seed=4)[0][0])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_rgb_array_rendering(env_id):
    # Gymnasium's convention: an (H, W, 3) uint8 picture; the env checker checks it too.
    env = gym.make(f"simbatch/{env_id}", render_mode="rgb_array")
    env.reset(seed=1)
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.shape == (480, 640, 3)
    background = np.array([246, 246, 244], dtype=np.uint8)
    assert (frame != background).any(axis=2).sum() > 10_000, "the scene is drawn"
    checked(env.unwrapped, skip_render_check=False)
    vec = simbatch.VectorEnv(env_id, 3, render_mode="rgb_array", render_size=(96, 64), render_envs=2)
    vec.reset(seed=0)
    frames = vec.render()
    assert len(frames) == 2 and all(f.shape == (64, 96, 3) for f in frames)
    assert simbatch.VectorEnv(env_id, 1).render() is None
    with pytest.raises(ValueError):
        simbatch.VectorEnv(env_id, 1, render_mode="human")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spec_max_episode_steps_is_the_horizon(env_id):
    horizon = simbatch.VectorEnv(env_id, 1)._core.max_episode_steps
    assert horizon >= 1
    env = gym.make(f"simbatch/{env_id}")
    assert env.spec.max_episode_steps == horizon and env.spec.id == f"simbatch/{env_id}"
    short = gym.make(f"simbatch/{env_id}", settings={"max_episode_steps": 7})
    assert short.spec.max_episode_steps == 7
    vec = gym.make_vec(f"simbatch/{env_id}", num_envs=2, vectorization_mode="vector_entry_point")
    assert vec.spec.max_episode_steps == horizon
    assert simbatch.VectorEnv(env_id, 2).spec.max_episode_steps == horizon
    # The environment truncates there itself (no TimeLimit wrapper is stacked on it).
    obs, _ = short.reset(seed=0)
    for step in range(7):
        obs, reward, terminated, truncated, _ = short.step(short.action_space.sample())
        if terminated:
            break
    assert terminated or truncated


def test_step_writes_into_preallocated_out_arrays():
    env = simbatch.VectorEnv("BallOnPlate-v0", 8)
    ref = simbatch.VectorEnv("BallOnPlate-v0", 8)
    env.reset(seed=4)
    ref.reset(seed=4)
    out = (
        np.empty((8, env.single_observation_space.shape[0]), np.float32),
        np.empty(8, np.float32),
        np.empty(8, np.bool_),
        np.empty(8, np.bool_),
    )
    actions = np.full((8, env.single_action_space.shape[0]), 0.3, np.float32)
    for _ in range(5):
        got = env.step(actions, out=out)
        want = ref.step(actions)
        assert all(g is o for g, o in zip(got[:4], out))  # the caller's arrays, returned
        for g, w in zip(got[:4], want[:4]):
            np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError):
        env.step(actions, out=(out[0][:4], out[1], out[2], out[3]))
