"""IPFM distillation of a PFGM++ teacher into a one-step generator, and SiD as its D -> inf / general-alpha form.

Alternating, data-free loop (Shlenskii & Korotin, arXiv 2509.22454, sec. 3-4; code github.com/daniil-shlenskii/pfgmpp-idmd
``training/sid_training_loop.py`` and ``training/sid_loss.py``; ``/work/shared/methods/ipfm.md`` section 4.3):

1. fake-field step(s): ``y = G_theta(z)`` (no grad), ``sigma ~ LogNormal(-1.2, 1.2)``, ``x = y + n`` with ``n`` from the
   PFGM++ kernel at the same ``D``; EDM-weighted denoising loss ``lambda(sigma) ||f_psi(x, sigma) - y||^2`` with
   ``lambda = (sigma^2 + sigma_d^2) / (sigma sigma_d)^2``;
2. generator step: fresh ``y = G_theta(z)`` with grad, ``sigma`` from SiD's ``t_max`` rule, the same kernel noise;
   per-sample ``[||f_phi(x) - y||^2 - ||f_psi(x) - y||^2] / w`` (IPFM) or SiD's ``(f_phi - f_psi)^T[(f_phi - y) -
   alpha (f_phi - f_psi)] / w``; gradients reach ``theta`` through ``y`` and through ``x`` inside both fields
   (their parameters are frozen for this step).

The generator is ``G_theta(z) = f_theta(z, sigma_init)`` with ``z`` a PFGM++ kernel sample around 0 at ``sigma_init``
(``r = sigma_init sqrt(D)``) -- SiD's recipe with the Gaussian replaced by the heavy-tailed kernel. The teacher is the
exact analytic field (:class:`zoo.common.pfgmpp.AnalyticPFGMPP`), so the generator and fake field are the only
learned parts by default; both start from a learned copy of that field (``init_steps`` regression steps), which
plays the role of the paper's initialisation from the teacher network.

``teacher_field="learned"`` replaces the exact field by a network: :class:`LearnedTeacher`, one EDM-preconditioned
MLP regressed on the exact field once per ``(mixture, D)`` (seed ``teacher_seed``, cached in the process) and frozen.
That is the paper's setting (a trained PFGM++ network teacher; generator and fake field initialised from its
weights) and it is ~5x cheaper at finite D than the exact quadrature field.

``fresh_eval=True`` draws a fresh generator input ``z``, a fresh exact reference set and fresh SW2 projections at
every evaluation, each seeded from ``(seed, step, draw)`` (:func:`eval_seed`), and averages ``final_draws`` such
draws at the last step (``out["final"]``); the default reuses one ``z`` set and one reference set per run (the
shipped generator's spec metric is that evaluation).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from registry.contract import Procedure, summarize
from registry.limits import Rows
from registry.results import ProcedureOutput
from zoo.common.pfgmpp import AnalyticPFGMPP, EDMField, as_D, pfgmpp_noise, quality
from zoo.common.training import EMA

from .losses import gen_sigma, ipfm_loss, sid_loss, sid_weight, sigma_lognormal
from .params import CallSteps, IPFMDistillCli, IPFMDistillParams


def kernel_noise(n: int, dim: int, sigmas: torch.Tensor, D: float, generator: torch.Generator) -> torch.Tensor:
    """PFGM++ kernel draws with one ``sigma`` per row: the kernel scales linearly in sigma, so draw at 1 and rescale."""
    return pfgmpp_noise(n, dim, 1.0, D, generator) * sigmas[:, None]


def generator_samples(gen: EDMField, n: int, D: float, sigma_init: float, generator: torch.Generator) -> torch.Tensor:
    """One-step samples ``G(z) = f_theta(z, sigma_init)``, ``z`` a kernel sample around 0 at ``sigma_init`` (float32)."""
    z = pfgmpp_noise(n, gen.net.dim, sigma_init, D, generator).float()
    return gen(z, sigma_init)


def fit_teacher_copy(teacher: AnalyticPFGMPP, net: EDMField, steps: int, batch: int, lr: float, generator: torch.Generator) -> EDMField:
    """Regress ``net`` on the exact teacher field: ``lambda(sigma) ||f(x, sigma) - f_phi(x, sigma)||^2`` with ``y ~ data``,
    ``sigma ~ LogNormal(-1.2, 1.2)``, ``x = y + n`` (PFGM++ kernel). The paper initialises both the generator and the fake
    field from the teacher network; with an analytic teacher this learned copy plays that role."""
    opt = torch.optim.Adam(net.parameters(), lr=lr, betas=(0.9, 0.999))
    sd, D = teacher.sigma_data, teacher.D
    for _ in range(steps):
        y = teacher.gmm.sample(batch, generator)
        sig = sigma_lognormal(batch, generator)
        x = y + kernel_noise(batch, teacher.dim, sig, D, generator)
        with torch.no_grad():
            target = teacher.denoise(x, sig).float()
        lam = ((sig**2 + sd**2) / (sig * sd) ** 2).float()
        loss = (lam * ((net(x.float(), sig.float()) - target) ** 2).sum(1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net


class LearnedTeacher(torch.nn.Module):
    """A frozen network copy ``f_phi`` of an exact PFGM++ teacher, with the teacher's interface (``denoise``, ``prior``,
    ``gmm``, ``D``, ``dim``, ``sigma_data``): the toy stand-in for the paper's trained NCSN++ PFGM++ teacher. The data
    law ``gmm`` is kept only for the metrics; distillation never samples it."""

    def __init__(self, exact: AnalyticPFGMPP, net: EDMField):
        super().__init__()
        self.gmm, self.D, self.mixture = exact.gmm, exact.D, exact.mixture
        self._sigma_data = exact.sigma_data
        self.net = net.requires_grad_(False).eval()
        self.calls = 0

    @property
    def dim(self) -> int:
        return self.gmm.dim

    @property
    def sigma_data(self) -> float:
        return self._sigma_data

    def denoise(self, x: torch.Tensor, sigma: Any) -> torch.Tensor:
        """The network's field at ``sigma`` (scalar or ``(B,)``), float64 out, differentiable in ``x``."""
        self.calls += 1
        sig = torch.as_tensor(sigma, dtype=torch.float32).reshape(-1).expand(x.shape[0])
        return self.net(x.float(), sig).double()

    def prior(self, n: int, sigma_max: float, generator: torch.Generator | None = None) -> torch.Tensor:
        return pfgmpp_noise(n, self.dim, sigma_max, self.D, generator)


_LEARNED: dict[tuple, EDMField] = {}


def learned_teacher(exact: AnalyticPFGMPP, steps: int = 600, width: int = 64, layers: int = 3, batch: int = 256,
                    teacher_seed: int = 0) -> LearnedTeacher:
    """The frozen network teacher of ``exact`` (:func:`fit_teacher_copy`, ``steps`` at lr 1e-3, seed ``teacher_seed``),
    fitted once per process and key; the global torch RNG is left as it was (the caller reseeds)."""
    key = (exact.mixture, exact.D, exact.nodes, steps, width, layers, batch, teacher_seed)
    if key not in _LEARNED:
        with torch.random.fork_rng():
            torch.manual_seed(teacher_seed)
            net = EDMField(exact.dim, exact.sigma_data, width, layers)
            _LEARNED[key] = fit_teacher_copy(exact, net, steps, batch, 1e-3, torch.Generator().manual_seed(teacher_seed))
    return LearnedTeacher(exact, copy.deepcopy(_LEARNED[key]))


def eval_seed(seed: int, step: int, draw: int, what: int) -> int:
    """The seed of a fresh evaluation draw: distinct for every (training seed, step, draw, what in {z, reference,
    projections}) with ``step < 10**6``, ``draw < 100``."""
    return 10**10 * (seed + 1) + 1000 * step + 10 * draw + what


def distill(teacher: AnalyticPFGMPP, *, loss: str = "ipfm", alpha: float = 0.5, steps: int = 400, batch: int = 256, lr: float = 3e-4,
            sigma_init: float = 2.5, fake_iters: int = 2, fake_warmup: int = 0, width: int = 64, layers: int = 3, seed: int = 0,
            eval_every: int = 50, eval_n: int = 2000, generator: EDMField | None = None, progress: bool = False,
            fake_lr: float | None = None, init_steps: int = 600, ema: float = 0.99, teacher_field: str = "exact",
            teacher_steps: int = 600, gen_sigma_law: str = "tmax", fresh_eval: bool = False, final_draws: int = 1) -> dict[str, Any]:
    """Run the alternating loop; returns ``{"generator", "fake", "history": [{step, sw2, loglik}], ...}``.

    Deterministic given ``seed`` on one thread. ``loss="ipfm"`` ignores ``alpha`` (it is 2 x SiD at alpha = 1/2).
    The evaluated and returned generator is the EMA of ``G_theta`` (decay ``min(ema, (1 + step) / (10 + step))``,
    :class:`zoo.common.training.EMA`; ``ema = 0``: the raw generator), as the paper tracks EMAs of G.
    Both networks start as a learned copy of the teacher field (``init_steps`` regression steps, as the paper
    initialises them from the teacher network); ``fake_warmup`` fake-field steps then run before the first generator step.
    ``teacher_field="learned"``: the teacher is :func:`learned_teacher` (``teacher_steps`` regression steps, width 64,
    3 layers, seed 0) and the generator and fake field start as exact copies of its weights when their shape is the
    teacher's (the paper's initialisation), else as a learned copy of it (``init_steps``).
    ``gen_sigma_law``: the generator-step noise-level law (:data:`~.losses.GEN_SIGMA_LAWS`; ``tmax`` = SiD's / the code's).
    """
    if teacher_field not in ("exact", "learned"):
        raise ValueError(f"teacher_field must be 'exact' or 'learned', got {teacher_field!r}")
    if teacher_field == "learned" and not isinstance(teacher, LearnedTeacher):
        teacher = learned_teacher(teacher, teacher_steps)
    D = teacher.D
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    dim, sd = teacher.dim, teacher.sigma_data
    if isinstance(teacher, LearnedTeacher) and generator is None and (width, layers) == (64, 3):
        gen = copy.deepcopy(teacher.net).requires_grad_(True).train()
        fake = copy.deepcopy(gen)
    elif generator is not None:
        gen = generator
        fake = fit_teacher_copy(teacher, EDMField(dim, sd, width, layers), init_steps, batch, 1e-3, g)
    else:
        gen = fit_teacher_copy(teacher, EDMField(dim, sd, width, layers), init_steps, batch, 1e-3, g)
        fake = copy.deepcopy(gen)
    opt_g = torch.optim.Adam(gen.parameters(), lr=lr, betas=(0.0, 0.999), eps=1e-8)
    opt_f = torch.optim.Adam(fake.parameters(), lr=lr if fake_lr is None else fake_lr, betas=(0.0, 0.999), eps=1e-8)
    reference = teacher.gmm.sample(eval_n, torch.Generator().manual_seed(seed + 1))
    eval_g = lambda: torch.Generator().manual_seed(seed + 2)  # noqa: E731 - the same z at every evaluation
    history: list[dict[str, float]] = []

    def fake_step() -> float:
        with torch.no_grad():
            y = generator_samples(gen, batch, D, sigma_init, g)
        sig = sigma_lognormal(batch, g)
        x = y + kernel_noise(batch, dim, sig, D, g).float()
        lam = ((sig**2 + sd**2) / (sig * sd) ** 2).float()
        lf = (lam * ((fake(x, sig.float()) - y) ** 2).sum(1)).mean()
        opt_f.zero_grad()
        lf.backward()
        opt_f.step()
        return float(lf.detach())

    avg = EMA(gen, max_decay=ema) if ema > 0 else None
    gen_eval = copy.deepcopy(gen) if avg is not None else gen

    def evaluate(step: int, draw: int = 0) -> dict[str, float]:
        if avg is not None and draw == 0:
            avg.copy_to(gen_eval)
        with torch.no_grad():
            if not fresh_eval:
                return quality(generator_samples(gen_eval, eval_n, D, sigma_init, eval_g()), teacher, reference)
            s = generator_samples(gen_eval, eval_n, D, sigma_init, torch.Generator().manual_seed(eval_seed(seed, step, draw, 0)))
            ref = teacher.gmm.sample(eval_n, torch.Generator().manual_seed(eval_seed(seed, step, draw, 1)))
            return quality(s, teacher, ref, seed=eval_seed(seed, step, draw, 2))

    def record(step: int) -> None:
        history.append({"step": step, **evaluate(step)})

    for _ in range(fake_warmup):
        fake_step()
    record(0)
    it = range(1, steps + 1)
    if progress:
        from zoo.common.training import progress as bar

        it = bar(it, desc=f"{loss} D={D:g}")
    for step in it:
        for _ in range(fake_iters):
            fake_step()
        fake.requires_grad_(False)
        y = generator_samples(gen, batch, D, sigma_init, g)
        sig = gen_sigma(gen_sigma_law, batch, g)
        x = y.double() + kernel_noise(batch, dim, sig, D, g)
        f_t = teacher.denoise(x, sig).float()
        f_f = fake(x.float(), sig.float())
        per = ipfm_loss(f_t, f_f, y) if loss == "ipfm" else sid_loss(f_t, f_f, y, alpha)
        lg = (per / sid_weight(y, f_t)).mean()
        opt_g.zero_grad()
        lg.backward()
        opt_g.step()
        fake.requires_grad_(True)
        if avg is not None:
            avg.update(gen, step)
        if step % eval_every == 0 or step == steps:
            record(step)
    if avg is not None:
        avg.copy_to(gen_eval)
    draws = [history[-1]] + [evaluate(steps, k) for k in range(1, final_draws if fresh_eval else 1)]
    final = {k: sum(d[k] for d in draws) / len(draws) for k in ("sw2", "loglik")}
    final["sw2_draws"] = [d["sw2"] for d in draws]
    return {"generator": gen_eval, "raw_generator": gen, "fake": fake, "history": history, "final": final, "D": D, "loss": loss,
            "alpha": alpha, "teacher": teacher}


def steps_to_threshold(history: list[dict[str, float]], threshold: float) -> int | None:
    """First evaluated step whose SW2 is <= ``threshold`` (None if never)."""
    for h in history:
        if h["sw2"] <= threshold:
            return int(h["step"])
    return None


@dataclass
class DistillOutput(ProcedureOutput):
    """One-step ``samples`` of the trained generator, the SW2 / log-likelihood ``history`` per evaluated step, the
    final ``sw2`` and ``loglik``, and the trained generator's ``generator_state`` (a ``state_dict`` of an
    :class:`~zoo.common.pfgmpp.EDMField`; a private object, never a cached role)."""

    samples: Any = None
    history: Any = None
    sw2: Any = None
    loglik: Any = None
    generator_state: Any = None


class IPFMDistill(Procedure):
    """IPFM (``loss: ipfm``) or SiD (``loss: sid``, any alpha) distillation of the teacher role into a fresh one-step
    generator; trains private networks only (the cached teacher is never changed)."""

    kind = "training"
    mutates_models = True

    Params = IPFMDistillParams

    def __call__(self, *, seed: int = 0, num_samples: Rows = 256, steps: CallSteps | None = None,
                 init_steps: CallSteps | None = None) -> DistillOutput:
        """Train with ``seed`` and return ``num_samples`` one-step samples (``steps`` / ``init_steps`` override the params)."""
        p = self.params
        teacher = self.models["teacher"]
        if p.D is not None and as_D(p.D) != teacher.D:
            teacher = copy.copy(teacher)
            teacher.D = as_D(p.D)
        out = distill(teacher, loss=p.loss, alpha=p.alpha, steps=p.steps if steps is None else steps, batch=p.batch, lr=p.lr,
                      sigma_init=p.sigma_init, fake_iters=p.fake_iters, fake_warmup=p.fake_warmup, width=p.width, layers=p.layers,
                      seed=seed, eval_every=p.eval_every, eval_n=p.eval_n,
                      init_steps=p.init_steps if init_steps is None else init_steps, fake_lr=p.fake_lr, ema=p.ema,
                      teacher_field=p.teacher_field, teacher_steps=p.teacher_steps, gen_sigma_law=p.gen_sigma)
        gen = out["generator"]
        with torch.no_grad():
            s = generator_samples(gen, num_samples, teacher.D, p.sigma_init, torch.Generator().manual_seed(seed + 3)).double()
        last = out["history"][-1]
        return DistillOutput(samples=s, history=out["history"], sw2=last["sw2"], loglik=last["loglik"],
                             generator_state={k: v.detach().clone() for k, v in gen.state_dict().items()})

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"num_samples": batch_size, "steps": 2, "init_steps": 2}

    CliInputs = IPFMDistillCli

    def run_cli(self, inputs: Any, seed: int) -> str:
        """``zoo run ipfm --steps 400 --n 2000 --out samples.png``: distil, print the SW2 history, score the samples."""
        from zoo.common.toys2d import samples_report

        ci = inputs if inputs is not None else self.CliInputs()
        out = self(seed=seed, num_samples=ci.n, steps=ci.steps)
        p, teacher = self.params, self.models["teacher"]
        D = as_D(p.D) if p.D is not None else teacher.D
        head = (f"{p.loss.upper()} distillation (alpha {p.alpha:g}, D = {D:g}), {p.steps if ci.steps is None else ci.steps} "
                f"generator steps; one-step samples, NFE 1")
        hist = out.history or []
        keep = sorted({0, len(hist) - 1, *range(0, len(hist), max(1, len(hist) // 6))}) if hist else []
        lines = [head, summarize(out), "  history (step: SW2 to data, mean log p on the evaluation set):"]
        lines += [f"    {hist[i]['step']:>6}: {hist[i]['sw2']:.4g}, {hist[i]['loglik']:.4f}" for i in keep]
        return "\n".join(lines + samples_report(teacher.gmm, out.samples, seed, ci.out, title=head))

