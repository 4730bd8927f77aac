"""Benchmark of ``ramac`` on the 2-D risky bandit: RAMAC beside its baselines (BC only, risk-neutral,
CVaR without BC) and RAFMAC (the flow-matching actor) in one run -- empirical and exact CVaR_0.1, mean return, out-of-distribution action
rate and mode occupancy of 1,000 actions of each shipped actor -- with the behaviour data and the two
pure-mode policies as references and the method note's design expectations beside them (the paper
publishes no toy numbers). Also: the critic-loss pairing check (free quantiles fitted to N(0, 1)), and
the OOD floor of the T-step reverse chain with the *exact* denoiser (why the toy uses T = 20) and of
RAFMAC's K-step Euler chain with the exact velocity. With
``--retrain`` the five actors are trained again from the seed (the shipped files' recipe) instead of
loaded; ``--released-pairing`` adds RAMAC trained with the authors' released critic loss.

    zoo bench ramac [--quick] [--retrain] [--released-pairing] [--out-dir docs/methods]   # ramac-bandit.png into --out-dir
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from registry.contract import benchmark

from .bandit import OOD_LAW, RISKY_LAW, SAFE_LAW, bandit_dataset, evaluate_actions
from .params import BenchOptions
from .procedures import evaluate_actor
from .risk import cvar_normal_mixture, fit_free_quantiles, huber_quantile_normal, normal_quantile, stratified_normal

ROLES = {"ramac": "actor", "bc-only": "actor-bc-only", "risk-neutral": "actor-risk-neutral", "cvar-no-bc": "actor-cvar-no-bc", "rafmac": "actor-rafmac"}
#: the method note's design expectations (sec. 6), not measurements
EXPECTED = {"ramac": "CVaR ≈ 4, OOD ≈ 0", "bc-only": "all four modes", "risk-neutral": "risky modes, CVaR ≈ −8", "cvar-no-bc": "OOD, low true CVaR",
            "rafmac": "as ramac (flow-matching actor)",
            "ramac-released-pairing": "quantiles collapse to the median (sec. 9)"}
LEVELS = (0.05, 0.1, 0.5, 0.9)


def _actors(ctx: Any, retrain: bool, seed: int, quick: bool) -> dict[str, Any]:
    if retrain:
        from .toy import SHIPPED, train_presets

        base = {"steps": 600, "eta_warmup": 400, "eta_ramp": 100} if quick else {}
        return {name: r.actor for name, r in train_presets(seed, tuple(SHIPPED), base, progress=True).items()}
    models = ctx.models("toy")  # the shipped actors (specs/ramac.yaml)
    return {name: models[role] for name, role in ROLES.items()}


def exact_chain_floor(Ts: tuple[int, ...] = (5, 10, 20), n: int = 2000) -> dict[int, float]:
    """OOD rate of the T-step "vp" DDPM chain (clipped to the box) run with the *exact* epsilon of the
    behaviour law (:meth:`GaussianMixture.predict_vp`): the best any trained actor with this chain can do."""
    from zoo.common.mlp_diffusion import VectorDiffusion
    from zoo.common.toys2d import bandit_mode_of, risky_bandit

    law = risky_bandit()
    out = {}
    for T in Ts:
        vd = VectorDiffusion(2, T=T, schedule="vp", clip=1.0).double()

        class Exact(torch.nn.Module):
            def forward(self, x: torch.Tensor, t: torch.Tensor, cond: Any = None) -> torch.Tensor:
                return law.predict_vp(x.double(), vd.alphas_cumprod[int(t[0])].double(), "epsilon")

        vd.model = Exact()
        g = torch.Generator().manual_seed(0)
        s = vd.sample(n, generator=g, x_T=torch.randn(n, 2, generator=g, dtype=torch.float64))
        out[T] = float((bandit_mode_of(s) < 0).double().mean())
    return out


def exact_flow_floor(Ks: tuple[int, ...] = (5, 10, 20), n: int = 2000) -> dict[int, float]:
    """OOD rate of RAFMAC's K-step Euler chain (clipped to the box) run with the *exact* rectified-flow
    velocity of the behaviour law (:func:`zoo.common.flows.rf_velocity`, the minimiser of the flow matching
    loss): the best any trained flow actor with K steps can do (``K = 10`` is the toy's and the code's)."""
    from zoo.common.flows import rf_velocity
    from zoo.common.toys2d import bandit_mode_of, risky_bandit

    from .nets import FlowActor

    law = risky_bandit()
    out = {}
    for K in Ks:
        x0 = torch.randn(n, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        a = FlowActor(steps=K).integrate(x0, torch.zeros(n, 1), velocity=lambda x, t, s: rf_velocity(law, x, t)).clamp(-1, 1)
        out[K] = float((bandit_mode_of(a) < 0).double().mean())
    return out


def quantile_pairing(steps: int = 300) -> dict[str, list[float]]:
    """Free quantiles at LEVELS fitted to a stratified N(0, 1) sample: pure pinball, standard Huber
    (kappa = 1) and the released RADAC pairing, beside the true and the Huber-shrunk closed forms."""
    grid = stratified_normal(2048)
    fit = lambda **kw: [round(float(v), 4) for v in fit_free_quantiles(LEVELS, lambda b, g: grid, steps=steps, **kw)]  # noqa: E731
    return {"true": [normal_quantile(t) for t in LEVELS], "huber_closed_form": [huber_quantile_normal(t, 1.0) for t in LEVELS],
            "pinball": fit(kappa=0.0), "huber_standard": fit(kappa=1.0), "huber_radac_released": fit(kappa=1.0, pairing="radac_released")}


def released_pairing_actor(seed: int = 0, quick: bool = False) -> Any:
    """RAMAC trained with the released RADAC critic pairing (same seed, data and budget as the shipped
    RAMAC actor; ~2-5 min on one thread): what the `train-released-pairing` recipe produces."""
    from .toy import train_presets

    base: dict[str, Any] = {"pairing": "radac_released"}
    if quick:
        base.update(steps=600, eta_warmup=400, eta_ramp=100)
    return train_presets(seed, ("ramac",), base, progress=True)["ramac"].actor


def measure(ctx: Any, quick: bool = False, retrain: bool = False, seed: int = 0, n: int = 1000, released: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    actors = _actors(ctx, retrain, seed, quick)
    if released:
        actors["ramac-released-pairing"] = released_pairing_actor(seed, quick)
    rows = {}
    for name, actor in actors.items():
        ev = evaluate_actor(actor, n, 0.1, 0, name)
        rows[name] = {k: ev[k] for k in ev.keys() if k != "actions"}
        rows[name]["actions"] = ev.actions.tolist()
    data = bandit_dataset(n, torch.Generator().manual_seed(seed))
    rows["behaviour-data"] = {k: v for k, v in evaluate_actions(data.actions, generator=torch.Generator().manual_seed(1)).items()}
    ref = {"all-safe": (cvar_normal_mixture(0.1, *SAFE_LAW), 5.0), "all-risky": (cvar_normal_mixture(0.1, *RISKY_LAW), 5.6),
           "all-ood": (cvar_normal_mixture(0.1, *OOD_LAW), -5.0)}
    res: dict[str, Any] = {"rows": rows, "references": ref, "retrained": retrain, "n": n,
                           "pairing": quantile_pairing(150 if quick else 300), "exact_chain_ood_floor": exact_chain_floor(n=500 if quick else 2000),
                           "exact_flow_ood_floor": exact_flow_floor(n=500 if quick else 2000)}
    res["seconds"] = time.perf_counter() - t0
    return res


def table(res: dict[str, Any]) -> str:
    src = "retrained from the seed" if res["retrained"] else "shipped actors"
    lines = [f"2-D risky bandit, {res['n']} actions per actor ({src}); exact = the return law of the actor's safe/risky/OOD occupancy",
             "| actor | CVaR_0.1 | exact CVaR_0.1 | mean | exact mean | OOD rate | safe | risky | note's expectation |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in res["rows"].items():
        lines.append(f"| {name} | {r['cvar']:+.2f} | {r['exact_cvar']:+.2f} | {r['mean']:+.2f} | {r['exact_mean']:+.2f} | {r['ood_rate']:.3f} | "
                     f"{r['safe_rate']:.3f} | {r['risky_rate']:.3f} | {EXPECTED.get(name, '')} |")
    for name, (cv, mean) in res["references"].items():
        lines.append(f"| {name} (closed form) | | {cv:+.2f} | | {mean:+.2f} | | | | |")
    p = res["pairing"]
    lines += ["", "Quantile fit to N(0, 1) (free vector, levels " + ", ".join(f"{t:g}" for t in LEVELS) + "):",
              "| loss | " + " | ".join(f"q({t:g})" for t in LEVELS) + " |", "|---|" + "---:|" * len(LEVELS)]
    for key, label in (("true", "true quantile"), ("pinball", "pinball (kappa = 0)"), ("huber_closed_form", "Huber kappa = 1, closed-form minimiser"),
                       ("huber_standard", "Huber kappa = 1, standard pairing (fit)"), ("huber_radac_released", "Huber kappa = 1, released RADAC pairing (fit)")):
        lines.append(f"| {label} | " + " | ".join(f"{v:+.3f}" for v in p[key]) + " |")
    floor = res["exact_chain_ood_floor"]
    lines += ["", "OOD floor of the T-step vp chain with the exact denoiser: " + ", ".join(f"T = {T}: {v:.3f}" for T, v in floor.items())]
    lines += ["OOD floor of RAFMAC's K-step Euler chain with the exact velocity: "
              + ", ".join(f"K = {K}: {v:.3f}" for K, v in res["exact_flow_ood_floor"].items())]
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> Path:
    """One panel per actor: its actions over the per-action CVaR_0.1 landscape (safe discs 4.12, risky
    discs -8.80, off-support -10.26) with the behaviour modes' 3-sigma circles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.common.toys2d import RISKY_BANDIT_MODES, RISKY_BANDIT_SIGMA, bandit_mode_of

    grid = 300
    xs = torch.linspace(-1, 1, grid, dtype=torch.float64)
    X, Y = torch.meshgrid(xs, xs, indexing="xy")
    mode = bandit_mode_of(torch.stack([X.reshape(-1), Y.reshape(-1)], 1)).reshape(grid, grid)
    risky = torch.tensor([i for i, (_, r) in enumerate(RISKY_BANDIT_MODES.values()) if r])
    land = torch.full((grid, grid), cvar_normal_mixture(0.1, *OOD_LAW), dtype=torch.float64)
    land[mode >= 0] = cvar_normal_mixture(0.1, *SAFE_LAW)
    land[torch.isin(mode, risky)] = cvar_normal_mixture(0.1, *RISKY_LAW)
    names = [k for k in res["rows"] if k in ROLES or k == "ramac-released-pairing"]
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4.4))
    for ax, name in zip(axes, names):
        r = res["rows"][name]
        im = ax.imshow(land.numpy(), extent=(-1, 1, -1, 1), origin="lower", cmap="RdYlGn", vmin=-11, vmax=5, alpha=0.6)
        for (cx, cy), _ in RISKY_BANDIT_MODES.values():
            ax.add_patch(plt.Circle((cx, cy), 3 * RISKY_BANDIT_SIGMA, fill=False, lw=0.8, color="k"))
        a = torch.tensor(r["actions"])
        ax.scatter(a[:, 0], a[:, 1], s=3, c="navy", alpha=0.5)
        ax.set(xlim=(-1, 1), ylim=(-1, 1), aspect="equal",
               title=f"{name}\nCVaR0.1 {r['cvar']:+.1f} mean {r['mean']:+.1f} OOD {r['ood_rate']:.0%}")
        ax.title.set_fontsize(9)
    fig.colorbar(im, ax=axes, shrink=0.7, label="per-action reward CVaR_0.1 (safe / risky / off-support)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """RAMAC vs BC-only, risk-neutral and CVaR-without-BC actors and RAFMAC on the 2-D risky bandit, the critic-loss
    pairing check and the chains' exact OOD floors (--quick: fewer fitting steps, and a 600-step schedule with
    --retrain: seconds)."""
    res = measure(ctx, ctx.quick, opts.retrain, ctx.seed, opts.n, opts.released_pairing)
    ctx.report(table(res))
    plot(res, ctx.figure("ramac-bandit.png"))
    # the plotted actions stay out of the JSON (1,000 x 2 per actor)
    return {**res, "rows": {name: {k: v for k, v in r.items() if k != "actions"} for name, r in res["rows"].items()}}
