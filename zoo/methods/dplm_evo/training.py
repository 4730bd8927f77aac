"""Training DPLM-Evo (and its ablations) on the toy family: minibatches of family members, a uniform alignment
``z_0 ∈ Γ(x_0)`` in the 2L latent (:func:`zoo.common.varlen.random_alignment`), ``t ~ U(ε, 1]``, one draw of the
forward kernel (:func:`.noise.noise_latent`) and the edit loss (:func:`.noise.edit_loss`) with the diffusion ELBO
weight ``λ_t = 1/t`` of the linear schedule (the note's ``λ_{t−1}``; until this issue's fix the toys were trained
with a constant weight). The contextual kernel
starts after a warm-up of plain mask noise (``ρ_mask = 1``; paper Sec. 3 "Training recipe") and uses the
network being trained, in eval mode, without gradient.

Shared by :mod:`.train` (``zoo train dplm-evo``: the shipped toy weights) and the ``train-dplm-evo`` recipe.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import torch

from zoo.common.training import adamw_one_cycle, optimizer_step, progress
from zoo.common.varlen import align, pad_rows, random_alignment

from .model import GAP, PAD, DPLMEvoNet
from .noise import Knobs, edit_loss, labels, noise_latent
from .params import NETWORKS

__all__ = ["TrainConfig", "CONFIGS", "SEEDS", "sample_t", "train", "train_named", "training_seed", "trained_replicate",
           "replicate_key"]


def sample_t(batch_size: int, t_min: float, proposal: str, generator: torch.Generator | None
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(t [B], importance weight [B] or None)``. ``"uniform"``: ``t = t_min + (1 − t_min) u``, ``u ~ U[0, 1)``,
    no weight (the historical draw, bit-identical). ``"square"``: ``t = t_min + (1 − t_min) u²`` puts more rows at
    small ``t`` (proposal density ``p(t) = 1 / ((1 − t_min) · 2u)``); each row is weighted by
    ``w = p_U(t) / p(t) = 2u`` so ``E_prop[w · ℓ(t)] = E_U[ℓ(t)]`` for any per-row loss ``ℓ``: the same objective
    with a different sampling of ``t`` (importance sampling of the ELBO's time integral, a variance-reduction device
    as in Kingma et al. 2021, "Variational Diffusion Models", Sec. 5 / App. I, https://arxiv.org/abs/2107.00630,
    where the ELBO's value is invariant to how t is sampled and only its variance changes), not a different loss."""
    u = torch.rand(batch_size, generator=generator)
    if proposal == "uniform":
        return t_min + (1 - t_min) * u, None
    if proposal == "square":
        return t_min + (1 - t_min) * u * u, 2 * u
    raise ValueError(f"unknown t_proposal {proposal!r}; 'uniform' or 'square'")


@dataclass(frozen=True)
class TrainConfig:
    knobs: Knobs = Knobs()
    gamma_sub: float = 1.0
    gamma_del: float = 1.0
    gamma_ins: float = 1.0
    steps: int = 2500
    batch_size: int = 64
    lr: float = 3e-3
    warmup_fraction: float = 0.3  # mask-noise warm-up before the contextual kernel
    t_min: float = 1e-3
    weighting: str = "elbo"  # λ_t = 1 / t, the diffusion ELBO weight of the note's loss ("none": constant, noise.edit_loss)
    t_proposal: str = "uniform"  # how t is drawn: "uniform" (U(t_min, 1]) or "square" (importance-weighted, sample_t)


#: The shipped toy models: the paper's contextual kernel, the two kernel ablations, and the masked baseline.
CONFIGS: dict[str, TrainConfig] = {
    "contextual": TrainConfig(Knobs(kernel="contextual")),
    "uniform": TrainConfig(Knobs(kernel="uniform")),
    "blosum62": TrainConfig(Knobs(kernel="blosum62")),
    # DPLM's public code trains with a constant weight (bytedance/dplm, src/byprot/tasks/lm/dplm.py: learning.weight
    # defaults to 'constant'), so the masked baseline keeps it.
    "masked": TrainConfig(Knobs(0.0, 0.0, 1.0, "uniform"), gamma_del=0.0, gamma_ins=0.0, weighting="none"),
    # The same masked baseline with DPLM-Evo's ELBO weight: it differs from the three DPLM-Evo networks in the
    # kernel only (issue 37: "masked" differs in the kernel *and* the weighting).
    "masked-elbo": TrainConfig(Knobs(0.0, 0.0, 1.0, "uniform"), gamma_del=0.0, gamma_ins=0.0, weighting="elbo"),
}
assert tuple(CONFIGS) == NETWORKS, "params.Network must list training.CONFIGS' names in order"

#: The shipped networks' training seeds (``masked-elbo`` shares ``masked``'s, so the two baselines differ in the
#: loss weight alone: the same initialisation, minibatches and noise draws).
SEEDS: dict[str, int] = {"contextual": 0, "uniform": 1, "blosum62": 2, "masked": 3, "masked-elbo": 3}


def training_seed(name: str, replicate: int) -> int:
    """The seed of training replicate ``replicate`` of ``CONFIGS[name]``: ``SEEDS[name] + 10 · replicate``
    (replicate 0 is the shipped network)."""
    if name not in SEEDS:
        raise ValueError(f"network: expected one of {sorted(SEEDS)}, got {name!r}")
    if replicate < 0:
        raise ValueError(f"replicate: expected >= 0, got {replicate}")
    return SEEDS[name] + 10 * replicate


def train(net: DPLMEvoNet, data: Sequence[torch.Tensor], cfg: TrainConfig, n_latent: int, generator: torch.Generator,
          show_progress: bool = True) -> list[float]:
    """Train ``net`` in place; returns the loss per step. Draw order per step: row indices, alignment, ``t``,
    the four kernel draws (reproducible from ``generator``)."""
    opt, sched = adamw_one_cycle(net.parameters(), cfg.lr, cfg.steps)
    warm = int(cfg.warmup_fraction * cfg.steps) if cfg.knobs.kernel == "contextual" else 0
    losses: list[float] = []
    it = range(cfg.steps)
    bar = progress(it, "train dplm-evo") if show_progress else it
    for step in bar:
        idx = torch.randint(0, len(data), (cfg.batch_size,), generator=generator)
        tok, lengths = pad_rows([data[int(i)] for i in idx], PAD)
        present = random_alignment(lengths, n_latent, generator)
        z0 = align(tok, lengths, present, GAP)
        t, w = sample_t(cfg.batch_size, cfg.t_min, cfg.t_proposal, generator)
        knobs = dataclasses.replace(cfg.knobs, rho_mask=1.0) if step < warm else cfg.knobs
        net.eval()
        noised = noise_latent(z0, t, knobs, generator, net)
        net.train()
        loss, _ = edit_loss(net, labels(noised.z0, noised.zt, noised.noised), cfg.gamma_sub, cfg.gamma_del, cfg.gamma_ins,
                            normalizer=cfg.batch_size * n_latent / 2, t=noised.t, weighting=cfg.weighting, row_weight=w)
        optimizer_step(net, opt, sched, loss)
        losses.append(float(loss.detach()))
        if show_progress and step % 100 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    net.eval()
    return losses


def train_named(name: str, family_name: str = "conserved-core", replicate: int = 0, show_progress: bool = True
                ) -> tuple[DPLMEvoNet, list[float]]:
    """Train ``CONFIGS[name]`` on the toy family ``family_name`` (:data:`.family.FAMILIES`) from
    :func:`training_seed` ``(name, replicate)``, one thread, exactly as the shipped networks are made
    (``zoo train dplm-evo``, :func:`.train.train_family`; replicate 0 reproduces the shipped file byte for byte). The seed drives the
    minibatch, alignment, ``t`` and kernel draws; the initial weights are ``build_toy``'s fixed draw (torch seed 0)
    for replicate 0, as shipped, and a draw from the same seed for a replicate ``r >= 1``, so the training-seed
    spread covers the initialisation too."""
    from zoo.common.training import setup_deterministic

    from .family import N_LATENT, named_family
    from .model import DPLMEvoNet, build_toy

    if name not in CONFIGS:
        raise ValueError(f"network: expected one of {sorted(CONFIGS)}, got {name!r}")
    data = named_family(family_name).train_tensor()
    seed = training_seed(name, replicate)
    g = setup_deterministic(seed)
    net = build_toy()
    if replicate > 0:
        torch.manual_seed(seed)
        net = DPLMEvoNet(net.config).eval()
    losses = train(net, data, CONFIGS[name], N_LATENT, g, show_progress=show_progress)
    return net, losses


#: Bump when :func:`train` changes what a seed produces (it invalidates the cached replicates).
REPLICATE_VERSION = 1


def replicate_key(name: str, family_name: str, replicate: int) -> list:
    """The cache key of one training replicate: everything that decides its weights (recipe, family, seed, torch)."""
    from .family import FAMILIES

    if name not in CONFIGS:
        raise ValueError(f"network: expected one of {sorted(CONFIGS)}, got {name!r}")
    if family_name not in FAMILIES:
        raise ValueError(f"family: expected one of {sorted(FAMILIES)}, got {family_name!r}")
    return ["dplm-evo-replicate", REPLICATE_VERSION, name, family_name, FAMILIES[family_name],
            dataclasses.asdict(CONFIGS[name]), training_seed(name, replicate), torch.__version__]


def trained_replicate(name: str, family_name: str, replicate: int, show_progress: bool = True) -> DPLMEvoNet:
    """:func:`train_named` ``(name, family_name, replicate)``, its state dict cached as safetensors under
    :func:`replicate_key` (``registry.contract.cached_artifact``, namespace ``dplm-evo``; written atomically), so a
    killed seed-spread run resumes where it stopped. A cache entry is data only: it is loaded into a freshly built
    toy network with ``strict=True`` (a wrong or foreign file is a one-line error naming it, never code)."""
    from registry.artifacts import artifact_path
    from registry.contract import cached_artifact

    from .model import build_toy

    key = replicate_key(name, family_name, replicate)
    state = cached_artifact(key, lambda: train_named(name, family_name, replicate, show_progress)[0].state_dict(),
                            "safetensors", namespace="dplm-evo")
    net = build_toy()
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as e:
        path = artifact_path(key, "safetensors", "dplm-evo")
        raise ValueError(f"{path}: not a {name} replicate of the toy network ({str(e).splitlines()[0]}); delete it to retrain") from None
    return net.eval()
