"""Environment-steps per second through Python (random actions, autoresets included), for
N = 1e3 … 1e5 on the CPU and, where an adapter opens, the GPU. Compare with the Rust-only
figures of `cargo run --release --example env_throughput`.

    python examples/bench.py [--n 1000,10000,100000] [--steps 50] [--backends cpu,gpu] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import simbatch


def measure(env_id: str, n: int, backend: str, steps: int) -> float:
    env = simbatch.VectorEnv(env_id, n, backend=backend)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    shape = env.action_space.shape
    for _ in range(2):  # warm up (kernel compilation on the GPU)
        env.step(rng.uniform(-1, 1, size=shape).astype(np.float32))
    start = time.perf_counter()
    for _ in range(steps):
        env.step(rng.uniform(-1, 1, size=shape).astype(np.float32))
    return n * steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="1000,10000,100000")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--backends", default="cpu,gpu")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    print("| environment | N | backend | env-steps/s |\n|---|---|---|---|")
    for env_id in simbatch.env_ids():
        for n in (int(x) for x in args.n.split(",")):
            for backend in args.backends.split(","):
                try:
                    rate = measure(env_id, n, backend, args.steps)
                except simbatch.SimbatchError as e:
                    print(f"| {env_id} | {n} | {backend} | not run: {e} |")
                    continue
                rows.append({"env": env_id, "n": n, "backend": backend, "env_steps_per_s": rate})
                print(f"| {env_id} | {n} | {backend} | {rate:.3e} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
