"""Benchmark of ``egt``: min–max fine-tuning vs ERM vs the proportion baseline (and group-DRO) on the
closed-form Gaussian toy, beside the shared note's numbers and the exact min–max solution; then the
digits proxy (per-digit held-out denoising loss and classifier recall, before/after ERM, min–max and
group-DRO fine-tuning of the shared DiT). Between them, the note's §6b mixture DDPM
(per-group excess denoising loss against the analytic optimal denoiser). Writes ``egt.png`` (per-group
KL vs step), ``egt-ddpm.png`` (per-group excess vs step) and ``egt-digits.png`` (per-digit training loss vs step). Run as ``python tools/bench_egt.py`` or
``zoo bench egt [--quick]``."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark
from zoo.common.bench_output import write_outputs

from .procedures import DigitsFairness, GaussianFairness, MixtureDDPMFairness
from .report import format_ddpm, format_digits, format_gaussian, plot_ddpm, plot_digits, plot_history


def run(quick: bool = False, digits: bool = True, digits_steps: int = 300, seed: int = 0, gaussian_steps: int = 3000,
        ddpm: bool = True) -> dict[str, Any]:
    """The Gaussian recipes (exact loss, 3,000 SGD steps; sampled-loss ablations); with ``ddpm`` the
    §6b mixture DDPM (ERM, min–max on excess and on raw losses, group-DRO; ``quick``: 1,000 + 500
    steps); with ``digits`` the three digits fine-tunings (``digits_steps`` Adam steps each; ``quick``:
    30 steps, 10 samples per class)."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"gaussian": {}, "gaussian_sampled": {}, "ddpm": {}, "digits": {}}
    for alg in ("erm", "proportion", "minmax", "group-dro"):
        out["gaussian"][alg] = dict(GaussianFairness({}, GaussianFairness.Params(algorithm=alg, steps=gaussian_steps))(seed=seed, progress=True))
    for alg in ("minmax", "group-dro"):
        out["gaussian_sampled"][alg] = dict(GaussianFairness({}, GaussianFairness.Params(algorithm=alg, loss="sampled", steps=gaussian_steps))(seed=seed, progress=True))
    if ddpm:
        size = dict(pretrain_steps=1000, steps=500) if quick else {}
        for name, kw in (("erm", {"algorithm": "erm"}), ("minmax", {"algorithm": "minmax"}), ("minmax-raw", {"algorithm": "minmax", "select_on": "raw"}),
                         ("group-dro", {"algorithm": "group-dro"})):
            out["ddpm"][name] = dict(MixtureDDPMFairness({}, MixtureDDPMFairness.Params(**kw, **size))(seed=seed))
    if digits:
        import zoo

        dit = zoo.load("egt", variant="toy").models["dit"]  # the shared DiT (declared in specs/digits.yaml); recipes copy it
        steps, per_class = (30, 10) if quick else (digits_steps, 50)
        for alg in ("erm", "minmax", "group-dro"):
            proc = DigitsFairness({"dit": dit}, DigitsFairness.Params(algorithm=alg, steps=steps, per_class=per_class))
            out["digits"][alg] = dict(proc(seed=seed, progress=True))
    out["seconds"] = time.perf_counter() - t0
    return out


def table(res: dict[str, Any]) -> str:
    parts = ["## Gaussian toy (closed-form KL; note §6a: A ~ N(·, 0.25 I), p_A = 0.9; B ~ N(·, [[4, 1.2], [1.2, 1]]), p_B = 0.1)", "",
             format_gaussian(res["gaussian"]), "", "### Ablation: sampled per-group loss (minibatch NLL − H(P_a), 64 draws per group)", "",
             format_gaussian(res["gaussian_sampled"])]
    if res.get("ddpm"):
        parts += ["", "## Mixture DDPM (note §6b): per-group held-out excess E‖ε_θ − ε*_a‖² (0 iff optimal; analytic mixture denoiser)", "",
                  format_ddpm(res["ddpm"])]
    if res["digits"]:
        parts += ["", "## Digits proxy (shared DiT; digit classes as groups; NOT divergences: held-out ε-MSE and classifier recall)", "",
                  format_digits(res["digits"])]
    return "\n".join(parts)


def plot(res: dict[str, Any], path: Path) -> Path:
    """``egt.png``: per-group KL vs step for every Gaussian run; ``egt-digits.png`` beside it."""
    p = plot_history({**res["gaussian"], **{f"{k} sampled": v for k, v in res["gaussian_sampled"].items()}}, path)
    if res["digits"]:
        plot_digits(res["digits"], Path(path).with_name("egt-digits.png"))
    if res.get("ddpm"):
        plot_ddpm(res["ddpm"], Path(path).with_name("egt-ddpm.png"))
    return p


@benchmark
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench_egt")
    ap.add_argument("--quick", action="store_true", help="digits: 30 fine-tuning steps and 10 samples per class (the Gaussian runs are unchanged)")
    ap.add_argument("--no-digits", action="store_true", help="skip the digits DiT proxy")
    ap.add_argument("--no-ddpm", action="store_true", help="skip the mixture DDPM (note §6b)")
    ap.add_argument("--digits-steps", type=int, default=300, help="Adam steps per digits fine-tuning (default 300)")
    ap.add_argument("--gaussian-steps", type=int, default=3000, help="SGD steps per Gaussian fine-tuning (default 3000, the note's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH", help="write every number as JSON")
    ap.add_argument("--out-dir", default=".", help="folder for egt.png and egt-digits.png")
    a = ap.parse_args(argv)
    res = run(a.quick, not a.no_digits, a.digits_steps, a.seed, a.gaussian_steps, not a.no_ddpm)
    write_outputs(res, table(res), plot, a.out_dir, "egt.png", a.json)
    return 0
