"""Named property checks for ``unidflow`` (run by the conformance harness under Hypothesis).

Each invariant calls a ``check_*`` function that takes the piece under test as an argument, so
``tests/methods/test_unidflow.py`` can feed it a plausible wrong implementation (a negative control) and see
it fail; several invariants also run their own negative control inline. Everything is exact: enumerated
laws (float64, L-BFGS to 1e-6 in TV), bitwise comparisons of forwards, or enumerated world rules.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant
from zoo.common.lora import lora_layers, lora_scales

from . import exact_dpo as X
from .dfm import dfm_loss, dfm_sample, dpo_loss, elbo, target_mask
from .model import RMSNorm, TSGRMSNorm, build_unidflow
from .training import _set_trainable, trainable
from .world import LAYOUT, TASKS, TOK, all_scenes, caption_of, edit_target, encode, parse, preference_pair, random_examples, render, shared_condition

_FAST = settings(max_examples=6, deadline=None)
_SEEDS = st.integers(0, 2**31 - 1)


def _tv(p: torch.Tensor, q: torch.Tensor) -> float:
    return 0.5 * float((p - q).abs().sum())


def random_model(seed: int, shared: bool = False, modulation: bool = False):
    """A fresh toy model whose LoRA ``B`` tensors (and, if asked, norm modulations) are random, not zero."""
    m = build_unidflow(shared=shared)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in lora_layers(m.backbone):
            for name in layer.lora_B:
                layer.lora_B[name].copy_(0.3 * torch.randn(layer.lora_B[name].shape, generator=g))
        if modulation:
            for n in m.tsg:
                n.mod.weight.copy_(0.3 * torch.randn(n.mod.weight.shape, generator=g))
        m.router[2].weight.copy_(torch.randn(m.router[2].weight.shape, generator=g))
    return m


def _batch(seed: int, n: int = 6):
    g = torch.Generator().manual_seed(seed)
    tasks = [TASKS[i % 3] for i in range(n)]
    x1 = torch.cat([random_examples(t, 1, g) for t in tasks])
    return x1, torch.tensor([TASKS.index(t) for t in tasks]), torch.rand(n, generator=g), tasks, g


# ----------------------------------------------------------------------------- 1. exact DPO optimum
def check_dpo_optimum(fit: Callable[..., X.Tables], V: int, beta: float, seed: int) -> float:
    """The exact-likelihood DPO optimum's sampler law equals ``p_ref exp(r/β)`` (TV < 1e-6) and is far from
    the two plausible wrong closed forms ``∝ exp(r/β)`` (reference ignored) and ``∝ p_ref exp(β r)``."""
    g = torch.Generator().manual_seed(seed)
    ref = X.random_tables(V, g)
    r = 2.0 * torch.randn(V, V, generator=g, dtype=torch.float64)
    got = X.law(fit(ref, r, beta)).exp()
    star = X.tilted(X.law(ref), r, beta).exp()
    tv = _tv(got, star)
    assert tv < 1e-6, f"DPO optimum is {tv:.2e} (TV) from p_ref exp(r/beta)"
    for wrong in (X.tilted(torch.zeros_like(r), r, beta).exp(), X.tilted(X.law(ref), r * beta * beta, beta).exp()):
        if _tv(wrong, star) > 1e-3:  # the wrong forms differ from p* for this draw: the check must tell them apart
            assert _tv(got, wrong) > 1e-4
    return tv


@invariant("dpo-exact-optimum-is-tilted-reference")
@settings(max_examples=3, deadline=None)
@given(seed=_SEEDS, V=st.sampled_from([2, 3]), beta=st.sampled_from([0.25, 0.5, 1.0, 2.0]))
def inv_dpo_optimum(seed: int, V: int, beta: float) -> None:
    """With exact (enumerated) log-likelihoods of the two-step masked sampler on 2-token images, minimising
    the population DPO loss over the denoiser's tables reaches p* ∝ p_ref·exp(r/β) (TV < 1e-6, float64
    L-BFGS), and not the reference-free or β-inverted tilts."""
    check_dpo_optimum(lambda ref, r, b: X.fit_dpo(ref, r, b, "exact", iters=200), V, beta, seed)


# ----------------------------------------------------------------------------- 2. DPO loss identities
def check_dpo_loss(loss_fn: Callable[..., torch.Tensor], seed: int) -> None:
    """At θ = ref the loss is log 2; it strictly decreases in the margin; swapping winner and loser maps the
    margin to its negative (loss(m) + loss(−m) terms: σ(βm) + σ(−βm) = 1); identical winner and loser give log 2
    and zero gradient."""
    g = torch.Generator().manual_seed(seed)
    lw, ll, rw, rl = (torch.randn(8, generator=g, dtype=torch.float64) * 5 for _ in range(4))
    beta = 0.1 + float(torch.rand(1, generator=g))
    assert abs(float(loss_fn(lw, lw, ll, ll, beta)) - math.log(2)) < 1e-12
    m = (lw - rw) - (ll - rl)
    a = loss_fn(lw, rw, ll, rl, beta)
    b = loss_fn(ll, rl, lw, rw, beta)  # swapped
    assert abs(float(torch.exp(-a)) - float(torch.sigmoid(beta * m).log().mean().exp())) < 1e-9
    assert abs(float(torch.exp(-b)) - float(torch.sigmoid(-beta * m).log().mean().exp())) < 1e-9
    shift = torch.linspace(-3, 3, 7, dtype=torch.float64)
    vals = [float(loss_fn(lw[:1] + s, rw[:1], ll[:1], rl[:1], beta)) for s in shift]
    assert all(x > y for x, y in zip(vals, vals[1:])), "loss must strictly decrease as the winner's ELBO rises"
    x = lw.clone().requires_grad_(True)
    same = loss_fn(x, rw, x, rw, beta)
    same.backward()
    assert abs(float(same.detach()) - math.log(2)) < 1e-12 and float(x.grad.abs().max()) == 0.0


@invariant("dpo-loss-identities")
@_FAST
@given(seed=_SEEDS)
def inv_dpo_loss(seed: int) -> None:
    """mRef-DPO loss: log 2 at θ = ref, strictly decreasing in the margin, swap = margin sign flip, identical
    winner/loser -> log 2 with zero gradient."""
    check_dpo_loss(dpo_loss, seed)


def check_dpo_step_raises_margin(model, seed: int, lr: float = 1e-2) -> float:
    """One gradient step of mRef-DPO (reference = the model itself, shared t and mask) raises the winner's
    ELBO relative to the loser's on the same pairs. Returns the margin after the step (> 0)."""
    from .dfm import corrupt
    from .training import preference_batch

    g = torch.Generator().manual_seed(seed)
    w, l = preference_batch(8, g)
    t = torch.rand(8, generator=g) * 0.9
    _, masked = corrupt(w, target_mask(["gen"] * 8), t, g)
    task = torch.full((8,), TASKS.index("gen"))
    ref = copy.deepcopy(model)
    params = trainable(model, "stage3")
    for p in params:
        p.requires_grad_(True)
    with torch.no_grad():
        rw, rl = elbo(ref, w, task, t, masked), elbo(ref, l, task, t, masked)
    loss = dpo_loss(elbo(model, w, task, t, masked), rw, elbo(model, l, task, t, masked), rl, 0.5)
    grads = torch.autograd.grad(loss, params)
    with torch.no_grad():
        for p, gr in zip(params, grads):
            p -= lr * gr
        margin = float(((elbo(model, w, task, t, masked) - rw) - (elbo(model, l, task, t, masked) - rl)).mean())
    for p in params:
        p.requires_grad_(False)
    assert margin > 0, f"a DPO step moved the margin to {margin:.3g} <= 0"
    return margin


@invariant("dpo-gradient-raises-winner-over-loser")
@settings(max_examples=3, deadline=None)
@given(seed=_SEEDS)
def inv_dpo_step(seed: int) -> None:
    """On a random UniDFlow model, one small gradient step of the DPO loss (from θ = ref) makes the margin
    (ℓ_θ(w) − ℓ_ref(w)) − (ℓ_θ(l) − ℓ_ref(l)) positive."""
    check_dpo_step_raises_margin(random_model(seed), seed)


# ----------------------------------------------------------------------------- 3. TSG-RMSNorm
def check_zero_init_modulation(make_norm: Callable[[RMSNorm, int], torch.nn.Module], seed: int) -> None:
    """A freshly made TSG-RMSNorm (zero-init modulation) returns exactly the base RMSNorm, for any h."""
    g = torch.Generator().manual_seed(seed)
    base = RMSNorm(16)
    with torch.no_grad():
        base.weight.copy_(0.5 + torch.rand(16, generator=g) * 2)
    norm = make_norm(base, 8)
    x = torch.randn(3, 5, 16, generator=g) * 3
    h = torch.randn(3, 8, generator=g) * 5
    assert torch.equal(norm(x, h), base(x))


@invariant("tsg-rmsnorm-zero-init-is-base-norm")
@_FAST
@given(seed=_SEEDS, t=st.floats(0, 1), task=st.sampled_from(TASKS))
def inv_tsg(seed: int, t: float, task: str) -> None:
    """Zero-initialised modulation leaves the norm and the whole model's output unchanged (bitwise) for every
    timestep and task; the γ-applied-twice reading of Eq. 2 fails the same check (negative control)."""
    check_zero_init_modulation(lambda b, d: TSGRMSNorm(b, d), seed)
    try:
        check_zero_init_modulation(lambda b, d: TSGRMSNorm(b, d, gamma_twice=True), seed)
    except AssertionError:
        pass
    else:
        raise AssertionError("the γ² variant passed the identity check: the check has no power")
    m = random_model(seed)
    x1, _, _, _, _ = _batch(seed)
    task_ids = torch.full((x1.shape[0],), TASKS.index(task))
    with torch.no_grad():
        assert torch.equal(m(x1, torch.full((x1.shape[0],), t), task_ids), m(x1, torch.full((x1.shape[0],), t), task_ids, modulate=False))


# ----------------------------------------------------------------------------- 4. router extremes
def check_router_extremes(mix: Callable[..., torch.Tensor], model, seed: int) -> None:
    """``mix(model, x, t, task, alpha)`` at α ≡ 1 equals the understanding adapter alone and at α ≡ 0 the
    generation adapter alone (bitwise); the router's α lies in [0, 1]; with every B = 0 the model is the base."""
    x1, task_ids, t, _, _ = _batch(seed)
    B = x1.shape[0]
    with torch.no_grad():
        h = model.cond(t, task_ids)
        norms = {id(n.base): n for n in model.tsg}
        for a, only in ((1.0, "und"), (0.0, "gen")):
            with lora_scales(model.backbone, {only: 1.0}):
                single = model.backbone(x1, norms, h)
            got = mix(model, x1, t, task_ids, torch.full((B,), a))
            assert torch.equal(got, single), f"alpha = {a} is not the {only} adapter alone"
        alpha = model.alpha(torch.rand(64, generator=torch.Generator().manual_seed(seed)), torch.arange(64) % 3)
        assert bool(((alpha >= 0) & (alpha <= 1)).all())
        zero = copy.deepcopy(model)
        for layer in lora_layers(zero.backbone):
            for name in layer.lora_B:
                layer.lora_B[name].zero_()
        with lora_scales(zero.backbone, {}):
            base = zero.backbone(x1, norms and {id(n.base): n for n in zero.tsg}, zero.cond(t, task_ids))
        assert torch.equal(mix(zero, x1, t, task_ids, None), base)


@invariant("router-extremes-reduce-to-single-adapter")
@_FAST
@given(seed=_SEEDS)
def inv_router(seed: int) -> None:
    """y = Wx + α B_u A_u x + (1 − α) B_g A_g x: α ≡ 1 is the understanding adapter alone, α ≡ 0 the generation
    adapter alone (bitwise, random non-zero adapters); α ∈ [0, 1]; zero B is the frozen base."""
    check_router_extremes(lambda m, x, t, k, a: m(x, t, k, alpha=a), random_model(seed, modulation=True), seed)


# ----------------------------------------------------------------------------- 5. frozen backbone
def check_frozen_backbone(step: Callable[..., None], seed: int) -> None:
    """After a training step of every stage (I, II, router calibration, III) the backbone's base weights are bitwise unchanged, and only the
    stage's own parameters (LoRA, router, norm modulation, time/task embeddings) received gradients."""
    m = random_model(seed)
    before = {k: v.clone() for k, v in m.backbone.state_dict().items() if ".lora_" not in k}
    for stage in ("stage1", "stage2", "router", "stage3"):
        own = {id(p) for p in trainable(m, stage)}
        step(m, stage, seed)
        for n, p in m.named_parameters():
            if p.grad is not None and float(p.grad.abs().sum()) > 0:
                assert id(p) in own, f"{stage}: {n} got a gradient"
        m.zero_grad(set_to_none=True)
    after = {k: v for k, v in m.backbone.state_dict().items() if ".lora_" not in k}
    assert all(torch.equal(before[k], after[k]) for k in before), "a backbone weight changed"


def _sgd_step(m, stage: str, seed: int) -> None:
    x1, task_ids, t, tasks, g = _batch(seed)
    params = _set_trainable(m, trainable(m, stage))
    loss = dfm_loss(m, x1, task_ids, target_mask(tasks), g)
    loss.backward()
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p -= 0.1 * p.grad
    for p in params:
        p.requires_grad_(False)


@invariant("frozen-backbone-bitwise")
@settings(max_examples=3, deadline=None)
@given(seed=_SEEDS)
def inv_frozen(seed: int) -> None:
    """Training steps of stages I-III leave every base weight of the backbone bitwise unchanged; gradients
    reach only each stage's trainable set."""
    check_frozen_backbone(_sgd_step, seed)


# ----------------------------------------------------------------------------- 6. DFM loss and sampler
def check_dfm_rules(sample: Callable[..., torch.Tensor], seed: int) -> None:
    """No masked position -> loss 0; the ELBO weight κ̇/(1 − κ) = 1/(1 − t) > 0; the sampler never changes a
    condition token or an unmasked token (absorbing), and no mask is left after the last step."""
    m = random_model(seed)
    x1, task_ids, t, tasks, g = _batch(seed)
    zero = torch.zeros_like(x1, dtype=torch.bool)
    with torch.no_grad():
        assert float(dfm_loss(m, x1, task_ids, zero, g)) == 0.0  # no target position: nothing is masked
        assert float(elbo(m, x1, task_ids, t, zero).abs().max()) == 0.0
    for task in TASKS:
        cond = x1[[i for i, k in enumerate(tasks) if k == task]]
        trace: list[torch.Tensor] = []
        out = sample(m, cond, task, 5, 1.0, torch.Generator().manual_seed(seed), trace=trace)
        tgt = target_mask([task] * cond.shape[0])
        assert torch.equal(out[~tgt], cond[~tgt]), "a condition token changed"
        prev = None
        for x in trace:
            if prev is not None:
                was = prev != TOK.mask_token_id
                assert torch.equal(x[was], prev[was]), "an unmasked token changed"
            prev = x
        assert not bool((out == TOK.mask_token_id).any()), "masks left after the last step"


@invariant("dfm-loss-and-sampler-rules")
@settings(max_examples=3, deadline=None)
@given(seed=_SEEDS)
def inv_dfm(seed: int) -> None:
    """DFM: zero loss with nothing masked, absorbing sampler (conditions and unmasked tokens never change),
    no masks after the final step."""
    check_dfm_rules(dfm_sample, seed)


# ----------------------------------------------------------------------------- 7. the world's rules
def check_world(parse_fn: Callable, seed: int) -> None:
    """Every scene parses back to itself; edits keep the geometry and background; a preference pair shares a
    byte-identical condition, its winner is faithful and its loser violates exactly one caption attribute."""
    for s in all_scenes():
        assert parse_fn(render(s)) == s
    g = torch.Generator().manual_seed(seed)
    scenes = all_scenes()
    for _ in range(20):
        s = scenes[int(torch.randint(0, len(scenes), (1,), generator=g))]
        w, l = preference_pair(s, g)
        assert shared_condition(w, l) and w[LAYOUT.text] == caption_of(s)
        sw, sl = parse_fn(w[LAYOUT.image]), parse_fn(l[LAYOUT.image])
        assert sw == s and sl is not None and sum(a != b for a, b in zip(sl.caption, s.caption)) == 1
        w, l = preference_pair(s, g, "edit")
        assert shared_condition(w, l, "edit") and parse_fn(w[LAYOUT.source]) == s
        colour = TOK.colour_ids.index(w[LAYOUT.instr])
        sw, sl = parse_fn(w[LAYOUT.image]), parse_fn(l[LAYOUT.image])
        assert sw == edit_target(s, colour) and sl is not None and sum(a != b for a, b in zip(sl.caption, sw.caption)) == 1
        for c in range(4):
            e = edit_target(s, c)
            assert (e is None) == (c == s.bg)
            if e is not None:
                assert (e.bg, e.size, e.r, e.c, e.fg) == (s.bg, s.size, s.r, s.c, c)
    assert len({tuple(render(s)) for s in scenes}) == len(scenes)
    bad = encode("gen", image=[TOK.image_ids[0]] * 16)[LAYOUT.image]
    assert parse_fn(bad) is None


@invariant("world-rules-exact")
@settings(max_examples=2, deadline=None)
@given(seed=_SEEDS)
def inv_world(seed: int) -> None:
    """The shapes-and-captions world: render/parse is a bijection on the 348 scenes, edits keep geometry,
    preference pairs share their condition and differ in exactly one attribute."""
    check_world(parse, seed)
