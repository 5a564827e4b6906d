"""Monte Carlo studies from Python: ``simbatch.Study(source).run(...)``.

The scenario (a path to a TOML file, TOML text, or a dict with the same schema) is parsed,
checked, drawn and run by the same Rust code as the ``simbatch`` command, so a study run from
Python writes the same output directory, bit for bit on the CPU, as ``simbatch run`` does, and
mistakes are located the same way (``file:line:column: field: what is accepted``).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from . import _simbatch
from ._checks import _count, _index, _seconds


class Table(dict):
    """Columns of a study table by name (``"index"`` first), each a NumPy array — what
    ``results.csv`` or ``series.csv`` holds; ``to_pandas()`` gives a DataFrame."""

    def to_pandas(self) -> Any:
        """The table as a ``pandas.DataFrame`` (pandas must be installed)."""
        import pandas as pd

        return pd.DataFrame(dict(self))


def _read_table(path: Path) -> Any:
    columns, index, values = _simbatch.read_table(os.fspath(path))
    table = Table()
    table["index"] = index
    for k, name in enumerate(columns):
        table[name] = values[:, k]
    try:
        import pandas  # noqa: F401
    except ImportError:
        return table
    return table.to_pandas()


class StudyResult:
    """What a study run wrote: its directory and, read from it on first use, ``results``
    (one row per instance: a ``pandas.DataFrame`` when pandas is installed, else a
    :class:`Table` of NumPy arrays; both indexable by column name as in ``results.csv``),
    ``series`` (``None`` when nothing was recorded over time), ``summary`` (per quantity:
    count, non-finite count, mean, std, quantiles) and ``manifest``."""

    def __init__(self, directory: str | os.PathLike[str], manifest: Mapping[str, Any] | None = None):
        self.dir = Path(directory)
        self._manifest = dict(manifest) if manifest is not None else None
        self._results: Any = None
        self._series: Any = None
        self._summary: dict[str, dict[str, float]] | None = None

    @property
    def manifest(self) -> dict[str, Any]:
        if self._manifest is None:
            self._manifest = json.loads((self.dir / "manifest.json").read_text())
        return self._manifest

    @property
    def results(self) -> Any:
        if self._results is None:
            self._results = _read_table(self.dir / "results.csv")
        return self._results

    @property
    def series(self) -> Any:
        if self._series is None and (self.dir / "series.csv").exists():
            self._series = _read_table(self.dir / "series.csv")
        return self._series

    @property
    def summary(self) -> dict[str, dict[str, float]]:
        if self._summary is None:
            with open(self.dir / "summary.csv", newline="") as f:
                rows = list(csv.reader(f))
            header = rows[0][1:]
            self._summary = {r[0]: {h: float(v) for h, v in zip(header, r[1:])} for r in rows[1:]}
        return self._summary

    def render(self, instances: Sequence[int], out: str | os.PathLike[str], **kwargs: Any) -> int:
        """Replay ``instances`` of this study and write ``out`` (``.gif``, ``.html`` or
        ``.png``); see :func:`simbatch.render`."""
        from . import render

        return render(self.dir, instances, out, **kwargs)

    def __repr__(self) -> str:
        return f"StudyResult({os.fspath(self.dir)!r})"


class Study:
    """A Monte Carlo study: ``Study(source)`` with ``source`` a path to a scenario file, the
    TOML text of one, or a dict with the same schema (``{"instances": 1000, "body": [...],
    "constraint": [...], "simulation": {...}}``; every key, with its default and accepted range,
    in the repository's ``docs/scenario-format.md``). The scenario is checked at once; a mistake
    raises ``ValueError`` naming file, line, column, field and what is accepted."""

    def __init__(self, source: str | os.PathLike[str] | Mapping[str, Any]):
        if isinstance(source, Mapping):
            self.file = "<dict>"
            self.text = _simbatch.scenario_toml(dict(source))
        elif isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and source.strip().endswith(".toml")
        ):
            self.file = os.fspath(source)
            self.text = Path(self.file).read_text()
        elif isinstance(source, str):
            self.file = "<text>"
            self.text = source
        else:
            raise TypeError(
                f"source: got {type(source).__name__}; accepted: a path, TOML text or a dict"
            )
        self.name, self.instances, self.duration = _simbatch.check_scenario(self.file, self.text)

    def run(
        self,
        backend: str | None = None,
        precision: str | None = None,
        shard: tuple[int, int] | None = None,
        out: str | os.PathLike[str] | None = None,
        progress: bool = True,
        *,
        instances: int | None = None,
        force: bool = False,
    ) -> StudyResult:
        """Run the study (or shard ``(I, N)`` of it) into ``out`` (default
        ``simbatch-out/<name>``, as the command) and return its :class:`StudyResult`.
        ``backend``: ``"cpu"``, ``"gpu"`` or ``"auto"`` (else ``SIMBATCH_BACKEND``, else the
        scenario's); ``precision``: ``"f32"`` or ``"f64"`` on a GPU; ``progress``: the
        command's progress bar and summary table; ``instances`` overrides the count;
        ``force`` replaces an existing study output. The GIL is released while it runs."""
        directory, manifest = _simbatch.run_scenario(
            self.file,
            self.text,
            None if out is None else os.fspath(out),
            backend,
            precision,
            None if shard is None else (_index("shard[0]", shard[0]), _count("shard[1]", shard[1])),
            None if instances is None else _count("instances", instances),
            bool(force),
            not progress,
        )
        return StudyResult(directory, json.loads(manifest))

    def __repr__(self) -> str:
        return f"Study({self.name!r}, instances={self.instances}, duration={self.duration})"


def rollout(
    source: "Study | str | os.PathLike[str] | Mapping[str, Any]",
    steps: int,
    instances: int | Sequence[int] | None = None,
    controls: np.ndarray | None = None,
    interval: float | None = None,
) -> dict[str, np.ndarray]:
    """Roll out instances of a scenario for ``steps`` steps of ``interval`` seconds, like
    ``mujoco.rollout``: returns ``{"time": (K+1,), "q": (N, K+1, 7·bodies), "u": (N, K+1,
    6·bodies), "multipliers": (N, K+1, 3·constraints)}``. ``interval`` (a control period)
    defaults to the integrator's step, and for ``rkm`` (no step of its own) to the scenario's
    ``[record] interval``, else its ``max_step``; the integrator takes its own steps within
    it. ``instances``: a count (the first N) or global indices (default: all of the
    scenario's); each is drawn and prepared as a study does, so the states equal the study's
    at the same times. ``controls``: optional ``(N, K, bodies, 6)`` applied torque and force
    (Ground) per free body, held over each step. The GIL is released while it runs."""
    study = source if isinstance(source, Study) else Study(source)
    steps = _count("steps", steps)
    if instances is None:
        chosen = list(range(study.instances))
    elif np.ndim(instances) == 0:
        count = _count("instances", instances)
        if count > study.instances:
            raise ValueError(f"instances: got {count}; accepted: 1 … {study.instances} (the study's instances)")
        chosen = list(range(count))
    else:
        chosen = [_index(f"instances[{k}]", i) for k, i in enumerate(np.asarray(instances).tolist())]
    flat = None
    if controls is not None:
        flat = np.ascontiguousarray(controls, dtype=np.float64).reshape(-1)
    if interval is not None:
        interval = _seconds("interval", interval)
    q, u, multipliers, step = _simbatch.rollout(study.file, study.text, chosen, steps, flat, interval)
    return {"time": np.arange(steps + 1) * step, "q": q, "u": u, "multipliers": multipliers}
