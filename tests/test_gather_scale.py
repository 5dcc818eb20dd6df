"""Gathering at scale: real-schema result files into the table, scaling efficiency in one pass."""

from __future__ import annotations

import math
import sys

import pandas as pd
from conftest import ROOT

from orchestrator.core.files import read_plan
from orchestrator.results.table import add_scaling, gather, write_table

sys.path.insert(0, str(ROOT / "benchmarks" / "scale"))
from make_results import make_results  # noqa: E402


def row(strategy: str, world: int, samples: float, **key) -> dict:
    base = {"workload": "gpt", "size": "tiny", "task": "train", "dtype": "fp32", "mode": "default"}
    return {
        **base,
        "dynamic": None,
        **key,
        "strategy": strategy,
        "world_size": world,
        "compiled_samples_per_s": samples,
        "compiled_tokens_per_s": samples * 64,
    }


def test_scaling_efficiency_against_the_unique_none_row():
    df = add_scaling(
        pd.DataFrame(
            [
                row("none", 1, 100.0),
                row("ddp", 2, 180.0),
                row("fsdp", 4, 300.0),
                row("ddp", 2, 150.0, size="small"),  # no `none` row of that size
                row("none", 1, 50.0, mode="eager"),
                row("none", 1, 60.0, mode="eager"),  # two baselines: ambiguous
                row("ddp", 2, 100.0, mode="eager"),
            ]
        )
    )
    effs = df["scaling_efficiency"].tolist()
    assert effs[1] == 180.0 / (2 * 100.0) and effs[2] == 300.0 / (4 * 100.0)
    assert [e is None or math.isnan(e) for e in effs] == [True, False, False, True, True, True, True]


def test_gather_a_thousand_real_schema_results(tmp_path):
    sweep_dir = tmp_path / "s"
    ids = make_results(1000, sweep_dir)
    df = gather(sweep_dir, read_plan(sweep_dir))
    assert df["job_id"].tolist() == ids, "rows in plan order"
    assert {"speedup", "compile_s", "env_torch", "scaling_efficiency"} <= set(df.columns)
    csv = write_table(sweep_dir, df)
    assert csv.read_text().count("\n") == 1001
    assert (sweep_dir / "results.jsonl").read_text().count("\n") == 1000


def test_gather_verdict_and_dashboard_open_each_result_once(tmp_path, monkeypatch):
    """`gather DIR` on a finished sweep: the table, the verdict and the dashboard are written from one
    read of each job's result.json (every open of one is counted, through pathlib and open alike)."""
    import builtins
    import collections
    import json
    import pathlib

    from orchestrator.__main__ import main

    sweep_dir = tmp_path / "s"
    ids = make_results(200, sweep_dir)
    ledger = {"launcher": "local", "jobs": {i: {"job_id": str(100 + n)} for n, i in enumerate(ids)}}
    (sweep_dir / "submitted.json").write_text(json.dumps(ledger))  # as the local launcher leaves it
    opened: collections.Counter[str] = collections.Counter()
    path_open, plain_open = pathlib.Path.open, builtins.open

    def counted_path_open(self: pathlib.Path, *args: object, **kwargs: object) -> object:
        if self.name == "result.json":
            opened[self.parent.name] += 1
        return path_open(self, *args, **kwargs)  # type: ignore[arg-type]

    def counted_open(file: object, *args: object, **kwargs: object) -> object:
        if str(file).endswith("result.json"):
            opened[pathlib.Path(str(file)).parent.name] += 1
        return plain_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(pathlib.Path, "open", counted_path_open)
    monkeypatch.setattr(builtins, "open", counted_open)
    main(["gather", str(sweep_dir)])
    assert (sweep_dir / "verdict.json").exists() and (sweep_dir / "dashboard.html").exists()
    assert set(opened) == set(ids) and set(opened.values()) == {1}, opened.most_common(3)
