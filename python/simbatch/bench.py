"""``python -m simbatch.bench``: simbatch next to MuJoCo on the same workload, in one run.

The workload is ``simbatch bench``'s "rolling ball": a solid ball of mass 1 kg and radius 0.1 m
rolling along x at 0.5 m/s on a ground plane, h = 1 ms, RK4 and semi-implicit Euler. simbatch's
rows come from the same Rust harness as ``simbatch bench`` (instance-steps per second on
``--threads`` CPU threads, ``--substeps`` steps per call); MuJoCo's from ``mj_step`` on one
thread (its fastest single-system path) and, where available, ``mujoco.rollout`` over the same
number of systems. MuJoCo keeps the ball rolling through contact friction (condim 3, soft
contact), the closest it has to simbatch's exact rolling constraint. The ratios printed are the
ones the README quotes; run it on your machine to reproduce them (``pip install mujoco`` for
MuJoCo's side; without it only simbatch's rows are printed)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

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

INTEGRATORS = {"rk4": "RK4", "euler": "Euler"}


def mujoco_step_rate(integrator: str, seconds: float, steps: int = 2000) -> float:
    """MuJoCo ``mj_step`` calls per second on one thread (median of repeated runs)."""
    import mujoco

    model = mujoco.MjModel.from_xml_string(XML.format(integrator=INTEGRATORS[integrator]))
    data = mujoco.MjData(model)
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < 3 or (time.perf_counter() - start < seconds and len(samples) < 50):
        mujoco.mj_resetData(model, data)
        data.qvel[:] = [0.5, 0.0, 0.0, 0.0, 5.0, 0.0]  # v = 0.5 m/s, w = v / r about y
        t = time.perf_counter()
        for _ in range(steps):
            mujoco.mj_step(model, data)
        samples.append(steps / (time.perf_counter() - t))
    return statistics.median(samples)


def mujoco_rollout_rate(integrator: str, n: int, steps: int = 200) -> float | None:
    """Instance-steps per second of ``mujoco.rollout`` over ``n`` systems (None without it)."""
    import mujoco
    import numpy as np

    try:
        from mujoco import rollout
    except ImportError:
        return None
    model = mujoco.MjModel.from_xml_string(XML.format(integrator=INTEGRATORS[integrator]))
    data = mujoco.MjData(model)
    data.qvel[:] = [0.5, 0.0, 0.0, 0.0, 5.0, 0.0]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state, spec)
    initial = np.tile(state, (n, 1))
    t = time.perf_counter()
    rollout.rollout(model, data, initial, nstep=steps)
    return n * steps / (time.perf_counter() - t)


def simbatch_rates(n: int, threads: int, substeps: int, seconds: float) -> dict[str, float]:
    """simbatch's rolling-ball instance-steps per second per integrator, from the Rust harness."""
    from . import _simbatch

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.json")
        _simbatch.bench(
            [
                "--n", str(n), "--threads", str(threads), "--substeps", str(substeps),
                "--backends", "cpu", "--integrators", "rk4,euler",
                "--seconds", str(seconds), "--json", path,
            ]
        )
        with open(path) as f:
            rows = json.load(f)["rows"]
    return {
        r["integrator"]: r["per_second"]
        for r in rows
        if r["system"] == "rolling ball" and r["substeps"] == substeps
    }


def run(n: int, threads: int, substeps: int, seconds: float) -> list[dict[str, Any]]:
    """The side-by-side rows (MuJoCo's figures ``None`` when it is not installed)."""
    ours = simbatch_rates(n, threads, substeps, seconds)
    try:
        import mujoco  # noqa: F401

        have_mujoco = True
    except ImportError:
        have_mujoco = False
    rows = []
    for name in INTEGRATORS:
        step = mujoco_step_rate(name, seconds) if have_mujoco else None
        roll = mujoco_rollout_rate(name, n) if have_mujoco else None
        rows.append(
            {
                "integrator": name,
                "simbatch": ours.get(name),
                "mujoco_mj_step": step,
                "mujoco_rollout": roll,
                "ratio_vs_mj_step": None if not step or ours.get(name) is None else ours[name] / step,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m simbatch.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="simbatch instances (and rollout systems)")
    parser.add_argument("--threads", type=int, default=1, help="simbatch CPU threads (1: same as mj_step)")
    parser.add_argument("--substeps", type=int, default=16, help="simbatch steps per call")
    parser.add_argument("--seconds", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    rows = run(args.n, args.threads, args.substeps, args.seconds)
    fmt = lambda x: "n/a" if x is None else f"{x:.3g}"  # noqa: E731
    print(f"rolling ball, h = 1 ms; simbatch: N = {args.n}, {args.threads} thread(s), {args.substeps} steps/call")
    print("| integrator | simbatch steps/s | MuJoCo mj_step/s | MuJoCo rollout steps/s | simbatch / mj_step |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['integrator']} | {fmt(r['simbatch'])} | {fmt(r['mujoco_mj_step'])} | "
            f"{fmt(r['mujoco_rollout'])} | {fmt(r['ratio_vs_mj_step'])} |"
        )
    if rows[0]["mujoco_mj_step"] is None:
        print("MuJoCo is not installed (pip install mujoco): its columns are n/a")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
