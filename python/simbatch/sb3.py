"""Stable-Baselines3 adapter: a simbatch :class:`~simbatch.VectorEnv` as an SB3 ``VecEnv``.

Stable-Baselines3 is an optional dependency (``pip install stable-baselines3``); importing this
module without it raises ``ImportError``. ``import simbatch`` never needs it::

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from simbatch.sb3 import SB3VecEnv

    env = VecMonitor(SB3VecEnv("BallOnPlate-v0", num_envs=64))
    model = PPO("MlpPolicy", env, seed=0).learn(total_timesteps=50_000)

SB3's conventions are Gymnasium's same-step autoreset: ``step_wait`` returns
``(obs, rewards, dones, infos)`` with ``dones = terminated | truncated``; where an environment
ended, ``obs`` already holds its next episode's first observation, ``infos[i]
["terminal_observation"]`` the last one and ``infos[i]["TimeLimit.truncated"]`` whether it was
cut by the horizon rather than terminated (SB3's algorithms bootstrap the value there). All
environments step in one call into the Rust core; the only per-environment Python work is an
empty ``info`` dict each, which SB3's API requires.

Seeding follows SB3: ``seed(s)`` gives environment ``i`` the seed ``s + i`` at the next
``reset()``, the seeds ``simbatch.VectorEnv.reset(seed=s)`` gives, so an SB3 run draws exactly
what the same seeds draw through Gymnasium or through SB3's ``DummyVecEnv`` of
:class:`simbatch.Env` (``python/tests/test_sb3.py`` checks this bit for bit).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices

from . import VectorEnv

__all__ = ["SB3VecEnv"]


class SB3VecEnv(VecEnv):
    """``num_envs`` simbatch environments as one Stable-Baselines3 ``VecEnv``.

    Args:
        env: an environment id (``"BallOnPlate-v0"``, ``"BrickPush-v0"``, ``"BallToss-v0"``),
            or a :class:`simbatch.VectorEnv` built with ``autoreset_mode="same_step"`` (SB3's
            convention; another mode is refused with ``ValueError``).
        num_envs: number of environments when ``env`` is an id (≥ 1).
        **kwargs: passed to :class:`simbatch.VectorEnv` when ``env`` is an id (``backend``,
            ``precision``, ``settings``, ``render_mode``, ``render_size``, ``render_envs``).
    """

    def __init__(self, env: str | VectorEnv = "BallOnPlate-v0", num_envs: int = 1, **kwargs: Any):
        if isinstance(env, VectorEnv):
            if kwargs:
                raise TypeError(f"SB3VecEnv: {sorted(kwargs)} given with a ready VectorEnv; pass them to VectorEnv")
            if env.metadata["autoreset_mode"] != AutoresetMode.SAME_STEP:
                raise ValueError(
                    f"env.autoreset_mode: got {env.metadata['autoreset_mode']}; accepted: "
                    "AutoresetMode.SAME_STEP (Stable-Baselines3 resets an ended environment in the step)"
                )
            venv = env
        else:
            if "autoreset_mode" in kwargs:
                raise TypeError("SB3VecEnv: autoreset_mode is always same_step (SB3's convention)")
            venv = VectorEnv(env, num_envs, autoreset_mode=AutoresetMode.SAME_STEP, **kwargs)
        self.venv = venv
        self._actions: np.ndarray | None = None
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)

    # ------------------------------------------------------------------ SB3 VecEnv API

    def reset(self) -> np.ndarray:
        """Starts new episodes in every environment; uses and then forgets the seeds given by
        :meth:`seed` (none given: each environment's next episode of its seed)."""
        if any(self._options):
            raise ValueError(
                f"options: got {self._options[0] or next(o for o in self._options if o)}; "
                "accepted: none (simbatch environments take their settings at construction)"
            )
        seeds = None if any(s is None for s in self._seeds) else [int(s) for s in self._seeds]  # type: ignore[arg-type]
        obs, _ = self.venv.reset(seed=seeds)
        self.reset_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Takes the actions of the next :meth:`step_wait` (``(num_envs, action_dim)``)."""
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Steps every environment at once; returns ``(obs, rewards, dones, infos)`` (fresh
        arrays each call: SB3 keeps the previous observation while it stores a transition)."""
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async(actions)")
        actions, self._actions = self._actions, None
        obs, reward, terminated, truncated, info = self.venv.step(actions)
        dones = terminated | truncated
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            final_obs = info.get("final_obs")
            nonfinite = info.get("nonfinite")
            for i in np.flatnonzero(dones):
                infos[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                if final_obs is not None and final_obs[i] is not None:
                    infos[i]["terminal_observation"] = final_obs[i]
                if nonfinite is not None and nonfinite[i]:
                    infos[i]["nonfinite"] = True
        return obs, reward, dones, infos

    def close(self) -> None:
        """Releases the Rust core (its batch and any GPU buffers)."""
        self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The attribute of the vector environment (all environments share it), once per
        index."""
        value = getattr(self.venv, attr_name)
        return [value for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Sets an attribute of the vector environment: only for all environments at once."""
        if len(self._indices(indices)) != self.num_envs:
            raise ValueError(
                f"set_attr({attr_name!r}): indices {indices!r}; accepted: None or every environment "
                "(the environments of one simbatch batch share their attributes)"
            )
        setattr(self.venv, attr_name, value)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Calls a method of the vector environment once per index (e.g. ``render_env``)."""
        method = getattr(self.venv, method_name)
        return [method(*method_args, **method_kwargs) for _ in self._indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        """Never wrapped by a Gymnasium wrapper (wrap the ``VecEnv`` with ``VecMonitor`` for
        episode statistics)."""
        return [False for _ in self._indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """With ``render_mode="rgb_array"``: a picture of each of the first ``render_envs``
        environments, ``None`` for the rest."""
        frames = self.venv.render()
        if frames is None:
            return [None] * self.num_envs
        return list(frames) + [None] * (self.num_envs - len(frames))

    # ------------------------------------------------------------------ helpers

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        chosen: Iterable[Any] = [indices] if isinstance(indices, (int, np.integer)) else indices
        out = [int(i) for i in chosen]
        for i in out:
            if not 0 <= i < self.num_envs:
                raise IndexError(f"indices: {i}; accepted: 0 … {self.num_envs - 1}")
        return out
