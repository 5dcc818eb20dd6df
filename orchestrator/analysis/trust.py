"""The verdict's trust gate: when the measurements of a model cannot carry an answer, the verdict
says so, with the reason and what to do, instead of naming a setting.

A model's answer is not trusted when
- its eager-against-eager control is biased: the control's 95% CI lies wholly beyond
  `verdict.control_tolerance` of 1 (both sides are the same model: anything else is the harness or
  the host, and it biases every speedup of the model alike);
- a job of the model was not alone on its device or host (`iso_ok` false: a foreign process, a
  throttled GPU, a busy host);
- the named setting's speedup CI is wider than `verdict.max_ci_width` of its speedup (too few
  repetitions or processes for the noise there was).
"""

from __future__ import annotations

import pandas as pd

from orchestrator.config.schema import VerdictConfig
from orchestrator.core.numbers import is_false, number, text
from orchestrator.core.result import COL
from orchestrator.results.present import ci_text

REMEDIES = {
    "control": "run on an idle host, one job at a time (launcher.max_parallel=1)",
    "isolation": "run on an idle host or GPU, one job at a time (launcher.max_parallel=1)",
    "width": "more repetitions or processes (bench.repeats=20, bench.processes=3)",
}


def distrust(
    part: pd.DataFrame, row: pd.Series, vc: VerdictConfig, judged: tuple[float | None, ...] | None = None
) -> list[tuple[str, str]]:
    """(kind, reason) for each reason not to trust this model's answer; [] when it stands.
    `part` holds the model's jobs; `row` is the setting the answer would name; `judged` the speedup
    and CI the answer is judged on where not the row's headline (generate's whole requests)."""
    out: list[tuple[str, str]] = []
    controls = part[(part[COL.mode] == "eager") & (part[COL.status] == "ok")]
    tol = vc.control_tolerance
    for _, c in controls.iterrows():
        low, high = number(c.get(COL.speedup_ci_low)), number(c.get(COL.speedup_ci_high))
        if low is not None and high is not None and (low > 1 + tol or high < 1 - tol):
            reads = f"{number(c.get(COL.speedup)):.3g}x [{ci_text(low, high)}]"
            out.append(("control", f"the eager-against-eager control reads {reads}, beyond 1 +/- {tol:.0%}"))
    busy = [r for _, r in part.iterrows() if is_false(r.get(COL.iso_ok))]
    if busy:
        note = text(busy[0].get(COL.iso_note), "not alone")
        out.append(("isolation", f"{len(busy)} of {len(part)} job(s) not alone when timed ({note})"))
    speedup, low, high = judged or (
        number(row.get(k)) for k in (COL.speedup, COL.speedup_ci_low, COL.speedup_ci_high)
    )
    if speedup and low is not None and high is not None and (high - low) / speedup > vc.max_ci_width:
        width = f"{(high - low) / speedup:.0%}"
        out.append(
            (
                "width",
                f"the speedup's CI [{ci_text(low, high)}] spans {width} of it, over {vc.max_ci_width:.0%}",
            )
        )
    return out


def remedy(reasons: list[tuple[str, str]]) -> str:
    """What to do, once per kind of reason."""
    return "; ".join(dict.fromkeys(REMEDIES[kind] for kind, _ in reasons))
