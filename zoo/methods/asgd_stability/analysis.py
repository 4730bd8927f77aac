"""Sweeps of on-average model stability and the generalisation gap of simulated ASGD, the rate
statistics the spec gates on, the recipe procedure and its plot.

Claims tested (abstract of Xie & Lei, ICML 2026): for convex smooth objectives the bounds recover
the rate O(1/sqrt(mn)) in balanced regimes, and they depend on the sample size mn, not on the
number of workers m alone. Here "rate" = least-squares slope of log ε against log N (N = mn) over
20 seeds x 4 replaced indices; its standard error is a bootstrap over seeds."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from registry.contract import Procedure
from registry.results import ProcedureOutput

from .params import StabilityReportCli, StabilityReportParams, Sweep  # noqa: F401 - Sweep: its old home
from .simulator import Problem, StabilityResult, log_log_slope, run_coupled

#: one-sided z for a 1% false-fail rate (rate gate) and two-sided z for 1% (m-independence gate)
Z_ONE_SIDED_1PC = 2.326
Z_TWO_SIDED_1PC = 2.576


def per_seed_sq(r: StabilityResult) -> torch.Tensor:
    """Mean over the k replaced indices of ‖Δ‖², one value per seed (the bootstrap unit)."""
    return r.sq_dist.mean(1)


def slope_with_se(xs: list[float], results: list[StabilityResult], n_boot: int = 400, seed: int = 0) -> tuple[float, float]:
    """Slope of log ε on log x and its bootstrap standard error (paired: the same resampled seeds
    for every x, since one seed's runs share w* and data draws across x; ε = sqrt of the mean of
    the resampled per-seed ‖Δ‖²)."""
    per = [per_seed_sq(r) for r in results]
    slope = log_log_slope(xs, [float(p.mean().sqrt()) for p in per])
    g = torch.Generator().manual_seed(seed)
    boots = []
    for _ in range(n_boot):
        pick = torch.randint(0, per[0].numel(), (per[0].numel(),), generator=g)
        eps = [float(p[pick].mean().sqrt()) for p in per]
        if min(eps) > 0:
            boots.append(log_log_slope(xs, eps))
    return slope, float(torch.tensor(boots).std()) if len(boots) > 1 else float("nan")


def _row(x: Any, r: StabilityResult) -> dict[str, Any]:
    p = per_seed_sq(r)
    se_eps = float(p.std() / math.sqrt(p.numel()) / (2 * max(r.stability, 1e-300))) if p.numel() > 1 else float("nan")
    return {"x": x, "stability": r.stability, "stability_se": se_eps, "gap": r.gap, "gap_se": r.gap_stderr,
            "train": float(r.train.mean()), "test": float(r.test.mean()), **{k: r.config[k] for k in ("N", "m", "n", "T", "eta", "delay", "participation")}}


@dataclass
class StabilityOutput(ProcedureOutput):
    """What :class:`StabilityReport` returns (attribute, key and index access, ``to_tuple()``).

    * ``sweep`` -- what varied (``N``, ``m``, ``m-fixed-n``, ``delay``, ``participation``);
    * ``rows`` -- one dict per swept value ``x``: ``stability`` ε and ``stability_se``, ``gap`` and
      ``gap_se``, mean ``train`` / ``test`` loss, and the run's ``N``, ``m``, ``n``, ``T``, ``eta``,
      ``delay``, ``participation``;
    * ``config`` -- the parameters used (``Params.model_dump()``);
    * ``slope`` / ``slope_se`` -- least-squares slope of log ε on log N (log m for the ``m`` sweep)
      and its bootstrap s.e.; only for the N / m sweeps with more than one value, else ``None``
      (and then not a key), like the gates below;
    * ``rate_consistent`` -- N and m-fixed-n sweeps: slope <= -1/2 + 2.326 s.e. (ε = O(1/sqrt(mn)));
    * ``m_independent`` -- m sweep at fixed N: |slope| <= 2.576 s.e.
    """

    sweep: str
    rows: list[dict[str, Any]]
    config: dict[str, Any]
    slope: float | None = None
    slope_se: float | None = None
    rate_consistent: bool | None = None
    m_independent: bool | None = None


class StabilityReport(Procedure):
    """On-average model stability ε and generalisation gap of ASGD along one sweep (N = mn, m at
    fixed N, m at fixed n, delay, participation), with the rate statistics.

    Returns a :class:`StabilityOutput`: ``rows`` (one per swept value), ``slope`` / ``slope_se`` (log ε vs log of the swept
    quantity: N for ``N`` and ``m-fixed-n``, m for ``m``), the gate verdicts and ``config``."""

    kind = "analysis"

    Params = StabilityReportParams

    CliInputs = StabilityReportCli

    def __call__(self, *, seed: int = 0, progress: bool = False) -> StabilityOutput:
        # per-call parameters (pipe(seed=0, Ns=(32, 64))) arrive as self.params through Procedure.with_params
        p = self.params
        prob = Problem(p.problem, d=p.d, noise=p.noise)
        seeds = [seed * 100_003 + s for s in range(p.seeds)]
        common = dict(k=p.k, eta0=p.eta0, n_test=p.n_test, seeds=seeds, device=self.device, progress=progress)
        if p.sweep == "N":
            xs = list(p.Ns)
            res = [run_coupled(prob, N=N, m=p.m, delay=p.delay, participation=p.participation, **common) for N in xs]
        elif p.sweep == "m":
            xs = list(p.ms)
            res = [run_coupled(prob, N=p.N, m=m, delay=p.delay, participation=p.participation, **common) for m in xs]
        elif p.sweep == "m-fixed-n":
            xs = list(p.ms)
            res = [run_coupled(prob, N=p.n * m, m=m, delay=p.delay, participation=p.participation, **common) for m in xs]
        elif p.sweep == "delay":
            xs = list(p.delays)
            res = [run_coupled(prob, N=p.N, m=p.m, delay=dl, participation=p.participation, **common) for dl in xs]
        else:
            xs = list(p.participations)
            res = [run_coupled(prob, N=p.N, m=p.m, delay=p.delay, participation=pt, **common) for pt in xs]
        out = StabilityOutput(sweep=p.sweep, rows=[_row(x, r) for x, r in zip(xs, res)], config=p.model_dump())
        if p.sweep in ("N", "m", "m-fixed-n") and len(xs) > 1:
            along = [float(r.config["N"]) for r in res] if p.sweep != "m" else [float(m) for m in xs]
            slope, se = slope_with_se(along, res)
            out.slope, out.slope_se = slope, se
            if p.sweep in ("N", "m-fixed-n"):  # ε = O(1/sqrt(N)): not significantly shallower than -1/2
                out.rate_consistent = bool(slope <= -0.5 + Z_ONE_SIDED_1PC * se)
            else:  # at fixed N, ε does not depend on m (balanced participation)
                out.m_independent = bool(abs(slope) <= Z_TWO_SIDED_1PC * se)
        return out

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"Ns": (32, 64), "ms": (1, 2), "N": 64, "n": 16, "seeds": 3, "k": 2, "n_test": 64,
                "delays": ("none", "uniform:2"), "participations": ("balanced", "one-slow:4")}

    def run_cli(self, inputs: Any, seed: int) -> str:
        rep = self(seed=seed, progress=True)
        path = plot_report(rep, inputs.out if inputs is not None else "asgd-stability.png")
        return format_report(rep) + f"\nwrote {path}"


def format_report(rep: dict[str, Any]) -> str:
    """A table: swept value, ε (± s.e.), gap (± s.e.), train / test loss, then the gates."""
    lines = [f"{'sweep=' + rep['sweep']:>16} |     N |  m | τ-pmf        | ε (on-avg stab.)   | gap (test-train)    | train"]
    for r in rep["rows"]:
        lines.append(f"{str(r['x']):>16} | {r['N']:5d} | {r['m']:2d} | {r['delay']:<12} | {r['stability']:.4g} ± {r['stability_se']:.2g}"
                     f" | {r['gap']:+.4f} ± {r['gap_se']:.4f} | {r['train']:.4f}")
    if "slope" in rep:
        lines.append(f"slope of log ε: {rep['slope']:+.3f} ± {rep['slope_se']:.3f} (bootstrap s.e.)")
    if "rate_consistent" in rep:
        lines.append(f"O(1/sqrt(mn)) rate: {'consistent' if rep['rate_consistent'] else 'NOT consistent'} "
                     f"(slope <= -0.5 + {Z_ONE_SIDED_1PC} s.e.; 1% false-fail rate at slope -0.5)")
    if "m_independent" in rep:
        lines.append(f"depends on mn, not m: {'yes' if rep['m_independent'] else 'NO'} "
                     f"(|slope vs m| <= {Z_TWO_SIDED_1PC} s.e.; 1% false-fail rate)")
    return "\n".join(lines)


def plot_report(rep: dict[str, Any], out: str) -> str:
    """ε and the gap against the swept value (log-log for numeric sweeps) to ``out`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = rep["rows"]
    numeric = all(isinstance(r["x"], (int, float)) for r in rows)
    xs = [r["x"] if numeric else i for i, r in enumerate(rows)]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    axes[0].errorbar(xs, [r["stability"] for r in rows], yerr=[r["stability"] * 2 * r["stability_se"] for r in rows], marker="o")
    axes[0].set_ylabel("on-average model stability ε")
    axes[1].errorbar(xs, [r["gap"] for r in rows], yerr=[r["gap_se"] for r in rows], marker="o")
    axes[1].axhline(0, color="grey", lw=0.5)
    axes[1].set_ylabel("generalisation gap F − F_S")
    for ax in axes:
        ax.set_xlabel(rep["sweep"])
        if numeric:
            ax.set_xscale("log")
        else:
            ax.set_xticks(xs, [str(r["x"]) for r in rows], rotation=20)
    if numeric:
        axes[0].set_yscale("log")
        if rep["sweep"] in ("N", "m-fixed-n"):
            x0, e0 = rows[0]["N"], rows[0]["stability"]
            ns = [r["N"] for r in rows]
            axes[0].plot(xs, [e0 * math.sqrt(x0 / n) for n in ns], "--", color="grey", label="∝ 1/sqrt(mn)")
            axes[0].legend()
    title = f"ASGD ({rep['config']['problem']}): sweep {rep['sweep']}"
    if "slope" in rep:
        title += f", slope {rep['slope']:+.2f} ± {rep['slope_se']:.2f}"
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
