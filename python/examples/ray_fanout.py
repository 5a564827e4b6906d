"""Fan simbatch environments out across processes with Ray: each worker owns one VectorEnv.

Worker ``w`` holds environments ``w·E … (w+1)·E − 1`` of one global population and seeds them
``seed + w·E + i``, exactly the seeds a single ``VectorEnv`` of ``W·E`` environments would give
them, so a fanned-out study draws the same episodes as a one-process run (tested in
``tests/test_ray.py``).

    python examples/ray_fanout.py --workers 2 --envs-per-worker 4096 --steps 200
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import ray

import simbatch


@ray.remote
class Worker:
    """One process, one VectorEnv (the GIL is released while it steps)."""

    def __init__(self, env_id: str, num_envs: int, first_seed: int, backend: str = "cpu"):
        self.env = simbatch.VectorEnv(env_id, num_envs, backend=backend)
        self.obs, _ = self.env.reset(seed=first_seed)

    def rollout(self, steps: int, policy_seed: int) -> dict:
        """Random actions for ``steps`` steps (autoresets included)."""
        rng = np.random.default_rng(policy_seed)
        total = np.zeros(self.env.num_envs)
        episodes = 0
        for _ in range(steps):
            actions = rng.uniform(-1.0, 1.0, size=self.env.action_space.shape).astype(np.float32)
            self.obs, reward, terminated, truncated, _ = self.env.step(actions)
            total += reward
            episodes += int(np.sum(terminated | truncated))
        return {"returns": total, "episodes": episodes, "obs": self.obs}


def fan_out(env_id: str, workers: int, envs_per_worker: int, steps: int, seed: int = 0,
            backend: str = "cpu") -> list[dict]:
    """Runs ``workers`` actors of ``envs_per_worker`` environments each; worker ``w`` uses the
    policy seed ``seed + w``."""
    actors = [
        Worker.remote(env_id, envs_per_worker, seed + w * envs_per_worker, backend)
        for w in range(workers)
    ]
    return ray.get([a.rollout.remote(steps, seed + w) for w, a in enumerate(actors)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="BallOnPlate-v0")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs-per-worker", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--backend", default="cpu")
    args = parser.parse_args()
    ray.init(num_cpus=args.workers, include_dashboard=False)
    fan_out(args.env_id, args.workers, args.envs_per_worker, 1, backend=args.backend)  # warm up
    start = time.perf_counter()
    results = fan_out(args.env_id, args.workers, args.envs_per_worker, args.steps, backend=args.backend)
    seconds = time.perf_counter() - start
    env_steps = args.workers * args.envs_per_worker * args.steps
    episodes = sum(r["episodes"] for r in results)
    print(f"{env_steps / seconds:.3e} env-steps/s over {args.workers} workers "
          f"({episodes} episodes ended, {seconds:.2f} s)")


if __name__ == "__main__":
    main()
