"""RAMAC: risk-aware offline RL with a diffusion actor and a distributional (IQN) critic, trained on
``lambda_BC L_BC - eta CVaR_alpha`` (Fukazawa, Mundada, Soltani, ICML 2026, arXiv 2510.02695;
code https://github.com/KaiFukazawa/RAMAC)."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = [
    "Act", "ActionOutput", "BanditData", "DiffusionActor", "DoubleIQN", "Evaluate", "EvaluationOutput", "IQNCritic", "PRESETS",
    "RamacTrainer", "Train", "TrainConfig", "TrainOutput", "actor_loss", "bandit_dataset", "build_actor", "build_critic",
    "cvar_lower_tail", "cvar_normal", "cvar_normal_mixture", "evaluate_actions", "evaluate_actor", "fit_free_quantiles",
    "huber_quantile_normal", "pinball_loss", "quantile_huber_loss", "return_law", "sample_taus", "soft_update", "train_ramac",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "BanditData": ".bandit",
    "bandit_dataset": ".bandit",
    "evaluate_actions": ".bandit",
    "return_law": ".bandit",
    "DiffusionActor": ".nets",
    "DoubleIQN": ".nets",
    "IQNCritic": ".nets",
    "build_actor": ".nets",
    "build_critic": ".nets",
    "soft_update": ".nets",
    "Act": ".procedures",
    "ActionOutput": ".procedures",
    "Evaluate": ".procedures",
    "EvaluationOutput": ".procedures",
    "Train": ".procedures",
    "TrainOutput": ".procedures",
    "evaluate_actor": ".procedures",
    "cvar_lower_tail": ".risk",
    "cvar_normal": ".risk",
    "cvar_normal_mixture": ".risk",
    "fit_free_quantiles": ".risk",
    "huber_quantile_normal": ".risk",
    "pinball_loss": ".risk",
    "quantile_huber_loss": ".risk",
    "sample_taus": ".risk",
    "PRESETS": ".train",
    "RamacTrainer": ".train",
    "TrainConfig": ".train",
    "actor_loss": ".train",
    "train_ramac": ".train",
})

if TYPE_CHECKING:
    from .bandit import BanditData, bandit_dataset, evaluate_actions, return_law
    from .nets import DiffusionActor, DoubleIQN, IQNCritic, build_actor, build_critic, soft_update
    from .procedures import Act, ActionOutput, Evaluate, EvaluationOutput, Train, TrainOutput, evaluate_actor
    from .risk import (
        cvar_lower_tail,
        cvar_normal,
        cvar_normal_mixture,
        fit_free_quantiles,
        huber_quantile_normal,
        pinball_loss,
        quantile_huber_loss,
        sample_taus,
    )
    from .train import PRESETS, RamacTrainer, TrainConfig, actor_loss, train_ramac
