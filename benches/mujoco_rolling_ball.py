#!/usr/bin/env python3
"""MuJoCo's single-threaded `mj_step` on the benchmark's rolling ball, for the ratio in the
README's performance section.

The workload (the model and the timing loop) is `python/simbatch/bench.py`'s, loaded from its
file so this script needs only MuJoCo, not the simbatch package: a solid ball of mass 1 kg and
radius 0.1 m rolling along x at 0.5 m/s on a ground plane, h = 1 ms, RK4 and (semi-implicit)
Euler, instance-steps per second on one thread, the median of repeated timed runs. With the
simbatch package installed, `python -m simbatch.bench` measures both sides in one run.

Run (any machine; the numbers are meant to be taken in the same session as
`simbatch bench --threads 1 --n 10000 --substeps 16 --backends cpu`):

    python3 -m venv /tmp/mj && /tmp/mj/bin/pip install mujoco
    /tmp/mj/bin/python benches/mujoco_rolling_ball.py [--seconds 2] [--json out.json]
"""
import argparse
import importlib.util
import json
import os

import mujoco

_SPEC = importlib.util.spec_from_file_location(
    "simbatch_bench",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "simbatch", "bench.py"),
)
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for name in bench.INTEGRATORS:
        r = bench.mujoco_step_rate(name, args.seconds)
        rows.append({"system": "rolling ball", "integrator": name, "per_second": r,
                     "what": "mj_step calls (one thread)"})
        print(f"MuJoCo {mujoco.__version__} mj_step, rolling ball, {name:<6} {r:>12.0f} /s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mujoco": mujoco.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
