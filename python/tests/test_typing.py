"""The package's type stubs are complete: mypy checks the package (against its own stubs of the
Rust core, `_simbatch.pyi`, with `py.typed`) and a program using the public API."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

USAGE = textwrap.dedent(
    '''
    import numpy as np
    import simbatch

    env = simbatch.VectorEnv("BallToss-v0", 4, render_mode="rgb_array", render_size=(64, 48))
    obs, info = env.reset(seed=0)
    obs2, reward, terminated, truncated, info = env.step(env.action_space.sample())
    frames = env.render()
    picture: np.ndarray = env.render_env(0, 32, 24)
    version: str = simbatch.__version__
    study = simbatch.Study({"instances": 2})
    result: simbatch.StudyResult = study.run(backend="cpu", shard=(0, 1), progress=False)
    n: int = simbatch.render(result.dir, [0], "x.gif", interval=0.1)
    ids: list[str] = simbatch.env_ids()
    roll: dict[str, np.ndarray] = simbatch.rollout(study, 10, instances=2)
    '''
)


def test_mypy_checks_the_package_and_a_program_using_it(tmp_path):
    pytest.importorskip("mypy")
    program = tmp_path / "usage.py"
    program.write_text(USAGE)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--ignore-missing-imports", "simbatch", str(program)],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
