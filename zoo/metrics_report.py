"""``zoo metrics``: the paper's numbers beside ours (spec value and last measurement), as a table,
JSON or a PNG. The pairing rule and the measurement store are :mod:`registry.metrics_store`."""
from __future__ import annotations

from typing import Any

from registry.metrics_store import Row, rows
from registry.spec import Spec


def _num(x: float) -> str:
    return f"{x:.4g}"


def _setting(setting: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in setting.items()) or "-"


def table(spec: Spec, spec_rows: list[Row] | None = None) -> list[str]:
    """Aligned text lines: metric, dataset, setting, paper, ours (spec value ± tolerance), last measured."""
    spec_rows = rows(spec) if spec_rows is None else spec_rows
    header = ("metric", "dataset", "setting", "paper", "ours (spec)", "last measured")
    body = []
    for r in spec_rows:
        paper = " / ".join(_num(m.value) + (f" {m.unit}" if m.unit else "") for m in r.reported) or "-"
        ours = " / ".join(f"{_num(m.value)} ±{m.tolerance:g} ({m.variant})" for m in r.reproduced) or "-"
        if r.measured:
            last = " / ".join(f"{_num(x['value'])} {x['status']} {x['date'][:10]}" for x in r.measured)
        else:
            last = "never (zoo check)" if r.reproduced else "-"
        body.append((r.name, r.dataset, _setting(r.setting), paper, ours, last))
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*header).rstrip(), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*row).rstrip() for row in body]
    paired = sum(r.paired for r in spec_rows)
    paper_only = sum(bool(r.reported and not r.reproduced) for r in spec_rows)
    ours_only = sum(bool(r.reproduced and not r.reported) for r in spec_rows)
    out.append(f"{paired} paired (paper and ours), {paper_only} paper only, {ours_only} ours only"
               " -- a pair is the same name + dataset + setting")
    return out


def plot(spec: Spec, path: str, spec_rows: list[Row] | None = None) -> str:
    """A PNG: one panel per metric name; per dataset/setting the paper's bar, ours (spec value with its
    tolerance) and the last measurement. Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec_rows = rows(spec) if spec_rows is None else spec_rows
    names = list(dict.fromkeys(r.name for r in spec_rows))
    if not names:
        raise ValueError(f"{spec.name} declares no metrics")
    widest = max(sum(r.name == n for r in spec_rows) for n in names)
    fig, axes = plt.subplots(len(names), 1, figsize=(max(6.0, 0.6 * widest + 2), 2.8 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        group = [r for r in spec_rows if r.name == name]
        xs = range(len(group))
        bars = {
            "paper": [r.reported[0].value if r.reported else float("nan") for r in group],
            "ours (spec)": [r.reproduced[0].value if r.reproduced else float("nan") for r in group],
            "last measured": [r.measured[0]["value"] if r.measured else float("nan") for r in group],
        }
        tol = [r.reproduced[0].tolerance or 0.0 if r.reproduced else 0.0 for r in group]
        for k, (label, values) in enumerate(bars.items()):
            ax.bar([x + (k - 1) * 0.27 for x in xs], values, width=0.27, label=label,
                   yerr=tol if label == "ours (spec)" else None, capsize=2)
        ax.set_xlim(-0.7, len(group) - 0.3)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r.dataset + ("\n" + _setting(r.setting) if r.setting else "") for r in group],
                           rotation=30 if len(group) > 4 else 0, ha="right" if len(group) > 4 else "center", fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(f"{spec.name}: paper vs ours", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / len(names)))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
