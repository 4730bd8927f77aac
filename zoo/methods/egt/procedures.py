"""The ``egt`` recipes: min–max fine-tuning vs ERM vs the proportion baseline on the closed-form
Gaussian toy (:class:`GaussianFairness`) and on the shared digits DiT (:class:`DigitsFairness`, a
proxy: per-group held-out denoising loss and classifier recall, not divergences)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from registry.contract import Procedure, private_copies
from registry.results import ProcedureOutput

from .divergences import CLOSED_FORM, DIVERGENCES, egt_gap, gaussian_divergence, gaussian_log_prob, mc_f_divergence, proportion_gap
from .gaussian import GaussianGroups, GroupModel, exact_minmax, finetune, note_toy, sample_groups, summary, weighted_mle
from .params import (
    DigitsFairnessCli, DigitsFairnessParams, GaussianFairnessCli, GaussianFairnessParams, MixtureDDPMFairnessCli, MixtureDDPMFairnessParams,
)


@dataclass
class EGTOutput(ProcedureOutput):
    """What :class:`GaussianFairness` returns (attribute, key and index access, ``to_tuple()``).

    * ``algorithm`` -- ``erm``, ``proportion``, ``minmax`` or ``group-dro``; ``groups`` -- group names;
    * ``kl`` -- per-group KL(P_a‖Q_a) of the fine-tuned model (closed form); ``gap`` -- its δ-EGT gap
      max_a KL_a − min_a KL_a; ``worst`` -- max_a KL_a; ``weighted`` -- Σ_a p_a KL_a (global quality);
      ``joint_kl`` -- KL(P_{A,X}‖Q_{A,X}) = KL(p‖π) + Σ_a p_a KL_a;
    * ``divergences`` -- ``{kind: per-group values}`` for kl, reverse-kl, chi2, hellinger2 (closed
      form) and tv, js (Monte Carlo, ``mc_samples`` draws, seeded); ``divergence_se`` -- the MC
      standard errors (0 for closed forms); ``gaps`` -- the δ-EGT gap under each kind;
    * ``props`` -- the model's group frequencies π; ``proportion_gap`` -- max_a |π_a − 1/K| (equal
      representation); ``matched_gap`` -- max_a |π_a − p_a| (matched representation);
      ``sampled_props`` / ``sampled_proportion_gap`` -- the group frequencies measured on ``proportion_samples``
      draws from the model's joint sampler (:func:`~.gaussian.sample_groups`, seeded) and max_a |π̂_a − 1/K|
      (sampling s.e. √(π_a(1 − π_a)/n)): what a user of the sampler would see, not the parameter;
      ``averaged`` -- the summary of the tail-averaged iterate (:func:`~.gaussian.finetune`);
    * ``before`` -- the same summary for the starting model θ₀ (ERM); ``exact_minmax`` -- the exact
      min–max solution (``kl``, ``gap``, ``worst``, ``weighted``, dual weights ``w``);
    * ``steps`` / ``kl_history`` / ``weight_history`` -- per-group KL and the group weights used
      (one-hot worst group for min–max, q for group-DRO, fixed weights otherwise) every
      ``record_every`` steps; ``worst_counts`` -- min–max: steps each group was back-propagated;
    * ``cov`` / ``means`` -- the fine-tuned shared covariance and per-group means; ``config``.
    """

    algorithm: str
    groups: list[str]
    kl: list[float]
    gap: float
    worst: float
    weighted: float
    joint_kl: float
    divergences: dict[str, list[float]]
    divergence_se: dict[str, list[float]]
    gaps: dict[str, float]
    props: list[float]
    proportion_gap: float
    matched_gap: float
    sampled_props: list[float]
    sampled_proportion_gap: float
    averaged: dict[str, Any]
    before: dict[str, Any]
    exact_minmax: dict[str, Any]
    steps: list[int]
    kl_history: list[list[float]]
    weight_history: list[list[float]]
    worst_counts: list[int]
    cov: list[list[float]]
    means: list[list[float]]
    config: dict[str, Any]


def all_divergences(toy: GaussianGroups, model: GroupModel, mc_samples: int = 20_000, seed: int = 0) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every divergence of :data:`~.divergences.DIVERGENCES` per group: closed form where one exists,
    else the Monte-Carlo estimator (``mc_samples`` draws from seed ``seed``). Returns (values, s.e.)."""
    vals: dict[str, list[float]] = {k: [] for k in DIVERGENCES}
    ses: dict[str, list[float]] = {k: [] for k in DIVERGENCES}
    for a in range(toy.K):
        mp, Sp, mq, Sq = toy.means[a], toy.covs[a], model.means[a], model.cov
        for kind in DIVERGENCES:
            if kind in CLOSED_FORM:
                vals[kind].append(gaussian_divergence(kind, mp, Sp, mq, Sq))
                ses[kind].append(0.0)
            else:
                Lp, Lq = torch.linalg.cholesky(Sp), torch.linalg.cholesky(Sq)
                est, se = mc_f_divergence(
                    kind, lambda x: gaussian_log_prob(x, mp, Sp), lambda x: gaussian_log_prob(x, mq, Sq),
                    lambda n, g: mp + torch.randn(n, toy.dim, generator=g, dtype=torch.float64) @ Lp.T,
                    lambda n, g: mq + torch.randn(n, toy.dim, generator=g, dtype=torch.float64) @ Lq.T,
                    n=mc_samples, generator=torch.Generator().manual_seed(seed * 1000 + a))
                vals[kind].append(est)
                ses[kind].append(se)
    return vals, ses


class GaussianFairness(Procedure):
    """Fine-tune the shared-covariance Gaussian model of the note's toy from its ERM solution with one
    objective (``algorithm``) and report per-group divergences, the δ-EGT gap, global quality and the
    proportion criteria, beside the ERM start and the exact min–max solution. Returns :class:`EGTOutput`.

    Trains its own parameters from a closed-form start: no cached model is read or changed."""

    kind = "training"

    Params = GaussianFairnessParams
    CliInputs = GaussianFairnessCli

    def __call__(self, *, seed: int = 0, progress: bool = False) -> EGTOutput:
        p = self.params
        toy = note_toy(p.p_b)
        erm = weighted_mle(toy, toy.props)
        res = finetune(toy, p.algorithm, steps=p.steps, lr=p.lr, ema_decay=p.ema_decay, eta_q=p.eta_q, loss=p.loss, batch=p.batch,
                       init=erm, seed=seed, record_every=p.record_every, progress=progress)
        s = summary(toy, res.model)
        vals, ses = all_divergences(toy, res.model, p.mc_samples, seed)
        ex, w = exact_minmax(toy)
        labels, _ = sample_groups(res.model, p.proportion_samples, torch.Generator().manual_seed(seed * 1000 + 999))
        freq = torch.bincount(labels, minlength=toy.K).double() / p.proportion_samples
        return EGTOutput(
            algorithm=p.algorithm, groups=list(toy.names), kl=s["kl"], gap=s["gap"], worst=s["worst"], weighted=s["weighted"],
            joint_kl=s["joint_kl"], divergences=vals, divergence_se=ses, gaps={k: egt_gap(v) for k, v in vals.items()},
            props=s["props"], proportion_gap=proportion_gap(res.model.props), matched_gap=proportion_gap(res.model.props, toy.props),
            sampled_props=[float(v) for v in freq], sampled_proportion_gap=proportion_gap(freq),
            averaged=summary(toy, res.averaged),
            before=summary(toy, erm), exact_minmax={**summary(toy, ex), "w": [float(v) for v in w]},
            steps=res.steps, kl_history=res.kl_history, weight_history=res.weight_history, worst_counts=res.worst_counts,
            cov=res.model.cov.tolist(), means=res.model.means.tolist(), config=p.model_dump())

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"steps": 20, "mc_samples": 200, "batch": 8}

    def run_cli(self, inputs: Any, seed: int) -> str:
        from .report import cli_text, format_gaussian, plot_history

        return cli_text(self(seed=seed, progress=True), format_gaussian, plot_history, inputs, "egt-gaussian.png")


@dataclass
class DigitsOutput(ProcedureOutput):
    """What :class:`DigitsFairness` returns (a proxy, not divergences; see :mod:`.digits`).

    * ``algorithm``, ``seed`` (fine-tuning draws, held-out noise and recall samples); ``before`` / ``after`` --
      ``{"loss": per-group held-out denoising loss, "recall": per-group classifier recall on samples}`` of the
      shipped DiT and of the fine-tuned copy;
    * ``loss_gap`` / ``recall_gap`` -- ``{"before": max − min, "after": max − min}`` across groups;
      ``worst_loss`` / ``worst_recall`` -- the worst group's value before and after; ``mean_loss`` -- the
      mean over groups of the held-out loss, before and after; ``rows_backprop`` -- mean rows per step whose
      loss enters the back-propagated objective; ``lrs`` -- the Adam learning rate of every step;
    * ``steps`` / ``train_loss`` -- the per-group training-loss EMA (mean over timestep bins) during
      fine-tuning; ``worst_counts`` -- min–max: (bin, step) pairs each group was back-propagated;
      ``weights`` -- group-dro: the final q; ``config``.
    """

    algorithm: str
    seed: int
    before: dict[str, list[float]]
    after: dict[str, list[float]]
    loss_gap: dict[str, float]
    recall_gap: dict[str, float]
    worst_loss: dict[str, float]
    worst_recall: dict[str, float]
    mean_loss: dict[str, float]
    rows_backprop: float
    lrs: list[float]
    steps: list[int]
    train_loss: list[list[float | None]]
    worst_counts: list[int]
    weights: list[float]
    config: dict[str, Any]


class DigitsFairness(Procedure):
    """Fine-tune a private copy of the shared digits DiT with ``algorithm`` (digit classes as groups) and
    report the per-group proxy (held-out denoising loss, classifier recall on samples) before and after.
    Returns :class:`DigitsOutput`. Every call trains a fresh private copy
    (:func:`registry.contract.private_copies`), so the cached DiT is never changed and two calls with
    the same seed give the same result."""

    kind = "training"

    Params = DigitsFairnessParams
    CliInputs = DigitsFairnessCli

    def __call__(self, *, seed: int = 0, progress: bool = False) -> DigitsOutput:
        from .digits import finetune_digits, heldout_loss, sample_recall

        p = self.params
        model = private_copies(self.models, ["dit"])["dit"]
        before = {"loss": heldout_loss(model, p.n_t, seed), "recall": sample_recall(model, p.per_class, p.num_inference_steps, seed)}
        run = finetune_digits(model, p.algorithm, steps=p.steps, lr=p.lr, batch_per_group=p.batch_per_group, ema_decay=p.ema_decay,
                              bins=p.bins, eta_q=p.eta_q, label_dropout=p.label_dropout, seed=seed, record_every=p.record_every, progress=progress,
                              schedule=p.schedule)
        after = {"loss": heldout_loss(model, p.n_t, seed), "recall": sample_recall(model, p.per_class, p.num_inference_steps, seed)}
        spread = lambda v: max(v) - min(v)  # noqa: E731
        return DigitsOutput(
            algorithm=p.algorithm, seed=seed, before=before, after=after,
            loss_gap={"before": spread(before["loss"]), "after": spread(after["loss"])},
            recall_gap={"before": spread(before["recall"]), "after": spread(after["recall"])},
            worst_loss={"before": max(before["loss"]), "after": max(after["loss"])},
            worst_recall={"before": min(before["recall"]), "after": min(after["recall"])},
            mean_loss={"before": sum(before["loss"]) / len(before["loss"]), "after": sum(after["loss"]) / len(after["loss"])},
            rows_backprop=run.rows_backprop, lrs=run.lrs, steps=run.steps, train_loss=run.train_loss, worst_counts=run.worst_counts, weights=run.weights, config=p.model_dump())

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"steps": 2, "n_t": 1, "per_class": 1, "num_inference_steps": 2, "batch_per_group": 2}

    def run_cli(self, inputs: Any, seed: int) -> str:
        from .report import cli_text, format_digits, plot_digits

        return cli_text(self(seed=seed, progress=True), format_digits, plot_digits, inputs, "egt-digits.png")


@dataclass
class DDPMOutput(ProcedureOutput):
    """What :class:`MixtureDDPMFairness` returns (a divergence proxy; see :mod:`.mixture_ddpm`).

    * ``algorithm``, ``select_on``; ``before`` / ``after`` -- per-group held-out excess
      E‖ε_θ − ε*_a‖² of θ₀ (ERM pretraining) and of the fine-tuned model;
    * ``gap`` / ``worst`` / ``weighted`` -- ``{"before", "after"}``: max − min, max and Σ p_a of it;
    * ``steps`` / ``excess_ema`` -- per-group EMA of the training excess loss; ``worst_counts`` --
      min–max: (bin, step) pairs each group was back-propagated; ``weights`` -- group-dro: final q; ``config``.
    """

    algorithm: str
    select_on: str
    before: list[float]
    after: list[float]
    gap: dict[str, float]
    worst: dict[str, float]
    weighted: dict[str, float]
    steps: list[int]
    excess_ema: list[list[float]]
    worst_counts: list[int]
    weights: list[float]
    config: dict[str, Any]


class MixtureDDPMFairness(Procedure):
    """The note's §6b: ERM-pretrain a class-conditional MLP DDPM on a 3-mode group (90 %) and a 9-mode ring
    group (10 %), then fine-tune with ``algorithm`` and report the per-group excess denoising loss
    (0 iff Bayes-optimal; the analytic mixture denoiser is the reference) before and after. Trains its
    own model from ``seed`` (pretraining memoised per process); no cached model is used."""

    kind = "training"

    Params = MixtureDDPMFairnessParams

    def __call__(self, *, seed: int = 0, progress: bool = False) -> DDPMOutput:
        from .mixture_ddpm import ddpm_groups, finetune_ddpm, heldout_excess, pretrain

        p = self.params
        model = pretrain(p.pretrain_steps, p.pretrain_lr, p.batch, p.width, p.p_b, seed)
        groups = ddpm_groups()
        before = heldout_excess(model, groups, p.n_eval)
        run = finetune_ddpm(model, p.algorithm, p.select_on, p.steps, p.lr, p.batch, p.bins, p.ema_decay, p.eta_q, p.p_b, seed + 1, p.record_every)
        after = heldout_excess(model, groups, p.n_eval)
        w = (1 - p.p_b, p.p_b)
        stats = lambda v: (max(v) - min(v), max(v), w[0] * v[0] + w[1] * v[1])  # noqa: E731
        (gb, wb, ab), (ga, wa, aa) = stats(before), stats(after)
        return DDPMOutput(algorithm=p.algorithm, select_on=p.select_on, before=before, after=after, gap={"before": gb, "after": ga},
                          worst={"before": wb, "after": wa}, weighted={"before": ab, "after": aa}, steps=run.steps, excess_ema=run.excess_ema,
                          worst_counts=run.worst_counts, weights=run.weights, config=p.model_dump())

    CliInputs = MixtureDDPMFairnessCli

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"pretrain_steps": 3, "steps": 3, "batch": 8, "n_eval": 16, "record_every": 1}

    def run_cli(self, inputs: Any, seed: int) -> str:
        from .report import cli_text, format_ddpm, plot_ddpm

        return cli_text(self(seed=seed), format_ddpm, plot_ddpm, inputs, "egt-ddpm.png")
