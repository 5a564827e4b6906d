"""Monte Carlo studies from Python: the same results as the command, bit for bit on the CPU;
scenarios as files, text or dicts; errors located like the command's; unilateral contacts'
per-contact results; rendering a study's instances."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import simbatch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOUNCING = os.path.join(ROOT, "examples", "scenarios", "bouncing_balls.toml")


def _binary() -> str:
    path = os.path.join(ROOT, "target", "release", "simbatch")
    if not os.path.exists(path):
        if os.environ.get("CI") == "true":
            raise AssertionError(f"{path} missing: run cargo build --release first")
        pytest.skip("the simbatch command is not built")
    return path


def _small_bouncing() -> str:
    text = open(BOUNCING).read()
    return text.replace("instances = 2000", "instances = 24", 1).replace("duration = 3.0", "duration = 0.8", 1)


def test_version():
    assert isinstance(simbatch.__version__, str) and simbatch.__version__.count(".") == 2


def test_a_study_from_python_equals_the_command_bit_for_bit(tmp_path):
    text = _small_bouncing()
    scenario = tmp_path / "bouncing.toml"
    scenario.write_text(text)
    cli_out = tmp_path / "cli"
    subprocess.run([_binary(), "run", str(scenario), "--backend", "cpu", "-q", "--out", str(cli_out)], check=True)
    for source in (scenario, str(scenario), text):
        study = simbatch.Study(source)
        assert study.instances == 24 and study.name == "bouncing-balls"
        out = tmp_path / f"py-{type(source).__name__}-{len(str(source)) % 97}"
        result = study.run(backend="cpu", out=out, progress=False)
        assert result.dir == out
        assert (out / "results.csv").read_bytes() == (cli_out / "results.csv").read_bytes()
        assert (out / "series.csv").read_bytes() == (cli_out / "series.csv").read_bytes()
        assert result.manifest["instances"] == 24
    results = result.results
    assert list(results["index"]) == list(range(24))
    # Unilateral contacts' per-contact results, by column name.
    for column in ("c0.mode", "c0.impacts", "c0.first_impact_time", "c0.impact_loss"):
        assert np.asarray(results[column]).shape == (24,)
    # Each ball's first impact: h + v t − g t²/2 = 0 for its drawn height and vertical speed.
    h = np.asarray(results["ball.position.z"]) - np.asarray(results["radius"])
    v = np.asarray(results["ball.velocity.z"])
    np.testing.assert_allclose(
        np.asarray(results["c0.first_impact_time"]), (v + np.sqrt(v * v + 2 * 9.81 * h)) / 9.81, atol=1e-6
    )
    assert result.summary["ball.mass"]["count"] == 24.0
    assert result.series is not None and "c0.mode" in result.series


def drop_scenario() -> dict:
    """A drop study as a dict (the file format's schema)."""
    return {
        "name": "drop",
        "instances": 8,
        "seed": 3,
        "body": [
            {
                "name": "ball",
                "mass": 1.0,
                "inertia": {"solid_sphere": 0.1},
                "position": [0.0, 0.0, {"uniform": [0.3, 0.6]}],
            }
        ],
        "constraint": [
            {
                "kind": "sphere_on_plane",
                "plane": "ground",
                "body": "ball",
                "radius": 0.1,
                "contact": "unilateral",
                "restitution": 0.5,
                "friction": 0.4,
            }
        ],
        "simulation": {"integrator": "rk4", "step": 1e-3, "duration": 0.5, "backend": "cpu"},
    }


def test_a_study_from_a_dict(tmp_path):
    scenario = drop_scenario()
    result = simbatch.Study(scenario).run(out=tmp_path / "drop", progress=False)
    r = result.results
    h = np.asarray(r["ball.position.z"]) - 0.1
    np.testing.assert_allclose(np.asarray(r["c0.first_impact_time"]), np.sqrt(2 * h / 9.81), atol=1e-6)
    assert (np.asarray(r["status"]) == 0).all()
    # Results do not depend on sharding: shard 1 of 2 holds instances 4..8, the same values.
    half = simbatch.Study(scenario).run(out=tmp_path / "half", shard=(1, 2), progress=False).results
    assert list(half["index"]) == [4, 5, 6, 7]
    np.testing.assert_array_equal(np.asarray(half["ball.z"]), np.asarray(r["ball.z"])[4:])


def test_errors_are_located_like_the_commands():
    text = _small_bouncing().replace("restitution = { uniform = [0.2, 0.9] }", "restitution = 1.5", 1)
    with pytest.raises(ValueError, match=r"<text>:\d+:\d+: constraint\[0\]\.restitution"):
        simbatch.Study(text)
    bad = drop_scenario()
    bad["constraint"][0]["friction"] = {"static": 0.1, "dynamic": 0.4}
    with pytest.raises(ValueError, match=r"<dict>:\d+:\d+: constraint\[0\]\.friction"):
        simbatch.Study(bad)
    with pytest.raises(TypeError):
        simbatch.Study(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shard"):
        simbatch.Study(_small_bouncing()).run(shard=(2, 2), progress=False)


def test_render_from_a_study_result(tmp_path):
    result = simbatch.Study(_small_bouncing()).run(out=tmp_path / "s", backend="cpu", progress=False)
    assert result.render([3], tmp_path / "f.png", time=0.4, size=(80, 60)) >= 1
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _series_scenario(text: str, step: str, instances: int) -> str:
    """`text` recording every integrator step for its first instances (a rollout's times)."""
    import re

    text = re.sub(r"^instances = \d+", f"instances = {instances}", text, count=1, flags=re.M)
    text = re.sub(r"^interval = .*$", f"interval = {step}", text, count=1, flags=re.M)
    return re.sub(r"^series_instances = \d+", f"series_instances = {instances}", text, count=1, flags=re.M)


@pytest.mark.parametrize("which", ["default", "bouncing"])
def test_a_rollout_equals_the_study_stepping_the_same_instances(tmp_path, which):
    # The default study (bilateral, RK4 5 ms with projection, assembled) and a unilateral one
    # (RK4 1 ms, events): the rollout's positions at every step are the study's own series.
    if which == "default":
        text = subprocess.run([_binary(), "scenario"], check=True, capture_output=True, text=True).stdout
        text = _series_scenario(text.replace('backend = "auto"', 'backend = "cpu"'), "5e-3", 6)
        steps = 100  # 0.5 s
    else:
        text = _series_scenario(_small_bouncing().replace("duration = 0.8", "duration = 0.3"), "1e-3", 5)
        steps = 300
    result = simbatch.Study(text).run(out=tmp_path / "s", progress=False)
    series = result.series
    idx = np.asarray(series["index"])
    names = [c for c in series.keys() if c.endswith((".x", ".y", ".z"))] if isinstance(series, dict) else [
        c for c in series.columns if c.endswith((".x", ".y", ".z"))
    ]
    roll = simbatch.rollout(text, steps, instances=[0, 2, 3])
    assert roll["q"].shape[:2] == (3, steps + 1)
    for slot, instance in enumerate([0, 2, 3]):
        rows = idx == instance
        expected = np.stack([np.asarray(series[n])[rows] for n in names], axis=1)
        assert expected.shape == (steps + 1, 3), expected.shape
        np.testing.assert_array_equal(roll["q"][slot, :, 4:7], expected)
    assert np.isfinite(roll["multipliers"]).any()


def test_rollout_controls_act_as_applied_loads():
    # A ball held in the air by an upward force m g equal to its weight stays put; without it,
    # it falls g t²/2 (the unilateral contact stays open).
    scenario = drop_scenario()
    scenario["body"][0]["position"] = [0.0, 0.0, 1.0]
    steps = 200
    free = simbatch.rollout(scenario, steps, instances=2)
    t = free["time"]
    np.testing.assert_allclose(free["q"][:, :, 6], np.broadcast_to(1.0 - 0.5 * 9.81 * t**2, (2, steps + 1)), atol=1e-9)
    controls = np.zeros((2, steps, 1, 6))
    controls[:, :, 0, 5] = 9.81  # mass 1 kg
    held = simbatch.rollout(scenario, steps, instances=2, controls=controls)
    np.testing.assert_allclose(held["q"][:, :, 6], 1.0, atol=1e-12)
    with pytest.raises(ValueError, match="controls"):
        simbatch.rollout(scenario, steps, instances=2, controls=np.zeros((2, steps, 1, 5)))


def test_a_rollout_interval_is_a_control_period_and_rkm_defaults_to_the_record_interval(tmp_path):
    # rkm has no step of its own: a rollout steps by the scenario's record interval (its
    # default max_step, the whole duration, made each rollout step span the study), and equals
    # the study's series there. `interval=` sets a control period over several integrator steps.
    text = _series_scenario(_small_bouncing().replace("duration = 0.8", "duration = 0.3"), "0.05", 4)
    text = re.sub(r'integrator = "rk4"\nstep = [^\n]*', 'integrator = "rkm"\naccuracy = 1e-6', text, count=1)
    assert 'integrator = "rkm"' in text
    series = simbatch.Study(text).run(out=tmp_path / "s", progress=False).series
    # Five steps, to 0.25 s (the study's last sample is at its duration, 0.3 s, where six
    # rollout steps land at 6 × 0.05 = 0.30000000000000004: another span, other roundings).
    roll = simbatch.rollout(text, 5, instances=[1, 3])
    np.testing.assert_array_equal(roll["time"], np.arange(6) * 0.05)
    idx = np.asarray(series["index"])
    for slot, instance in enumerate([1, 3]):
        rows = idx == instance
        expected = np.stack([np.asarray(series[f"ball.{a}"])[rows] for a in "xyz"], axis=1)
        np.testing.assert_array_equal(roll["q"][slot, :, 4:7], expected[:6])
    held = drop_scenario()
    held["body"][0]["position"] = [0.0, 0.0, 1.0]
    controls = np.zeros((2, 5, 1, 6))
    controls[:, :, 0, 5] = 9.81
    roll = simbatch.rollout(held, 5, instances=2, controls=controls, interval=0.04)
    np.testing.assert_allclose(roll["time"], np.arange(6) * 0.04)
    np.testing.assert_allclose(roll["q"][:, :, 6], 1.0, atol=1e-12)
    for bad, error in [(0.0, ValueError), (-1.0, ValueError), (float("nan"), ValueError), ("0.1", TypeError)]:
        with pytest.raises(error, match="interval"):
            simbatch.rollout(held, 5, instances=2, interval=bad)


def test_a_rollout_of_an_instance_the_study_lacks_names_the_argument_and_the_range():
    scenario = drop_scenario()
    count = scenario["instances"]
    with pytest.raises(ValueError) as e:
        simbatch.rollout(scenario, 5, instances=[0, count])
    message = str(e.value)
    assert f"invalid instances: got {count}; accepted: 0 … {count - 1}" in message
    assert "--instances" not in message and "render" not in message


def test_counts_and_indices_are_integers_in_range_named_by_argument():
    """``steps``, instance counts and indices, ``instances=`` and ``shard=`` of a run: a float is
    refused rather than truncated, a negative number gets the argument's name (not NumPy's or
    the binding's overflow words), a count beyond the study names the study's size."""
    scenario = drop_scenario()
    count = scenario["instances"]
    cases = [
        (dict(steps=-1), ValueError, r"steps: got -1; accepted: an integer ≥ 1"),
        (dict(steps=2.5), TypeError, r"steps: got 2\.5 \(float\); accepted: an integer ≥ 1"),
        (dict(steps=2, instances=[0, -1]), ValueError, r"instances\[1\]: got -1; accepted: an integer ≥ 0"),
        (dict(steps=2, instances=[0.0]), TypeError, r"instances\[0\]: got 0\.0 \(float\)"),
        (dict(steps=2, instances=-3), ValueError, r"instances: got -3; accepted: an integer ≥ 1"),
        (dict(steps=2, instances=count + 1), ValueError, rf"instances: got {count + 1}; accepted: 1 … {count}"),
    ]
    for kwargs, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            simbatch.rollout(scenario, **kwargs)
    assert simbatch.rollout(scenario, 1, instances=np.int64(2))["q"].shape[0] == 2
    study = simbatch.Study(scenario)
    with pytest.raises(TypeError, match=r"instances: got 1\.5 \(float\)"):
        study.run(instances=1.5, progress=False)
    with pytest.raises(ValueError, match=r"shard\[0\]: got -1; accepted: an integer ≥ 0"):
        study.run(shard=(-1, 2), progress=False)


def test_the_benchmark_harness_prints_simbatch_next_to_mujoco(tmp_path):
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, "-m", "simbatch.bench", "--n", "200", "--seconds", "0.02", "--json", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "| rk4 |" in run.stdout and "| euler |" in run.stdout
    rows = json.loads(out.read_text())["rows"]
    assert {r["integrator"] for r in rows} == {"rk4", "euler"}
    for r in rows:
        assert r["simbatch"] > 0
        # MuJoCo's columns are measured when it is installed, else None (n/a in the table).
        if r["mujoco_mj_step"] is None:
            assert r["ratio_vs_mj_step"] is None
        else:
            assert r["ratio_vs_mj_step"] == pytest.approx(r["simbatch"] / r["mujoco_mj_step"])


def test_render_a_study_from_python(tmp_path):
    study = tmp_path / "study"
    subprocess.run(
        [_binary(), "run", "--instances", "5", "--backend", "cpu", "-q", "--out", str(study)],
        check=True,
    )
    frames = simbatch.render(study, [0, 4], tmp_path / "a.gif", interval=0.25, size=(64, 48))
    assert frames == 3  # 0, 0.25 and 0.5 s
    data = (tmp_path / "a.gif").read_bytes()
    assert data[:6] == b"GIF89a" and data[6:10] == bytes([64, 0, 48, 0])  # 64 × 48, little-endian
    assert simbatch.render(study, [2], tmp_path / "p.html") == 101
    assert '"instance":2' in (tmp_path / "p.html").read_text()
    with pytest.raises(ValueError, match="--instances 9"):
        simbatch.render(study, [9], tmp_path / "b.gif")
    with pytest.raises(ValueError):
        simbatch.render(study, [-1], tmp_path / "b.gif")
