"""The ramac spec's procedures: ``Act`` (sample actions from a shipped actor), ``Evaluate`` (the
risk report of an actor on the 2-D risky bandit) and ``Train`` (the RAMAC recipe, on private copies).
Typed outputs: :class:`ActionOutput`, :class:`EvaluationOutput`, :class:`TrainOutput`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import torch

from registry.contract import Procedure, private_copies
from registry.limits import Bound, Rows
from registry.results import ProcedureOutput

from .bandit import bandit_dataset, evaluate_actions
from .params import ActCli, ActParams, ActorType, EvaluateCli, EvaluateParams, RoleName, TrainParams  # noqa: F401
from .train import RamacTrainer, TrainConfig, reinitialise
from .toy import init_seeds

__all__ = ["Act", "ActionOutput", "Evaluate", "EvaluationOutput", "Train", "TrainOutput"]

#: the role an ``actor: flow`` recipe / sampler uses when ``role`` is left at ``actor``
FLOW_ROLE = "actor-rafmac"


def resolve_role(role: str, actor_type: str, models: Any) -> str:
    """``role``, or :data:`FLOW_ROLE` for ``actor: flow`` with the default role; checks the model's type."""
    from .nets import DiffusionActor, FlowActor

    name = FLOW_ROLE if actor_type == "flow" and role == "actor" else role
    want = FlowActor if actor_type == "flow" else DiffusionActor
    model = models[name]
    if not isinstance(model, want):
        raise ValueError(f"actor: {actor_type} needs a {want.__name__} role, but role {name!r} is a {type(model).__name__}")
    return name


@dataclass
class ActionOutput(ProcedureOutput):
    """``actions`` ``(B, action_dim)`` in ``[-max_action, max_action]`` for ``states`` ``(B, state_dim)``."""

    actions: Any = None
    states: Any = None


class Act(Procedure):
    """Sample actions ``a ~ pi(. | s)`` from an actor role by its reverse diffusion chain (``actor:
    diffusion``) or its K-step flow-matching Euler chain (``actor: flow``, RAFMAC). The chain's noise comes
    from ``noise`` ``(B, T + 1, action_dim)`` (flow: ``(B, 1, action_dim)``, the start ``x_0``) if given,
    else from ``seed``; each row depends on its own state and noise only (batch independent)."""

    kind = "sampler"
    batch_independent = True

    Params = ActParams

    CliInputs = ActCli

    @property
    def actor(self) -> Any:
        return self.models[resolve_role(self.params.role, self.params.actor, self.models)]

    @torch.no_grad()
    def __call__(self, *, seed: int = 0, states: Annotated[torch.Tensor, Bound("rows")] | None = None,
                 noise: Annotated[torch.Tensor, Bound("rows")] | None = None, n: Rows = 2) -> ActionOutput:
        actor = self.actor
        if states is None:
            states = torch.zeros(n if noise is None else noise.shape[0], actor.state_dim)
        if noise is None:
            noise = actor.chain_noise(states.shape[0], torch.Generator().manual_seed(int(seed)))
        if noise.shape != (states.shape[0], actor.noise_len, actor.action_dim):
            raise ValueError(f"noise must have shape ({states.shape[0]}, {actor.noise_len}, {actor.action_dim}), got {tuple(noise.shape)}")
        return ActionOutput(actions=actor(states.float(), noise=noise.float()), states=states)

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        actor = self.actor
        g = torch.Generator().manual_seed(12345)
        return {"states": torch.zeros(batch_size, actor.state_dim), "noise": actor.chain_noise(batch_size, g)}

    def input_rows(self, inputs: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"states": inputs["states"][i : i + 1], "noise": inputs["noise"][i : i + 1]} for i in range(inputs["states"].shape[0])]

    def output_rows(self, outputs: ActionOutput) -> list[ActionOutput]:
        return [ActionOutput(actions=outputs.actions[i : i + 1], states=outputs.states[i : i + 1]) for i in range(outputs.actions.shape[0])]

    def run_cli(self, inputs: Any, seed: int) -> str:
        n = inputs.n if inputs is not None else 8
        out = self(seed=seed, n=n)
        ev = evaluate_actions(out.actions, generator=torch.Generator().manual_seed(seed))
        rows = "; ".join(f"({x:+.2f}, {y:+.2f})" for x, y in out.actions[:8].tolist())
        return (f"{n} actions of {self.params.role} (first {min(n, 8)}: {rows}); safe {ev['safe_rate']:.2f}, risky {ev['risky_rate']:.2f}, "
                f"OOD {ev['ood_rate']:.2f}; exact CVaR_0.1 {ev['exact_cvar']:+.2f}, exact mean {ev['exact_mean']:+.2f}")


@dataclass
class EvaluationOutput(ProcedureOutput):
    """Risk report of one actor on the bandit: ``cvar`` / ``mean`` (one reward per action, the paper's
    rule), ``exact_cvar`` / ``exact_mean`` (the return law its region occupancy induces), ``ood_rate``,
    ``safe_rate``, ``risky_rate``, ``occupancy`` per mode, ``n``, ``alpha``, ``role``; ``actions`` too."""

    role: str = ""
    n: int = 0
    alpha: float = 0.1
    cvar: float = 0.0
    mean: float = 0.0
    exact_cvar: float = 0.0
    exact_mean: float = 0.0
    ood_rate: float = 0.0
    safe_rate: float = 0.0
    risky_rate: float = 0.0
    occupancy: Any = None
    actions: Any = None


def evaluate_actor(actor: Any, n: int, alpha: float, seed: int, role: str = "actor") -> EvaluationOutput:
    """Sample ``n`` actions (state 0; chain noise from ``seed``) and score them (rewards from ``seed + 1``)."""
    with torch.no_grad():
        acts = actor(torch.zeros(n, actor.state_dim), generator=torch.Generator().manual_seed(int(seed)))
    ev = evaluate_actions(acts, alpha, torch.Generator().manual_seed(int(seed) + 1))
    return EvaluationOutput(role=role, actions=acts, **ev)


class Evaluate(Procedure):
    """Mean, CVaR_alpha (empirical and exact), OOD rate and mode occupancy of an actor's actions on the
    2-D risky bandit (method note sec. 6)."""

    kind = "analysis"

    Params = EvaluateParams

    CliInputs = EvaluateCli

    def __call__(self, *, seed: int = 0) -> EvaluationOutput:
        return evaluate_actor(self.models[self.params.role], self.params.n, self.params.alpha, seed, self.params.role)

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {}

    def run_cli(self, inputs: Any, seed: int) -> str:
        ev = self(seed=seed)
        text = (f"{self.params.role}: CVaR_{ev.alpha:g} {ev.cvar:+.3f} (exact {ev.exact_cvar:+.3f}), mean {ev.mean:+.3f} (exact {ev.exact_mean:+.3f}), "
                f"OOD {ev.ood_rate:.3f}, safe {ev.safe_rate:.3f}, risky {ev.risky_rate:.3f} over {ev.n} actions")
        if inputs is not None and getattr(inputs, "out", None):
            from zoo.common.toys2d import plot_density_samples, risky_bandit

            path = plot_density_samples(risky_bandit(), ev.actions, inputs.out, lim=1.0, title=text[:80])
            text += f"; wrote {path}"
        return text


@dataclass
class TrainOutput(ProcedureOutput):
    """What :class:`Train` returns: the trained weights ``actor_state`` and ``critic_state`` (state dicts),
    the loss ``history``, the ``evaluation`` of the trained actor and the ``config``. The trained modules
    themselves (private copies) are the attributes ``.actor`` and ``.critic`` (not keys: outputs compare
    by value). ``state_dict()`` is the actor's (what ``produces: actor`` reloads)."""

    actor_state: Any = None
    critic_state: Any = None
    history: Any = None
    evaluation: Any = None
    config: Any = None

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.actor_state


class Train(Procedure):
    """The RAMAC training recipe (and its baselines through ``lambda_bc`` / ``eta`` / ``risk``) on the 2-D
    risky bandit. Trains *private copies* of the ``actor`` and ``critic`` roles, re-initialised from
    ``seed`` (``init: scratch``, the default; the same start as ``zoo train ramac``) or starting
    from the roles' weights (``init: finetune``). With the toy defaults, ``seed = 0`` and the ``ramac``
    preset's parameters it reproduces the shipped RAMAC actor bit for bit (``steps`` 3500; slow).
    ``actor: flow`` trains the ``actor-rafmac`` role (RAFMAC's flow-matching actor) instead."""

    kind = "training"
    mutates_models = True

    Params = TrainParams

    def __call__(self, *, seed: int = 0, progress: bool = False) -> TrainOutput:
        p = self.params
        role = resolve_role("actor", p.actor, self.models)
        models = private_copies(self.models, [role, "critic"])  # never train the shared roles, even if called twice
        actor, critic = models[role], models["critic"]
        g_seed, a_seed, c_seed = init_seeds(int(seed))
        if p.init == "scratch":
            reinitialise(actor, a_seed)
            reinitialise(critic, c_seed)
        g = torch.Generator().manual_seed(g_seed)
        data = bandit_dataset(p.data_size, g)
        cfg = TrainConfig(**{k: getattr(p, k) for k in TrainConfig.model_fields})
        res = RamacTrainer(actor, critic, data, cfg, g).run(progress=progress).result()
        ev = evaluate_actor(res.actor, p.eval_n, p.alpha, 1)
        out = TrainOutput(actor_state=dict(res.actor.state_dict()), critic_state=dict(res.critic.state_dict()), history=res.history,
                          evaluation=ev, config=p.model_dump())
        out.actor, out.critic = res.actor, res.critic  # attributes, not keys
        return out

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"steps": 6, "eta_warmup": 2, "eta_ramp": 2, "batch_size": 16, "risk_batch": 8, "data_size": 64, "eval_n": 16}

    def run_cli(self, inputs: Any, seed: int) -> str:
        out = self(seed=seed, progress=True)
        ev = out.evaluation
        return (f"trained {self.params.steps} steps ({self.params.actor} actor, lambda_bc {self.params.lambda_bc:g}, eta {self.params.eta:g}, risk {self.params.risk}): "
                f"CVaR_0.1 {ev.cvar:+.3f} (exact {ev.exact_cvar:+.3f}), mean {ev.mean:+.3f}, OOD {ev.ood_rate:.3f}")
