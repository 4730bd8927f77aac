"""Benchmark of ``egt``: min–max fine-tuning vs ERM vs the proportion baseline (and group-DRO) on the
closed-form Gaussian toy, beside the shared note's numbers and the exact min–max solution; then the
digits proxy (per-digit held-out denoising loss and classifier recall, before/after ERM, min–max and
group-DRO fine-tuning of the shared DiT at equal back-propagated rows, on several fine-tuning seeds, with the
paired arm − ERM differences). Between them, the note's §6b mixture DDPM
(per-group excess denoising loss against the analytic optimal denoiser). Writes ``egt.png`` (per-group
KL vs step), ``egt-ddpm.png`` (per-group excess vs step) and ``egt-digits.png`` (per-digit training loss vs step). Run as
``zoo bench egt [--quick] [--no-digits] [--no-ddpm] [--out-dir D]``."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from registry.contract import benchmark
from zoo.common.spread import spread

from .params import BenchOptions
from .procedures import DigitsFairness, GaussianFairness, MixtureDDPMFairness
from .report import format_ddpm, format_digits, format_gaussian, plot_ddpm, plot_digits, plot_history


DIGITS_STATS = ("mean_loss", "worst_loss", "loss_gap", "worst_recall", "recall_gap")


def _digits_arms(batch_per_group: int = 12, minmax_batch_per_group: int = 120) -> dict[str, dict[str, Any]]:
    """The digits arms at equal back-propagated rows per step: erm (10 × ``batch_per_group`` uniform rows, all
    back-propagated), min–max (``minmax_batch_per_group`` rows per digit, of which it back-propagates the worst
    digit's rows in each timestep bin: about ``minmax_batch_per_group``), group-DRO (10 × ``batch_per_group``, weighted)."""
    return {"erm": {"algorithm": "erm", "batch_per_group": batch_per_group},
            "minmax": {"algorithm": "minmax", "batch_per_group": minmax_batch_per_group},
            "group-dro": {"algorithm": "group-dro", "batch_per_group": batch_per_group}}


def _mean_sd(v: list[float]) -> dict[str, Any]:
    """Mean and sample sd (n − 1; None for one value) over fine-tuning seeds, with the values."""
    return spread(v).as_dict()


def _paired(digits: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per arm, over seeds: its own after − before of every :data:`DIGITS_STATS` entry and the digits whose held-out
    loss rose (the arm's health); for every arm but erm the paired difference arm − erm of the after values (the same
    seed: the same held-out noise and recall draws) and the pre-registered rule (card): "improves the worst digit" is
    shown only if the paired worst-digit loss difference has mean + sd < 0."""
    out: dict[str, Any] = {}
    for arm, runs in digits.items():
        own: dict[str, Any] = {k: _mean_sd([r[k]["after"] - r[k]["before"] for r in runs]) for k in DIGITS_STATS}
        own["digits_worse"] = [sum(a > b for a, b in zip(r["after"]["loss"], r["before"]["loss"])) for r in runs]
        own["rows_backprop"] = _mean_sd([r["rows_backprop"] for r in runs])
        out[arm] = {"own": own}
        if arm != "erm" and "erm" in digits:
            if [r["seed"] for r in runs] != [e["seed"] for e in digits["erm"]]:
                raise ValueError(f"{arm} and erm ran on different seeds: no pairing")
            vs = {k: _mean_sd([r[k]["after"] - e[k]["after"] for r, e in zip(runs, digits["erm"])]) for k in DIGITS_STATS}
            w = vs["worst_loss"]
            out[arm]["vs_erm"] = vs
            out[arm]["worst_digit_better_than_erm"] = bool(len(runs) > 1 and w["mean"] + w["sd"] < 0)
    return out


def measure(dit: Callable[[], Any] | None = None, digits_steps: int = 300, per_class: int = 50, seed: int = 0,
            gaussian_steps: int = 3000, ddpm: bool = True, ddpm_pretrain_steps: int = 3000, ddpm_steps: int = 1500,
            digits_seeds: Sequence[int] = (1, 2, 3), digits_lr: float = 2e-4, digits_schedule: str = "cosine",
            digits_batch_per_group: int = 12, digits_minmax_batch_per_group: int = 120) -> dict[str, Any]:
    """The Gaussian recipes (exact loss, ``gaussian_steps`` SGD steps; sampled-loss ablations); with ``ddpm`` the
    §6b mixture DDPM (ERM, min–max on excess and on raw losses, group-DRO; ``ddpm_pretrain_steps`` +
    ``ddpm_steps``); with ``dit`` (a callable giving the shared DiT, called after the DDPM runs) the digits arms of
    :func:`_digits_arms` on every seed of ``digits_seeds`` (``digits_steps`` Adam steps at ``digits_lr`` with
    ``digits_schedule``, ``per_class`` recall samples per class) and their paired summary (:func:`_paired`)."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"gaussian": {}, "gaussian_sampled": {}, "ddpm": {}, "digits": {}}
    for alg in ("erm", "proportion", "minmax", "group-dro"):
        out["gaussian"][alg] = dict(GaussianFairness({}, GaussianFairness.Params(algorithm=alg, steps=gaussian_steps))(seed=seed, progress=True))
    for alg in ("minmax", "group-dro"):
        out["gaussian_sampled"][alg] = dict(GaussianFairness({}, GaussianFairness.Params(algorithm=alg, loss="sampled", steps=gaussian_steps))(seed=seed, progress=True))
    if ddpm:
        size = dict(pretrain_steps=ddpm_pretrain_steps, steps=ddpm_steps)
        for name, kw in (("erm", {"algorithm": "erm"}), ("minmax", {"algorithm": "minmax"}), ("minmax-raw", {"algorithm": "minmax", "select_on": "raw"}),
                         ("group-dro", {"algorithm": "group-dro"})):
            out["ddpm"][name] = dict(MixtureDDPMFairness({}, MixtureDDPMFairness.Params(**kw, **size))(seed=seed))
    if dit is not None:
        model = dit()  # the shared DiT (declared in specs/digits.yaml); recipes copy it
        for arm, kw in _digits_arms(digits_batch_per_group, digits_minmax_batch_per_group).items():
            proc = DigitsFairness({"dit": model}, DigitsFairness.Params(**kw, steps=digits_steps, lr=digits_lr, schedule=digits_schedule,
                                                                        per_class=per_class))
            out["digits"][arm] = [dict(proc(seed=s, progress=True)) for s in digits_seeds]
        out["digits_seeds"] = list(digits_seeds)
        out["digits_paired"] = _paired(out["digits"])
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
        parts += ["", "## Digits proxy (shared DiT; digit classes as groups; NOT divergences: held-out ε-MSE and classifier recall), "
                  f"fine-tuning seeds {res['digits_seeds']}", "", format_digits(res["digits"], res["digits_paired"])]
    return "\n".join(parts)


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """egt: min–max fine-tuning vs ERM, the proportion baseline and group-DRO on the closed-form Gaussian toy, the
    mixture DDPM (note §6b) and the digits proxy on the shared DiT, every arm on each of --digits-seeds, paired with
    ERM by seed (--quick: DDPM 1000 + 500 steps, digits seed 1 only, 30 steps and 10 samples per class; the Gaussian
    runs are unchanged)."""
    res = measure(dit=(lambda: ctx.models("toy")["dit"]) if opts.digits else None, digits_steps=opts.digits_steps,
                  per_class=opts.digits_per_class, seed=ctx.seed, gaussian_steps=opts.gaussian_steps, ddpm=opts.ddpm,
                  ddpm_pretrain_steps=opts.ddpm_pretrain_steps, ddpm_steps=opts.ddpm_steps, digits_seeds=tuple(opts.digits_seeds),
                  digits_lr=opts.digits_lr, digits_schedule=opts.digits_schedule, digits_batch_per_group=opts.digits_batch_per_group,
                  digits_minmax_batch_per_group=opts.digits_minmax_batch_per_group)
    ctx.report(table(res))
    plot_history({**res["gaussian"], **{f"{k} sampled": v for k, v in res["gaussian_sampled"].items()}}, ctx.figure("egt.png"))
    if res["digits"]:
        plot_digits({arm: runs[0] for arm, runs in res["digits"].items()}, ctx.figure("egt-digits.png"))
    if res["ddpm"]:
        plot_ddpm(res["ddpm"], ctx.figure("egt-ddpm.png"))
    return res
