"""Exact scoring of scheduler samplers on the analytic Gaussian mixture, the ``zoo run`` report and
the cheap metric checks of the toy variants.

Metrics (``/work/shared/methods/gaussian-mixture-testbed.md`` section 1d):

* **path error**: ``|| x_N - Phi(x_T) ||`` where ``Phi`` is the exact probability-flow map of the
  mixture from the run's first noise level to its last (``sampler.noise_range()``), from the *same*
  ``x_T`` (VP coordinates at both ends). Median over rows.
* **SW2**: sliced Wasserstein-2 between the samples and as many exact data samples (128 projections).
* **log-likelihood**: mean exact mixture log-density of the samples (the data law's own value,
  ``E_p log p``, is the reference; ODE solvers that under-disperse score *higher*).
"""
from __future__ import annotations

from registry.contract import metric_check

import math
from typing import Any

import torch

__all__ = ["as_procedure", "with_steps", "exact_endpoint", "evaluate", "cli_report", "toy_path_error", "toy_nfe"]

#: the fixed evaluation set of the cheap checks: 256 rows of x_T from this seed
CHECK_ROWS, CHECK_SEED = 256, 2026


def as_procedure(obj: Any) -> Any:
    """The sampler procedure of a zoo ``Pipeline`` (its default procedure) or the procedure itself."""
    return getattr(obj, "procedure", obj)


def with_steps(proc: Any, num_inference_steps: int) -> Any:
    """A copy of ``proc`` with another step count (params are frozen pydantic models)."""
    params = proc.params.model_copy(update={"num_inference_steps": int(num_inference_steps)})
    return type(proc)(proc.models, params, proc.device, proc.dtype)


def steps_for_nfe(proc: Any, nfe: int) -> int:
    """Steps giving ``nfe`` model calls (F-DPMSolver with ``first_eps="evaluate"`` spends one extra; a sampler with
    ``calls_per_step = 2``, the half-sum, two per step)."""
    extra = 1 if getattr(proc.params, "first_eps", "approx") == "evaluate" else 0
    per = int(getattr(proc, "calls_per_step", 1))
    if nfe - extra < per or (nfe - extra) % per:
        from registry.errors import ParamError

        raise ParamError(f"--nfe {nfe}: not reachable by this sampler ({per} model call(s) per step + {extra} extra; need >= {per + extra}"
                         + (f" and nfe - {extra} divisible by {per})" if per > 1 else ")"))
    return (nfe - extra) // per


def exact_endpoint(proc: Any, x_T: torch.Tensor) -> torch.Tensor:
    """Exact PF-ODE image of ``x_T`` (VP coordinates) over the sampler's own noise range."""
    gmm = proc.model.gmm
    s0, s1 = proc.noise_range()
    x = x_T.reshape(x_T.shape[0], -1).double() * math.sqrt(1 + s0**2)
    y = gmm.exact_ode(x, s0, s1) / math.sqrt(1 + s1**2)
    return y.reshape(x_T.shape)


def evaluate(proc: Any, x_T: torch.Tensor, data_seed: int = 0) -> dict[str, float]:
    """Run ``proc`` from ``x_T`` and score it exactly (see module docstring)."""
    from zoo.common.gmm import sliced_wasserstein2

    gmm = proc.model.gmm
    out = proc(seed=0, noise=x_T).samples.double().reshape(x_T.shape[0], -1)
    ref = exact_endpoint(proc, x_T).double().reshape(x_T.shape[0], -1)
    err = (out - ref).norm(dim=1)
    g = torch.Generator().manual_seed(data_seed)
    data = gmm.sample(out.shape[0], generator=g)
    return {
        "path_err_median": float(err.median()),
        "path_err_mean": float(err.mean()),
        "sw2": sliced_wasserstein2(out, data, generator=torch.Generator().manual_seed(data_seed + 1)),
        "loglik": float(gmm.log_prob(out).mean()),
        "loglik_data": float(gmm.log_prob(data).mean()),
    }


def _check_noise(proc: Any) -> torch.Tensor:
    return proc.draw_noise(CHECK_ROWS, CHECK_SEED)


@metric_check
def toy_path_error(pipeline: Any) -> float:
    """Metric check: median path error of the pipeline's default sampler (its spec params) on the
    fixed 256-row ``x_T`` set, against the exact PF-ODE solution (toy variant)."""
    proc = as_procedure(pipeline)
    return evaluate(proc, _check_noise(proc))["path_err_median"]


@metric_check
def toy_nfe(pipeline: Any) -> float:
    """Metric check: model calls of one run, counted on the model (not read from the config)."""
    proc = as_procedure(pipeline)
    model = proc.model
    log = getattr(model, "call_log", None)
    if log is None:
        raise TypeError("toy_nfe needs the analytic model (it records its calls)")
    start = len(log)
    proc(seed=0, noise=proc.draw_noise(1, 0))
    return float(len(log) - start)


def cli_report(proc: Any, inputs: Any, seed: int) -> str:
    """``zoo run NAME --nfe N --n M --out samples.png``: sample, score exactly, optionally plot."""
    # --nfe overrides only when given; otherwise the spec's (or --param's) num_inference_steps stands
    run = proc if inputs.nfe is None else with_steps(proc, steps_for_nfe(proc, inputs.nfe))
    nfe = run.params.num_inference_steps * int(getattr(run, "calls_per_step", 1)) + (
        1 if getattr(run.params, "first_eps", "approx") == "evaluate" else 0)
    x_T = run.draw_noise(inputs.n, seed)
    has_gmm = getattr(run.model, "gmm", None) is not None
    if not has_gmm:
        out = run(seed=seed, noise=x_T).samples
        text = f"{type(run).__name__}: {nfe} NFE, samples {tuple(out.shape)}"
        if inputs.out:
            plot_images(out, inputs.out, title=f"{type(run).__name__}, NFE={nfe}")
            text += f"\n  wrote {inputs.out}"
        return text
    stats = evaluate(run, x_T, data_seed=seed)
    lines = [
        f"{type(run).__name__} ({type(run.scheduler).__name__}): NFE={nfe}, steps={run.params.num_inference_steps}, n={inputs.n}",
        f"  path error vs exact ODE: median {stats['path_err_median']:.4g}, mean {stats['path_err_mean']:.4g}",
        f"  sliced W2 to the data law: {stats['sw2']:.4g}",
        f"  mean log p(samples): {stats['loglik']:.4f} (exact data samples: {stats['loglik_data']:.4f})",
    ]
    if inputs.out:
        plot_samples(run, run(seed=seed, noise=x_T).samples, inputs.out, title=f"{type(run).__name__}, NFE={nfe}")
        lines.append(f"  wrote {inputs.out}")
    return "\n".join(lines)


def plot_images(samples: torch.Tensor, path: str, title: str = "", max_images: int = 64) -> None:
    """A grid of image samples in [-1, 1] (first channel, or RGB when there are 3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    imgs = samples[:max_images].detach().float().clamp(-1, 1) * 0.5 + 0.5
    n = imgs.shape[0]
    cols = min(8, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(cols, rows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        ax.axis("off")
        if i < n:
            img = imgs[i].permute(1, 2, 0).numpy() if imgs.shape[1] == 3 else imgs[i, 0].numpy()
            ax.imshow(img, cmap=None if imgs.shape[1] == 3 else "gray", vmin=0, vmax=1)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_samples(proc: Any, samples: torch.Tensor, path: str, title: str = "") -> None:
    """Scatter of 2-D samples over the exact density (contours of log p)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gmm = proc.model.gmm
    if gmm.dim != 2:
        raise ValueError("plots need a 2-D mixture")
    pts = samples.double().reshape(samples.shape[0], -1)
    lo = torch.minimum(pts.min(0).values, gmm.means.min(0).values - 2.5) 
    hi = torch.maximum(pts.max(0).values, gmm.means.max(0).values + 2.5)
    xs = torch.linspace(float(lo[0]), float(hi[0]), 200, dtype=torch.float64)
    ys = torch.linspace(float(lo[1]), float(hi[1]), 200, dtype=torch.float64)
    X, Y = torch.meshgrid(xs, ys, indexing="xy")
    lp = gmm.log_prob(torch.stack([X.reshape(-1), Y.reshape(-1)], 1)).reshape(X.shape)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.contourf(X.numpy(), Y.numpy(), lp.exp().numpy(), levels=20, cmap="Blues")
    ax.scatter(pts[:, 0].numpy(), pts[:, 1].numpy(), s=2, c="crimson", alpha=0.5, label="samples")
    ax.set_title(title)
    ax.set_aspect("equal")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
