"""The result's types drive its documentation and its table: every field docs/results.md documents is
a field of the types (core/result.py), and every field of the types is documented; a real result
file has exactly the fields its sections declare."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from orchestrator.core.result import FIELDS, JobResult, Parity, Speed, header, result_fields
from orchestrator.results.table import TABLE_COLUMNS

DOC = ROOT / "docs" / "results.md"


def documented_fields() -> set[str]:
    """The fields in the first column of docs/results.md's tables, up to the verdict's section (the
    keys of verdict.json, not of a result). `{eager,compiled}_x` is both sides; `_y` after it is the
    same sides again (`{eager,compiled}_p50_ms`, `_p90_ms`)."""
    text = DOC.read_text().split("\n## Verdict")[0]
    fields: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        sides: list[str] = []
        for token in re.findall(r"`([^`]+)`", line.split("|")[1]):
            if m := re.fullmatch(r"\{([\w,]+)\}(\w+)", token):
                sides = m.group(1).split(",")
                fields |= {side + m.group(2) for side in sides}
            elif token.startswith("_") and sides:
                fields |= {side + token for side in sides}
            else:
                fields.add(token)
    return fields


def test_the_doc_parser_reads_sides_and_their_continuations():
    assert {"eager_p50_ms", "compiled_p90_ms", "eager_p99_ms", "speedup"} <= documented_fields()


def test_every_documented_field_is_a_field_of_the_types_and_vice_versa():
    documented = {f for f in documented_fields() if "/" not in f and "." not in f} - set(TABLE_COLUMNS)
    declared = set(FIELDS)
    assert not documented - declared, f"documented, not in core/result.py: {sorted(documented - declared)}"
    assert not declared - documented, f"in core/result.py, not documented: {sorted(declared - documented)}"


def test_a_result_dict_has_exactly_the_fields_of_its_sections():
    r = JobResult(speed=Speed(speedup=1.5), parity=Parity(parity_ok=True)).to_dict()
    declared = {rf.key for rf in result_fields() if rf.section in ("identity", "outcome", "speed", "parity")}
    assert set(r) == declared, "a section that ran has all its fields; one that did not, none"
    assert r["speedup"] == 1.5 and r["eager_ms"] is None and "graph_breaks" not in r


def test_headers_come_from_the_types_and_an_unknown_key_fails():
    assert header("eager_ms") == "eager ms" and header("strategy") == "parallel"
    with pytest.raises(KeyError):
        header("no_such_field")


def test_a_real_result_file_has_only_declared_fields(initargs_sweep):
    from conftest import results

    for r in results(initargs_sweep).values():
        assert set(r) <= set(FIELDS), sorted(set(r) - set(FIELDS))


def test_a_result_reads_back_as_it_was_written_and_old_files_still_read():
    """Typed both ways: every section filled, written and read back, is the same row; every committed
    result under benchmarks/ (older schema versions) reads, keeping each value it holds."""
    import json

    from orchestrator.core.result import SCHEMA_VERSION, SECTION_TYPES, CompileMetrics

    full = JobResult(**{name: cls() for name, cls in SECTION_TYPES.items()}, timings={"eager_ms": [1.0]})
    full.compile.metrics = CompileMetrics(compile_frames=2)  # an inline part, merged into its section
    row = full.to_dict()
    assert JobResult.from_dict(row).to_dict() == row
    assert row["schema_version"] == SCHEMA_VERSION and row["compile_frames"] == 2
    rows = [
        json.loads(line)
        for path in sorted((ROOT / "benchmarks").rglob("results.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert len(rows) >= 20, "the committed benchmark results"
    for old in rows:
        back = JobResult.from_dict(old)
        assert back.identity.schema_version == (old.get("schema_version") or 1)
        written = back.to_dict()
        assert all(written.get(k) == v for k, v in old.items() if k != "schema_version"), old["job_id"]
    assert any("explain_break_count" in JobResult.from_dict(old).legacy for old in rows), "dropped keys kept"


def test_the_answers_doc_sections_are_their_types():
    """docs/results.md's verdict and upgrade sections document exactly the fields of each type of
    analysis/answers.py: a table follows the line that names its type in backticks and parentheses."""
    import dataclasses

    from orchestrator.analysis import answers

    text = DOC.read_text().split("\n## Verdict")[1]
    documented: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        if m := re.search(r"\(`([A-Z]\w+)`\)", line):
            current = documented.setdefault(m.group(1), set())
        elif line.startswith("| `") and current is not None:
            current |= set(re.findall(r"`([^`]+)`", line.split("|")[1]))
    types = {
        name: cls
        for name, cls in vars(answers).items()
        if dataclasses.is_dataclass(cls) and cls.__module__ == answers.__name__
    }
    assert set(documented) == set(types), "every answer type has its section, and only those"
    for name, cls in types.items():
        declared = {f.name for f in dataclasses.fields(cls)}
        assert documented[name] == declared, (name, documented[name] ^ declared)


def test_an_answer_reads_back_as_it_was_written_and_an_old_verdict_still_reads():
    from orchestrator.analysis.answers import (
        Comparison,
        FigureChange,
        ModelVerdict,
        Suite,
        SuiteFlag,
        SuiteSetting,
        Upgrade,
        UpgradePair,
        UpgradeWord,
        Verdict,
    )

    v = Verdict(
        models=[ModelVerdict(model="m", risks=["r"])],
        suite=Suite(2, [SuiteSetting("default")], [SuiteFlag("m", "default", "f")]),
    )
    assert Verdict.from_dict(v.to_dict()) == v
    pair = UpgradePair(model="m", figures={"speedup": FigureChange(1.0, 1.1, 0.1, [0.0, 0.2], "unchanged")})
    u = Upgrade(
        ["a", "b"],
        {"a": "2.11", "b": "2.13"},
        [Comparison("a", "b", [pair], [UpgradeWord("m", "faster", "x")])],
    )
    assert Upgrade.from_dict(u.to_dict()) == u
    # A verdict.json written before the types (no `jobs`, `measurable` or `distrust`; a key since dropped).
    model = {"model": "m", "choice": "eager", "outcome": "slower", "why": "w", "failed": [], "gone": 1}
    old = {"steps": 5, "serve_s": None, "cache": "warm", "shared": "", "suite": None, "models": [model]}
    (m,) = Verdict.from_dict(old).models
    assert (m.outcome, m.distrust, m.jobs) == ("slower", [], 0) and Verdict.from_dict(old).cache == "warm"


READER_PACKAGES = ("analysis", "report", "results", "cli")
# Keys read in those packages that are spelled like a result field but name something else.
NOT_RESULT_FIELDS = {
    ("results/present.py", "axes"): "plan.json's axes of a job",
    ("cli/commands.py", "axes"): "plan.json's axes of a job",
    ("cli/commands.py", "label"): "plan.json's and submitted.json's label of a job",
    ("cli/commands.py", "job_id"): "submitted.json's scheduler job id",
    ("analysis/answers.py", "path"): "verdict.json's stacked follow-ups of a model",
}


def test_readers_name_result_fields_through_the_types():
    """In the readers, a result field is named `COL.<field>` (checked against the types when read), never
    as a string subscript or `.get` key; and every `COL.<name>` anywhere in the package is a field."""
    import ast

    from orchestrator.core.result import FIELDS

    package = ROOT / "orchestrator"
    spelled, unknown = [], []
    for path in sorted(package.rglob("*.py")):
        rel = str(path.relative_to(package))
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "COL"
            ):
                if node.attr not in FIELDS:
                    unknown.append(f"{rel}:{node.lineno} COL.{node.attr}")
            if not rel.startswith(READER_PACKAGES):
                continue
            key = None
            if isinstance(node, ast.Subscript):
                key = node.slice
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                key = node.args[0] if node.func.attr in ("get", "set_index", "groupby") else None
            elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
                key = node.left
            if (
                isinstance(key, ast.Constant)
                and key.value in FIELDS
                and (rel, key.value) not in NOT_RESULT_FIELDS
            ):
                spelled.append(f"{rel}:{node.lineno} {key.value!r}")
    assert not unknown, f"COL names no result field: {unknown}"
    assert not spelled, f"result fields spelled as strings in readers (use COL.<field>): {spelled}"
