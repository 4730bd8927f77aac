"""``zoo metrics``: the paper's numbers beside ours (spec value and last measurement), as a table,
JSON or a PNG. The pairing rule and the measurement store are :mod:`registry.metrics_store`.

The table keeps the strict pairing rule (same name, dataset and setting on one line). The plot groups
by metric name and *setting*, so the paper's bar stands beside ours and the last measurement even when
our number is measured on a stand-in dataset (a toy for the paper's benchmark); each bar is labelled with
its dataset, and a cluster whose paper and measured datasets differ says so ("≠ data").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from registry.metrics_store import Row, rows
from registry.spec import Spec

HEADER = ("metric", "dataset", "setting", "paper", "ours (spec)", "last measured")


def _num(x: float) -> str:
    return f"{x:.4g}"


def setting_text(setting: dict[str, Any]) -> str:
    """A metric's ``setting:`` as ``k=v, k=v`` (``-`` when empty): what tells same-named metrics apart."""
    return ", ".join(f"{k}={v}" for k, v in setting.items()) or "-"


def table_rows(spec_rows: list[Row]) -> list[list[str]]:
    """One row per (name, dataset, setting): metric, dataset, setting, paper, ours (spec value ± tolerance
    and variant), last measured (value, verdict, date)."""
    body = []
    for r in spec_rows:
        paper = " / ".join(_num(m.value) + (f" {m.unit}" if m.unit else "") for m in r.reported) or "-"
        ours = " / ".join(f"{_num(m.value)} ±{m.tolerance:g} ({m.variant})" for m in r.reproduced) or "-"
        if r.measured:
            last = " / ".join(f"{_num(x['value'])} {x['status']} {str(x['date'])[:10]}" for x in r.measured)
        else:
            last = "never (zoo check)" if r.reproduced else "-"
        body.append([r.name, r.dataset, setting_text(r.setting), paper, ours, last])
    return body


def summary(spec_rows: list[Row]) -> str:
    """How many rows pair (paper and ours), are paper only, ours only."""
    paired = sum(r.paired for r in spec_rows)
    paper_only = sum(bool(r.reported and not r.reproduced) for r in spec_rows)
    ours_only = sum(bool(r.reproduced and not r.reported) for r in spec_rows)
    return (f"{paired} paired (paper and ours), {paper_only} paper only, {ours_only} ours only"
            " -- a pair is the same name + dataset + setting")


@dataclass
class Bar:
    """One bar of the plot: the paper's number, ours (the spec's value, with its tolerance) or the last measurement."""

    kind: str  # paper | ours | measured
    dataset: str
    value: float
    tolerance: float = 0.0
    status: str = ""
    unit: str = ""


@dataclass
class Cluster:
    """The bars of one metric name and setting, side by side."""

    name: str
    setting: dict[str, Any]
    bars: list[Bar] = field(default_factory=list)

    @property
    def cross_dataset(self) -> bool:
        """The paper's bar and ours/measured stand on different datasets (a stand-in for the paper's)."""
        paper = {b.dataset for b in self.bars if b.kind == "paper"}
        ours = {b.dataset for b in self.bars if b.kind != "paper"}
        return bool(paper and ours and paper != ours)


def clusters(spec_rows: list[Row]) -> list[Cluster]:
    """Bars grouped by metric name and setting (spec order): every reported number, every reproduced one
    and its last measurement. Rows that pair strictly come first in their cluster."""
    from registry.metrics_store import setting_key

    out: dict[tuple[str, str], Cluster] = {}
    for r in sorted(spec_rows, key=lambda r: not r.paired):
        c = out.setdefault((r.name, setting_key(r.setting)), Cluster(r.name, dict(r.setting)))
        c.bars += [Bar("paper", r.dataset, m.value, unit=m.unit or "") for m in r.reported]
        for m in r.reproduced:
            c.bars.append(Bar("ours", r.dataset, m.value, m.tolerance or 0.0, unit=m.unit or ""))
            c.bars += [Bar("measured", r.dataset, float(x["value"]), status=str(x.get("status", "")), unit=m.unit or "")
                       for x in r.measured if x.get("variant") == m.variant]
    order = {name: i for i, name in enumerate(dict.fromkeys(r.name for r in spec_rows))}
    return sorted(out.values(), key=lambda c: order[c.name])


COLOURS = {"paper": "#4c72b0", "ours": "#dd8452", "measured": "#55a868"}
LABELS = {"paper": "paper", "ours": "ours (spec)", "measured": "last measured"}


def plot(spec: Spec, path: str, spec_rows: list[Row] | None = None) -> str:
    """A PNG: one panel per metric name; in it one cluster per setting with the paper's bar(s), ours (the spec
    value, with its tolerance) and the last measurement side by side, each labelled with its dataset.
    Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec_rows = rows(spec) if spec_rows is None else spec_rows
    groups = clusters(spec_rows)
    if not groups:
        raise ValueError(f"{spec.name} declares no metrics")
    names = list(dict.fromkeys(c.name for c in groups))
    width = 0.8
    widest = max(sum(len(c.bars) + 1 for c in groups if c.name == n) for n in names)
    height = 3.0 * len(names) + 0.4
    fig, axes = plt.subplots(len(names), 1, figsize=(max(6.0, 0.45 * widest + 2), height), squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        x, ticks, tick_labels, seen = 0.0, [], [], set()
        for c in (c for c in groups if c.name == name):
            start = x
            for b in c.bars:
                label = None if b.kind in seen else LABELS[b.kind]
                seen.add(b.kind)
                bars = ax.bar(x, b.value, width=width, color=COLOURS[b.kind], label=label,
                              yerr=b.tolerance if b.kind == "ours" and b.tolerance else None, capsize=2,
                              edgecolor="#c44e52" if b.status == "FAIL" else None, linewidth=2 if b.status == "FAIL" else 0)
                ax.bar_label(bars, labels=[_num(b.value) + (f" {b.unit}" if b.unit else "") + (f" {b.status}" if b.status else "")],
                             fontsize=6, padding=1)
                ticks.append(x)
                tick_labels.append(b.dataset)
                x += 1.0
            note = setting_text(c.setting) + (" (≠ data)" if c.cross_dataset else "")
            ax.annotate(note, ((start + x - 1.0) / 2, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                        fontsize=7, annotation_clip=False)
            x += 1.0  # a gap between clusters
        ax.set_xticks(ticks)
        ax.set_xticklabels(tick_labels, fontsize=6, rotation=30, ha="right")
        ax.set_xlim(-0.8, x - 1.2)
        ax.set_title(name, fontsize=9, pad=14)
        ax.legend(fontsize=7)
    fig.suptitle(f"{spec.name}: paper vs ours (bars labelled with their dataset)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / height))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
