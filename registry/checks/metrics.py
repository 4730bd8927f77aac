"""Reproduced metrics: each ``kind: reproduced`` metric with a ``check:`` is re-measured on its variant and must
fall within its tolerance (a ``slow: true`` one only under ``--slow``); the value is kept in
:data:`~registry.checks.base.measured` for the metrics store."""
from __future__ import annotations

from typing import Any

from ..metrics_store import record_key
from .base import Check, Skipped, SpecUnderCheck, family, measured


@family
def reproduced_metrics(s: SpecUnderCheck) -> list[Check]:
    checks: list[Check] = []
    for m in s.spec.metrics:
        if m.kind == "reproduced":
            suffix = f"metric[{record_key(m)}]"  # the setting tells apart same-named metrics
            checks.append(s.check(suffix, lambda m=m, mid=f"{s.name}::{suffix}": _remeasure(s, m, mid), slow=m.slow))
    return checks


def _remeasure(s: SpecUnderCheck, m: Any, mid: str) -> None:
    from ..resolve import resolve

    spec = s.spec
    if m.check is None:
        raise Skipped(f"no check: function; reproduce with `{m.command}`")
    if m.slow and not s.slow:
        raise Skipped(f"slow; run `zoo check --slow {s.name}` or `{m.command}`")
    if m.variant not in s.cpu:
        raise Skipped(f"variant {m.variant} does not run on cpu")
    refusal = spec.hardware[m.variant].refusal(m.variant)
    if refusal:
        raise Skipped(refusal)
    resolve(m.check, kind="metric_check")
    value = float(s.pipeline(m.variant).evaluate(m.check, **m.check_params))
    measured[mid] = (spec, m, value, s.file, s.target.device)
    assert abs(value - m.value) <= m.tolerance, f"{m.name}: measured {value:.6g}, spec says {m.value:g} ± {m.tolerance:g}"
