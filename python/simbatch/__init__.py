"""simbatch: thousands of small constrained rigid-body systems per call, as Gymnasium vector envs.

``simbatch.VectorEnv`` is a :class:`gymnasium.vector.VectorEnv` whose environments are instances
of one simbatch batch, stepped together on the CPU (f64, all cores) or the GPU (wgpu, f32/f64),
with the GIL released while the physics runs::

    import numpy as np, simbatch
    env = simbatch.VectorEnv("BallOnPlate-v0", num_envs=4096, backend="cpu")
    obs, info = env.reset(seed=0)
    for _ in range(100):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

The environments are also registered with Gymnasium as ``simbatch/BallOnPlate-v0``,
``simbatch/BrickPush-v0`` and ``simbatch/BallToss-v0`` (a ball tossed at a target, bouncing and
rolling on unilateral contact): ``gymnasium.make_vec(id, num_envs, vectorization_mode=
"vector_entry_point", ...)`` gives this ``VectorEnv``, ``gymnasium.make(id)`` one :class:`Env`.

Each ``step`` returns freshly allocated arrays that the Rust core writes into directly (no
further copy); ``step_into`` reuses arrays the caller owns. ``settings`` changes a task's
defaults, with the ``simbatch`` command's distribution syntax for per-episode draws
(``{"uniform": [lo, hi]}``, ``{"normal": [mean, std]}``, ``{"truncated_normal": [mean, std, lo,
hi]}``, ``{"lognormal": [mu, sigma]}``, ``{"log_uniform": [lo, hi]}``,
``{"choice": [...]}``). Parameters and states of every environment are NumPy arrays through
``get_body`` / ``set_body`` / ``get_param`` / ``set_param`` / ``get_motion`` / ``set_motion`` /
``get_work`` (Monte Carlo use).
"""

from __future__ import annotations

import dataclasses
import os
import threading

from typing import Any, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from . import _simbatch
from ._simbatch import EnvNeedsResetError, SimbatchError, env_ids

__all__ = [
    "VectorEnv",
    "Env",
    "SimbatchError",
    "EnvNeedsResetError",
    "env_ids",
    "FLAG_RESET",
    "FLAG_FINAL_OBS",
    "FLAG_NONFINITE",
]

FLAG_RESET = _simbatch.FLAG_RESET
FLAG_FINAL_OBS = _simbatch.FLAG_FINAL_OBS
FLAG_NONFINITE = _simbatch.FLAG_NONFINITE

_MODES = {
    AutoresetMode.NEXT_STEP: "next_step",
    AutoresetMode.SAME_STEP: "same_step",
    AutoresetMode.DISABLED: "disabled",
}


def _mode_name(mode: AutoresetMode | str) -> str:
    """simbatch's name of an autoreset mode given as Gymnasium's enum, its value or our name."""
    if isinstance(mode, str) and mode in _MODES.values():
        return mode
    try:
        return _MODES[AutoresetMode(mode)]
    except ValueError:
        raise ValueError(
            f"autoreset_mode {mode!r}; accepted: an AutoresetMode, NextStep, SameStep, Disabled, "
            "next_step, same_step, disabled"
        ) from None


def _box(bounds: tuple[list[float], list[float]]) -> gym.spaces.Box:
    low, high = (np.asarray(b, dtype=np.float32) for b in bounds)
    return gym.spaces.Box(low=low, high=high, dtype=np.float32)


from ._checks import _count, _index, _seed  # noqa: E402
from .study import Study, StudyResult, Table, rollout  # noqa: E402

__version__: str = _simbatch.__version__


def _per_env(field: str, values: Any, num_envs: int, dtype: Any, width: int | None = None) -> np.ndarray:
    """``values`` as a C-contiguous ``(num_envs, width)`` array of ``dtype`` (any shape with
    that many values, e.g. flat), or a ``ValueError`` naming ``field``, the shape given and the
    shape accepted (one row per environment); ``width=None`` takes any whole row width."""
    array = np.ascontiguousarray(values, dtype=dtype)
    whole = array.size > 0 and array.size % num_envs == 0
    if not whole or (width is not None and array.size != num_envs * width):
        rows = f"({num_envs}, {width})" if width is not None else f"({num_envs}, width)"
        raise ValueError(
            f"{field}: got shape {array.shape} ({array.size} values); accepted: {rows}, one row per environment"
        )
    return array.reshape(num_envs, -1)


def _with_horizon(spec: EnvSpec | None, horizon: int) -> EnvSpec | None:
    """``spec`` with ``max_episode_steps`` set to the environment's own horizon (Gymnasium
    tools read it there; no ``TimeLimit`` is added, the environments truncate themselves)."""
    if spec is None:
        return None
    return dataclasses.replace(spec, max_episode_steps=int(horizon))


class VectorEnv(gym.vector.VectorEnv):
    """``num_envs`` environments of one simbatch task, stepped in one call.

    Args:
        env_id: one of :func:`env_ids` (``"BallOnPlate-v0"``, ``"BrickPush-v0"``,
            ``"BallToss-v0"``).
        num_envs: number of environments (≥ 1).
        autoreset_mode: Gymnasium's ``AutoresetMode`` (or its name); default next-step.
        backend: ``"cpu"`` (f64), ``"gpu"`` or ``"auto"`` (GPU if a hardware adapter opens).
        precision: ``"f32"`` or ``"f64"`` on the GPU.
        settings: task settings to change (see the README's environment table).
        render_mode: ``None`` or ``"rgb_array"``: :meth:`render` then returns a tuple of
            ``(height, width, 3)`` uint8 pictures, one per environment (the first
            ``render_envs``), drawn on the CPU from a fixed camera on the task's workspace.
        render_size: ``(width, height)`` of a picture in pixels (default 640 × 480).
        render_envs: how many environments :meth:`render` draws (default: all, at most 16).

    Seeding follows Gymnasium: ``reset(seed=s)`` gives environment ``i`` the seed ``s + i``
    (a list gives each its own); later resets and autoresets draw the next episode of that
    seed, so what an environment draws never depends on ``num_envs`` or the backend.
    ``reset(options={"reset_mask": mask})`` resets only the environments in ``mask``.
    In same-step mode, ``info["final_obs"]`` (object array, ``None`` where the environment did
    not end) and ``info["_final_obs"]`` hold final observations, as Gymnasium's vector envs do.
    ``info["nonfinite"]`` flags environments truncated because their state went non-finite.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        env_id: str = "BallOnPlate-v0",
        num_envs: int = 1,
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        backend: str = "cpu",
        precision: str = "f32",
        settings: dict[str, Any] | None = None,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (640, 480),
        render_envs: int | None = None,
    ):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode = {render_mode!r}; accepted: None, 'rgb_array'")
        mode = _mode_name(autoreset_mode)
        self._core = _simbatch.Core(env_id, _count("num_envs", num_envs), mode, backend, precision, settings)
        self.num_envs = self._core.num_envs
        self.single_observation_space = _box(self._core.observation_bounds)
        self.single_action_space = _box(self._core.action_bounds)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {
            "render_modes": ["rgb_array"],
            "render_fps": 1.0 / self._core.control_dt,
            "autoreset_mode": {v: k for k, v in _MODES.items()}[mode],
            "env_id": env_id,
            "control_dt": self._core.control_dt,
            "observation_names": list(self._core.observation_names),
            "action_names": list(self._core.action_names),
        }
        self._spec: EnvSpec | None = None
        self.spec = EnvSpec(
            id=f"simbatch/{env_id}",
            vector_entry_point="simbatch:VectorEnv",
            kwargs={"env_id": env_id},
        )
        self.render_mode = render_mode
        self._render_size = (_count("render_size[0]", render_size[0]), _count("render_size[1]", render_size[1]))
        self._render_envs = min(self.num_envs, 16) if render_envs is None else min(self.num_envs, _count("render_envs", render_envs))
        self.closed = False
        self._od = self.single_observation_space.shape[0]
        self._mode = mode
        self._flags = np.zeros(self.num_envs, dtype=np.uint32)
        self._flags_lock = threading.Lock()

    # ------------------------------------------------------------------ Gymnasium API

    def reset(
        self,
        *,
        seed: int | Sequence[int] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start new episodes; returns ``(obs, info)`` for every environment. ``seed``: an
        integer in [0, 2**64) (environment i gets ``seed + i``, wrapping at 2**64) or one such
        integer per environment; ``options={"reset_mask": mask}`` resets only the environments
        the boolean mask selects."""
        super().reset(seed=None)  # Gymnasium bookkeeping only; seeding is simbatch's own.
        seeds = None
        if seed is not None:
            if np.ndim(seed) == 0:
                # Environment i gets seed + i, wrapping at 2**64 as the counter-based streams do.
                seeds = np.uint64(_seed("seed", seed)) + np.arange(self.num_envs, dtype=np.uint64)
            else:
                given = np.asarray(seed)
                if given.shape != (self.num_envs,):
                    raise ValueError(f"seed: got shape {given.shape}, expected ({self.num_envs},): one seed per environment")
                if given.dtype.kind == "u" or (given.dtype.kind == "i" and (given >= 0).all()):
                    seeds = given.astype(np.uint64)
                else:  # Negative, too large, or not integers: the first bad one, named.
                    seeds = np.array([_seed(f"seed[{i}]", s) for i, s in enumerate(given.tolist())], dtype=np.uint64)
        mask = None
        if options and options.get("reset_mask") is not None:
            mask = np.ascontiguousarray(options["reset_mask"], dtype=np.bool_)
        obs = np.empty((self.num_envs, self._od), dtype=np.float32)
        self._core.reset(obs, seeds, mask)
        return obs, {}

    def step(
        self,
        actions: np.ndarray,
        out: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every environment; returns ``(obs, reward, terminated, truncated, info)``.
        ``out=(obs, reward, terminated, truncated)``: preallocated arrays the step writes into
        and returns (as :meth:`step_into`; same-step mode allocates its final observations);
        without it, fresh arrays each call."""
        n = self.num_envs
        if out is None:
            obs = np.empty((n, self._od), dtype=np.float32)
            reward = np.empty(n, dtype=np.float32)
            terminated = np.empty(n, dtype=np.bool_)
            truncated = np.empty(n, dtype=np.bool_)
        else:
            obs, reward, terminated, truncated = out
        final_obs = np.empty((n, self._od), dtype=np.float32) if self._mode == "same_step" else None
        info = self.step_into(actions, obs, reward, terminated, truncated, final_obs)
        return obs, reward, terminated, truncated, info

    def step_into(
        self,
        actions: np.ndarray,
        obs: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        final_obs: np.ndarray | None = None,
    ) -> dict[str, Any]:
        """As :meth:`step`, writing into arrays the caller owns (C-contiguous, float32 obs
        ``(num_envs, obs_dim)`` and reward, bool terminated/truncated; ``final_obs`` like obs,
        needed in same-step mode). Returns the info dict."""
        actions = _per_env("actions", actions, self.num_envs, np.float32)
        # The kept flags array (every entry is written by the step), unless another thread is
        # stepping this env right now: it then gets the core's clear "in use" error, not
        # NumPy's borrow error on a shared array.
        own = self._flags_lock.acquire(blocking=False)
        try:
            flags = self._flags if own else np.empty(self.num_envs, dtype=np.uint32)
            seen = self._core.step(actions, obs, reward, terminated, truncated, flags, final_obs)
            return self._step_info(seen, flags, final_obs)
        finally:
            if own:
                self._flags_lock.release()

    def _step_info(self, seen: int, flags: np.ndarray, final_obs: np.ndarray | None) -> dict[str, Any]:
        """The info dict of a step from its flags (`seen`: all of them OR-ed): empty, and no
        array made, unless something ended or went non-finite."""
        info: dict[str, Any] = {}
        if final_obs is not None and seen & FLAG_FINAL_OBS:
            ended = (flags & FLAG_FINAL_OBS) != 0
            if ended.any():
                objects = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(ended):
                    objects[i] = final_obs[i]
                info["final_obs"], info["_final_obs"] = objects, ended
                info["final_info"], info["_final_info"] = {}, ended.copy()
        if seen & FLAG_NONFINITE:
            nonfinite = (flags & FLAG_NONFINITE) != 0
            info["nonfinite"], info["_nonfinite"] = nonfinite, nonfinite.copy()
        return info

    @property
    def spec(self) -> EnvSpec | None:  # type: ignore[override]
        """Gymnasium's specification, with ``max_episode_steps`` the task's horizon (the
        ``max_episode_steps`` setting; the environments truncate there themselves)."""
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self._spec = _with_horizon(value, self._core.max_episode_steps)

    def render(self) -> tuple[np.ndarray, ...] | None:
        """With ``render_mode="rgb_array"``: a ``(height, width, 3)`` uint8 picture of each of
        the first ``render_envs`` environments now; ``None`` without a render mode."""
        if self.render_mode is None:
            return None
        width, height = self._render_size
        return tuple(self._core.render(i, width, height) for i in range(self._render_envs))

    def render_env(self, env: int, width: int = 640, height: int = 480) -> np.ndarray:
        """Environment ``env`` now as a ``(height, width, 3)`` uint8 picture (any render mode)."""
        return self._core.render(env, width, height)

    def close_extras(self, **kwargs: Any) -> None:
        # Drops the Rust core (its batch and any GPU buffers) now, not when collected.
        del self._core

    # ------------------------------------------------------------------ batch access

    @property
    def backend(self) -> str:
        """``"cpu"`` or ``"gpu"``: where the physics runs."""
        return self._core.backend

    @property
    def unilateral_on_gpu(self) -> bool:
        """Whether the unilateral contacts (``BallToss-v0``) step on the GPU's event kernels: a
        GPU backend and a task within their reach (up to 8 contacts beside up to 12 bilateral
        rows), from the first step on."""
        return self._core.unilateral_on_gpu

    @property
    def body_names(self) -> list[str]:
        """Bodies of the template (index 0 is Ground)."""
        return list(self._core.body_names)

    @property
    def constraints(self) -> list[tuple[str, list[str]]]:
        """``(kind, parameter names)`` per constraint."""
        return list(self._core.constraints)

    def get_body(self, body: str, field: str) -> np.ndarray:
        """A copy of a body's column, shape ``(num_envs, width)``."""
        return self._core.get_body(body, field)

    def set_body(self, body: str, field: str, values: np.ndarray) -> None:
        """Sets a body's column (validated; raises ``ValueError`` naming the field)."""
        self._core.set_body(body, field, _per_env("values", values, self.num_envs, np.float64))

    def get_param(self, constraint: int, name: str) -> np.ndarray:
        """A copy of a constraint parameter column, shape ``(num_envs, width)``."""
        return self._core.get_param(constraint, name)

    def set_param(self, constraint: int, name: str, values: np.ndarray) -> None:
        """Sets a constraint parameter column (validated)."""
        self._core.set_param(constraint, name, _per_env("values", values, self.num_envs, np.float64))

    def get_motion(self, body: str, name: str) -> np.ndarray:
        """A copy of a driven body's motion-law parameter, shape ``(num_envs, width)``."""
        return self._core.get_motion(body, name)

    def set_motion(self, body: str, name: str, values: np.ndarray) -> None:
        """Sets a driven body's motion-law parameter (validated); its pose, velocity and
        acceleration then follow the law at each environment's time."""
        self._core.set_motion(body, name, _per_env("values", values, self.num_envs, np.float64))

    def get_work(self) -> np.ndarray:
        """Work on the free bodies, ``(num_envs, 2)``: by the driven bodies (constraint forces)
        and by the applied loads."""
        return self._core.get_work()

    def get_gravity(self) -> np.ndarray:
        """Gravity per environment, ``(num_envs, 3)``."""
        return self._core.get_gravity()

    def set_gravity(self, values: np.ndarray) -> None:
        """Sets gravity per environment."""
        self._core.set_gravity(_per_env("gravity", values, self.num_envs, np.float64, 3))

    def task_values(self) -> np.ndarray:
        """Per-environment task values (targets, drawn settings)."""
        return self._core.task_values()

    def counters(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per environment: seed, episode number, steps taken in the current episode."""
        return self._core.counters()


def render(
    study: str | os.PathLike[str],
    instances: Sequence[int],
    out: str | os.PathLike[str],
    *,
    interval: float | None = None,
    time: float | None = None,
    layout: str = "panels",
    size: tuple[int, int] = (640, 480),
    speed: float = 1.0,
) -> int:
    """Replay ``instances`` (global indices) of the study in ``study`` — an output directory of
    ``simbatch run`` — and write ``out``: an animated GIF (``.gif``), a self-contained 3-D HTML
    player (``.html``) or the frame at ``time`` (``.png``), as ``simbatch render`` does. Every
    instance is simulated again exactly as the study ran it (its draws come from the seed, the
    field and its index). Returns the number of frames replayed; bad requests raise
    ``ValueError`` naming the argument."""
    return _simbatch.render_study(
        os.fspath(study),
        [_index("instances", i) for i in instances],
        os.fspath(out),
        interval,
        time,
        layout,
        (_count("size[0]", size[0]), _count("size[1]", size[1])),
        float(speed),
    )


class Env(gym.Env):
    """One simbatch environment as a plain :class:`gymnasium.Env` (a ``VectorEnv`` of one,
    autoreset disabled), for tools that take single environments, e.g. Gymnasium's
    ``check_env``."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(self, env_id: str = "BallOnPlate-v0", render_mode: str | None = None, **kwargs: Any):
        self._vec = VectorEnv(env_id, 1, autoreset_mode=AutoresetMode.DISABLED, render_mode=render_mode, **kwargs)
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self.render_mode = render_mode
        self.metadata = {"render_modes": ["rgb_array"], "render_fps": self._vec.metadata["render_fps"]}
        self._spec: EnvSpec | None = None
        self.spec = EnvSpec(id=f"simbatch/{env_id}", entry_point="simbatch:Env", kwargs={"env_id": env_id})

    @property
    def spec(self) -> EnvSpec | None:  # type: ignore[override]
        """Gymnasium's specification, with ``max_episode_steps`` the task's horizon."""
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self._spec = _with_horizon(value, self._vec._core.max_episode_steps)

    def render(self) -> np.ndarray | None:
        """With ``render_mode="rgb_array"``: a ``(height, width, 3)`` uint8 picture now."""
        frames = self._vec.render()
        return None if frames is None else frames[0]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        obs, info = self._vec.reset(seed=seed)
        return obs[0], info

    def step(self, action):
        obs, reward, terminated, truncated, info = self._vec.step(np.asarray(action, dtype=np.float32)[None, :])
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

    @property
    def vector_env(self) -> VectorEnv:
        """The underlying one-environment ``VectorEnv``."""
        return self._vec


def _register() -> None:
    """Registers ``simbatch/<env id>`` with Gymnasium (single and vector entry points)."""
    for env_id in env_ids():
        name = f"simbatch/{env_id}"
        if name not in gym.registry:
            gym.register(
                id=name,
                entry_point="simbatch:Env",
                vector_entry_point="simbatch:VectorEnv",
                kwargs={"env_id": env_id},
                disable_env_checker=True,
            )


_register()
