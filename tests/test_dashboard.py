"""The dashboard in real headless Chromium: what each chart plotted, read back from the page, is
what the jobs measured (one mark per job, canonical mode order, no empty chart), at 1280 px and at
a phone's width; and a sweep of thousands of rows stays usable and bounded in size."""

from __future__ import annotations

import hashlib
import html
import json
import math
import random
import re
import shutil

import numpy as np
import pytest
from browser import CHROMIUM, attr, body_data, chart_ids, dump_dom, grid_rows, phone_page, screenshot, traces
from conftest import results, run_cli

from orchestrator.config.schema import COMPILE_MODES
from orchestrator.core.files import PLAN_FILE, RESULT_FILE, write_json_atomic
from orchestrator.report.figures import MAX_BARS, MAX_POINTS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Debian's chromium is not installed (scripts/system-deps.sh)"
    ),
]


def init_args(result: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in result["axes"]["workload.init_args"].items())


def assert_no_empty_chart(dom: str) -> None:
    ids = chart_ids(dom)
    assert ids, "some chart is drawn"
    for chart in ids:
        plotted = traces(dom, chart)
        assert any(y is not None for t in plotted for y in t["y"]), f"{chart} is empty"


def test_two_jobs_per_label_plot_their_own_values(initargs_sweep, tmp_path):
    """The issue's bug: two ok jobs of one mode in a sweep over workload.init_args stacked into one
    bar showing their sum. Each job must have its own bar, at its own value."""
    page = initargs_sweep / "dashboard.html"
    dom = dump_dom(page.as_uri(), tmp_path / "p1")
    assert attr(dom, "js-errors", "style") in (None, ""), "no JS error"
    assert 'data-ready="true"' in dom

    jobs = results(initargs_sweep)
    measured = {(init_args(r), r["mode"]): r["speedup"] for r in jobs.values()}
    plotted = traces(dom, "chart-speedup")
    assert [t["name"] for t in plotted] == ["eager", "default"], (
        "canonical order, though the CLI said default,eager"
    )
    marks = {(x, t["name"]): y for t in plotted for x, y in zip(t["x"], t["y"], strict=True)}
    assert marks == measured, "one bar per job, at the job's own speedup"
    assert sum(len(t["y"]) for t in plotted) == len(jobs)

    assert_no_empty_chart(dom)
    assert "chart-graph" not in chart_ids(dom) and "chart-peak" not in chart_ids(dom)
    hidden = attr(dom, "hidden-charts", "class") and dom.split('id="hidden-charts"')[1].split("</p>")[0]
    assert "Graph breaks: No graph breaks" in hidden and "CUDA only" in hidden

    # The answer first, one per model: the verdict's, in words, then its table, then the charts.
    verdict = json.loads((initargs_sweep / "verdict.json").read_text())
    answers = re.findall(r"<li\b[^>]*>(.*?)</li>", dom.split('id="answers"')[1].split("</ol>")[0], re.S)
    assert len(answers) == 2 and [v["model"] for v in verdict["models"]] == ["hidden=64", "hidden=32"]
    vheaders, vrows, _ = grid_rows(dom, "verdict")
    for text, v, vrow in zip(answers, verdict["models"], vrows, strict=True):
        said = html.unescape(re.sub("<[^>]+>", "", text.replace("<br>", " ")))
        assert said.startswith(f"{v['model']}: ") and (not v["cause"] or v["cause"] in said), (said, v)
        assert vrow[vheaders.index("numerics")] == v["numerics"] and "matmul" in v["numerics"], vrow
    assert {"cause", "with the lever"} <= set(vheaders), vheaders
    assert 'id="best"' not in dom, "no second answer beside the verdict"
    order = [dom.index(f'id="{key}"') for key in ("answers", "verdict", "chart-speedup", "results")]
    assert order == sorted(order), "the answers, the verdict, the charts, every job"

    headers, rows, hrefs = grid_rows(dom, "results")
    assert headers[:6] == ["label", "mode", "speedup", "95% CI", "compile s", "status"], "key columns first"
    assert headers.index("job_id") > 6
    assert [r[1] for r in rows] == ["eager", "default", "eager", "default"], (
        "modes canonical within each model"
    )
    for row, links in zip(rows, hrefs, strict=True):
        (log,) = links
        assert (initargs_sweep / log).is_file(), f"row links its log: {log}"
        job = next(r for r in jobs.values() if r["label"] == row[0])
        assert log.endswith(job["log_stderr"].rsplit("/", 2)[-1])


def test_dashboard_at_1280_and_at_a_phone_width(initargs_sweep, tmp_path):
    page = initargs_sweep / "dashboard.html"
    shots = tmp_path / "shots"
    shots.mkdir()
    assert screenshot(page.as_uri(), shots / "desktop.png", tmp_path / "p1", 1280, 2400) == (1280, 2400)
    phone = phone_page(page, tmp_path, width=390)
    assert screenshot(phone.as_uri(), shots / "phone.png", tmp_path / "p2", 500, 2400) == (500, 2400)
    layout = json.loads(body_data(dump_dom(phone.as_uri(), tmp_path / "p3", width=500), "phone"))
    assert layout["inner"] == 390 and layout["scroll"] <= 390, "nothing wider than the phone"
    first = layout["answers"][0]
    assert first["right"] <= 390 and first["top"] < 400, "the first answer is read at a phone's width, on top"
    assert layout["charts"] and all(c["width"] <= 390 for c in layout["charts"]), layout["charts"]
    speedup = next(c for c in layout["charts"] if c["id"] == "chart-speedup")
    assert {t["name"] for t in json.loads(speedup["traces"])} == {"eager", "default"}
    shutil.copytree(shots, initargs_sweep.parent.parent / "shots", dirs_exist_ok=True)  # to look at them


def thousands(template: dict, sweep_dir, n_seeds: int = 50) -> list[dict]:
    """Result files with the real schema (copied from a real job's result.json), one per point of
    5 modes x 6 sizes x 2 dtypes x n_seeds, with speedups drawn per mode and size; a few failures."""
    rng = random.Random(0)
    sizes = ["tiny", "small", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"]
    plan, made = {}, []
    for mode in COMPILE_MODES:
        for s, size in enumerate(sizes):
            for dtype in ("fp32", "bf16"):
                for seed in range(n_seeds):
                    axes = {
                        "compile.mode": mode,
                        "workload.size": size,
                        "bench.dtype": dtype,
                        "bench.seed": seed,
                    }
                    label = " ".join(f"{k}={v}" for k, v in axes.items())
                    job_id = hashlib.sha256(label.encode()).hexdigest()[:12]
                    speedup = 1.0 if mode == "eager" else (1 + 0.1 * s) * math.exp(rng.gauss(0, 0.05))
                    result = dict(
                        template, job_id=job_id, label=label, axes=axes, mode=mode, size=size, dtype=dtype
                    )
                    result.update(
                        speedup=speedup, speedup_ci_low=speedup * 0.97, speedup_ci_high=speedup * 1.03
                    )
                    result.update(compile_s=0.0 if mode == "eager" else rng.uniform(5, 60))
                    if rng.random() < 0.02:
                        result.update(status="crash", error="planted crash", speedup=None)
                    write_json_atomic(sweep_dir / "jobs" / job_id / RESULT_FILE, result)
                    plan[job_id] = {"label": label, "axes": axes}
                    made.append(result)
    write_json_atomic(sweep_dir / PLAN_FILE, {"name": "thousands", "jobs": plan})
    return made


def split_page(page: str) -> tuple[int, dict[str, int]]:
    """The page's bytes outside its tables' JSON, and each table's JSON bytes by table id."""
    blobs = dict(re.findall(r"<script type='application/json' id='([\w-]+)-data'>(.*?)</script>", page, re.S))
    sizes = {k: len(v) for k, v in blobs.items()}
    return len(page) - sum(sizes.values()), sizes


def test_thousands_of_rows_aggregate_page_and_stay_bounded(initargs_sweep, tmp_path):
    template = next(r for r in results(initargs_sweep).values() if r["mode"] == "default")
    sweep = tmp_path / "thousands"
    made = thousands(template, sweep)
    assert len(made) == 3000
    proc = run_cli(["report", str(sweep)], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = sweep / "dashboard.html"
    big, small = split_page(page.read_text()), split_page((initargs_sweep / "dashboard.html").read_text())
    rows = len(made) - 4
    # The tables' rows are JSON the page pages through; everything else (charts, aggregates) is capped:
    # uncapped charts would add a mark per job to each chart (about 60 bytes each, several charts).
    outside = (big[0] - small[0]) / rows
    assert outside < 200, f"{outside:.0f} bytes per row outside the tables: a chart grows with the sweep"
    table = (big[1]["results"] - small[1]["results"]) / rows
    assert table < 1000, f"{table:.0f} bytes per row of the results table"

    url = page.as_uri() + "#filter=mode=max-autotune%20size=gpt2"
    dom = dump_dom(url, tmp_path / "p1")
    assert 'data-ready="true"' in dom and attr(dom, "js-errors", "style") in (None, "")
    assert attr(dom, "results", "data-total") == "3000"
    wanted = [r for r in made if r["mode"] == "max-autotune" and r["size"] == "gpt2"]
    assert attr(dom, "results", "data-matched") == str(len(wanted)), "the filter in the link"
    assert attr(dom, "results", "data-shown") == "50", "one page of rows"

    # Past MAX_BARS the speedup chart is the geometric mean per mode and size x dtype.
    plotted = traces(dom, "chart-speedup")
    assert [t["name"] for t in plotted] == list(COMPILE_MODES)
    assert sum(len(t["y"]) for t in plotted) <= MAX_BARS
    for t in plotted:
        for x, y in zip(t["x"], t["y"], strict=True):
            size, dtype = x.split(" · ")
            ok = [
                r["speedup"] for r in made if (r["mode"], r["size"], r["dtype"]) == (t["name"], size, dtype)
            ]
            ok = [v for v in ok if v is not None]
            assert y == pytest.approx(float(np.exp(np.mean(np.log(ok)))), rel=1e-9)
    assert all(len(t["x"]) <= MAX_POINTS for t in traces(dom, "chart-compile"))
    assert_no_empty_chart(dom)
    assert "geometric mean" in dom and "interquartile range" in dom

    _, by_mode, _ = grid_rows(dom, "by-mode")
    assert [r[0] for r in by_mode] == list(COMPILE_MODES)
    shot = tmp_path / "thousands.png"
    assert screenshot(page.as_uri(), shot, tmp_path / "p2", 1280, 2400) == (1280, 2400)
    (initargs_sweep.parent.parent / "shots").mkdir(exist_ok=True)
    shutil.copy(shot, initargs_sweep.parent.parent / "shots" / "thousands.png")


def test_the_serving_lines_have_a_section_of_their_own():
    from orchestrator.analysis.answers import Verdict
    from orchestrator.report.verdict_section import sections

    lines = ["serving hf Llama: compile stops paying at batch 64", "  batch 1: use reduce-overhead 2.1x"]
    titles = {title: body for title, body, _ in sections(Verdict(10_000, None, "cold", "", [], None, lines))}
    assert (
        "compile stops paying at batch 64\n  batch 1: use reduce-overhead"
        in titles["Serving, as the batch grows"]
    )
    assert "Serving, as the batch grows" not in {
        t for t, _, _ in sections(Verdict(10_000, None, "cold", "", []))
    }


def test_an_infinite_and_a_nan_parity_error_leave_every_table_filled(initargs_sweep, tmp_path):
    """Issue 59: a buffer miscompile reads `parity_err: inf`; the page once embedded the bare token
    `Infinity` in its JSON, the browser's JSON.parse threw, and "All jobs" and "Failures" stayed empty."""
    sweep = tmp_path / "nonfinite"
    shutil.copytree(initargs_sweep, sweep, ignore=shutil.ignore_patterns("dashboard.html", "wandb"))
    compiled = sorted(p for p in (sweep / "jobs").glob(f"*/{RESULT_FILE}") if '"default"' in p.read_text())
    for path, err in zip(compiled, (math.inf, math.nan), strict=True):
        r = json.loads(path.read_text())
        r.update(status="parity_fail", parity_ok=False, parity_err=err, error=f"planted parity error {err}")
        r["parity_worst"] = [{"tensor": "buffer steps", "err": err, "limit": 1e-4}]
        path.write_text(json.dumps(r))  # Python writes the bare tokens, as an old result may hold them
    proc = run_cli(["report", str(sweep)], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = (sweep / "dashboard.html").read_text()
    for blob in re.findall(r"<script type='application/json' id='[\w-]+-data'>(.*?)</script>", page, re.S):
        json.loads(blob, parse_constant=lambda token: pytest.fail(f"{token} in the page's JSON"))
    dom = dump_dom((sweep / "dashboard.html").as_uri(), tmp_path / "p")
    assert 'data-ready="true"' in dom and attr(dom, "js-errors", "style") in (None, ""), "no JS error"
    headers, rows, _ = grid_rows(dom, "results")
    assert len(rows) == 4, "every job in All jobs"
    _, failures, _ = grid_rows(dom, "failures")
    assert len(failures) == 2 and {"planted parity error inf", "planted parity error nan"} <= {
        c for row in failures for c in row
    }
