#!/usr/bin/env python3
"""MuJoCo's single-threaded `mj_step` on the benchmark's rolling ball, for the ratio in the
README's performance section.

The system is `simbatch bench`'s "rolling ball" (`scenarios::rolling_balls`): a solid ball of
mass 1 kg and radius 0.1 m rolling along x at 0.5 m/s on a ground plane, h = 1 ms. MuJoCo keeps
it rolling through contact friction (condim 3, soft contact), the closest it has to simbatch's
exact rolling constraint. Rows: RK4 and (semi-implicit) Euler, instance-steps per second on one
thread, the median of repeated timed runs.

Run (any machine; the numbers are meant to be taken in the same session as
`simbatch bench --threads 1 --n 10000 --substeps 16 --backends cpu`):

    python3 -m venv /tmp/mj && /tmp/mj/bin/pip install mujoco
    /tmp/mj/bin/python benches/mujoco_rolling_ball.py [--seconds 2] [--json out.json]
"""
import argparse
import json
import statistics
import time

import mujoco

XML = """
<mujoco>
  <option timestep="0.001" integrator="{integrator}" gravity="0 0 -9.81"/>
  <worldbody>
    <geom type="plane" size="100 100 0.1" condim="3" friction="1 0.005 0.0001"/>
    <body name="ball" pos="0 0 0.1">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1" condim="3" friction="1 0.005 0.0001"/>
    </body>
  </worldbody>
</mujoco>
"""


def rate(integrator: str, seconds: float, steps: int = 2000) -> float:
    model = mujoco.MjModel.from_xml_string(XML.format(integrator=integrator))
    data = mujoco.MjData(model)
    samples = []
    start = time.perf_counter()
    while len(samples) < 3 or (time.perf_counter() - start < seconds and len(samples) < 50):
        mujoco.mj_resetData(model, data)
        data.qvel[:] = [0.5, 0.0, 0.0, 0.0, 5.0, 0.0]  # v = 0.5 m/s, w = v / r about y
        t = time.perf_counter()
        for _ in range(steps):
            mujoco.mj_step(model, data)
        samples.append(steps / (time.perf_counter() - t))
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for name, integrator in [("rk4", "RK4"), ("euler", "Euler")]:
        r = rate(integrator, args.seconds)
        rows.append({"system": "rolling ball", "integrator": name, "per_second": r,
                     "what": "mj_step calls (one thread)"})
        print(f"MuJoCo {mujoco.__version__} mj_step, rolling ball, {name:<6} {r:>12.0f} /s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mujoco": mujoco.__version__, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
