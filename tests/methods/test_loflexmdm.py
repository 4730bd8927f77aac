"""LoFlexMDM / FlexMDM behaviour beyond the specs' invariants: the released-checkpoint loading path (converter +
strict loading on a tiny random DDiT saved under the release's file name), the pipelines and samplers through
the specs, finite φ gradients of the joint objective, the trained toy's learned schedule, and one-line errors."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import zoo
from registry.build import build_model as registry_build
from registry.loader import load_spec_file
from registry.errors import BuildError, ParamError
from registry.spec import HubFile
from registry.weights import save_state, sha256_file
from zoo.methods.loflexmdm.core import joint_loss
from zoo.methods.loflexmdm.metrics import evaluate, insertion_calibration, learned_schedule
from zoo.methods.loflexmdm.model import build_model, from_upstream, to_upstream
from zoo.methods.loflexmdm.sampler import SamplerConfig
from zoo.methods.loflexmdm.tasks import Task


SPECS = Path(__file__).resolve().parents[2] / "specs"


def _full_source(spec: str):
    return SPECS, load_spec_file(SPECS / f"{spec}.yaml").models["model"].variants["full"]


@pytest.mark.parametrize("spec", ["loflexmdm", "flexmdm"])
def test_release_loading_path_on_a_tiny_ddit(spec: str, tmp_path: Path) -> None:
    """The full variant's weights are one hub file read through ``from_upstream``: a tiny random DDiT (toy size,
    same module tree as the paper-sized one) saved with the release's key prefixes under the same file name
    loads back exactly through the registry's builder; a key the converter does not know is refused in one line."""
    spec_dir, src = _full_source(spec)
    assert isinstance(src.weights, HubFile) and src.weights.allow_unpinned and src.convert.endswith(":from_upstream")
    schedule = src.config["schedule"]
    ref = build_model(task="checksum", schedule=schedule)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(torch.randn_like(p))
    upstream = to_upstream(ref.state_dict())
    assert any(k.startswith("model.") for k in upstream) and not any(k.startswith("generator.") for k in upstream)
    assert (schedule == "linear") != any(k.startswith("aux_model.") for k in upstream)
    path = tmp_path / src.weights.filename
    save_state(upstream, path)
    local = src.model_copy(update={"weights": str(path), "sha256": sha256_file(path),
                                   "config": {"task": "checksum", "schedule": schedule}})
    got = registry_build(local, spec_dir=spec_dir, device="cpu", allow_outside_paths=True)
    for k, v in ref.state_dict().items():
        assert torch.equal(got.state_dict()[k], v), k
    bad = dict(upstream)
    bad["lightning.extra"] = torch.zeros(1)
    save_state(bad, path)
    local = local.model_copy(update={"sha256": sha256_file(path)})
    with pytest.raises(BuildError) as exc:
        registry_build(local, spec_dir=spec_dir, device="cpu", allow_outside_paths=True)
    assert "\n" not in str(exc.value)
    assert from_upstream(to_upstream({"generator.embed.weight": 1, "aux.x": 2})) == {"generator.embed.weight": 1, "aux.x": 2}


def test_full_variant_is_declared_only_and_paper_sized_model_needs_a_vocab() -> None:
    with pytest.raises(Exception, match="declared-only"):
        zoo.load("loflexmdm", variant="full")
    with pytest.raises(ValueError, match="vocab_size"):
        build_model(task="bracket-safe", size="toy")
    m = build_model(task="bracket-safe", size="toy", vocab_size=64, scalar_fn="exp")
    assert m.zoo_tokenizer is None and m.generator.embed.num_embeddings == 64


@pytest.mark.parametrize("spec", ["loflexmdm", "flexmdm"])
def test_pipeline_samples_are_reproducible_and_bounded(spec: str) -> None:
    pipe = zoo.load(spec)  # toy first: the checksum task
    assert pipe.variant == "toy"
    a = pipe(seed=3, num_samples=6)
    b = pipe(seed=3, num_samples=6)
    assert a.texts == b.texts and len(a.texts) == 6
    assert all(1 <= len(t) <= 8 for t in a.texts) and all("<mask>" not in t for t in a.texts)
    assert all(st["steps"] == 16 for st in a.stats)
    c = pipe(seed=3, num_samples=6, max_steps=4)
    assert all(st["steps"] == 4 for st in c.stats)
    with pytest.raises(ParamError, match="max_steps"):
        pipe(seed=0, num_samples=2, max_steps=0)


def test_flexmdm_has_no_aux_and_loflexmdm_phi_respects_min_rate() -> None:
    flex = zoo.load("flexmdm").models["model"]
    lo = zoo.load("loflexmdm").models["model"]
    assert flex.aux is None and lo.aux is not None and lo.a == 1.0 and lo.fix_b_um == 1.0
    task = Task("checksum")
    z1, fixed, valid = task.encode_latents(task.sample_texts(32, torch.Generator().manual_seed(0)), lo.zoo_tokenizer)
    b_in, b_um = lo.aux_rates(z1, valid)
    assert bool((b_in >= 1.01).all()) and bool((b_um == 1.0).all())


def test_joint_objective_has_finite_phi_gradients() -> None:
    """Empty gaps (target 0) and P_clean underflow must not turn φ's gradient into NaN (both happen at every step)."""
    m = build_model(task="brackets")
    tok = m.zoo_tokenizer
    task = Task("brackets")
    g = torch.Generator().manual_seed(0)
    z1, fixed, valid = task.encode_latents(task.sample_texts(64, g), tok)
    loss, stats = joint_loss(m, z1, fixed, valid, tok.mask_token_id, tok.pad_token_id, g)
    loss.backward()
    grads = [p.grad for p in m.aux.parameters() if p.grad is not None]
    assert grads and all(bool(torch.isfinite(gr).all()) for gr in grads)
    assert any(float(gr.abs().sum()) > 0 for gr in grads)
    assert set(stats) == {"loss_theta", "reinforce", "regulariser"}


def test_trained_toys_beat_untrained_models() -> None:
    """The shipped weights carry the task's structure: 256 samples at 16 steps are far more often well-formed
    (digits, '=', one digit) than those of the same architecture at random init, with a closer length law.
    (The check digit itself: `test_trained_generators_learn_the_check_digit`.)"""
    cfg = SamplerConfig(max_steps=16)
    for spec, schedule in (("flexmdm", "linear"), ("loflexmdm", "kumaraswamy")):
        trained = evaluate(zoo.load(spec).models["model"], 256, cfg)
        random = evaluate(build_model(task="checksum", schedule=schedule), 256, cfg)
        assert trained["format_rate"] > random["format_rate"] + 0.3
        assert trained["length_tv"] < random["length_tv"]


def test_learned_schedule_report_shape() -> None:
    lo = learned_schedule(zoo.load("loflexmdm").models["model"], 128)
    flex = learned_schedule(zoo.load("flexmdm").models["model"], 128)
    assert flex["ratio"] == 1.0 and flex["checksum"] == 1.0
    assert set(lo) >= {"checksum", "free", "separator", "ratio", "spearman", "per_position", "by_length"}
    assert -1.0 <= lo["spearman"] <= 1.0


# --------------------------------------------------------------------------- the sampler against exact rates
def _oracle_lengths(task: Task, a: float, b: float, steps: int, n: int, gap_share: float = 1.0, seed: int = 0) -> float:
    """Length TV of ``n`` τ-leaping draws whose generator is the exact length-law oracle (see ``oracle.py``)."""
    from zoo.methods.loflexmdm.metrics import length_tv
    from zoo.methods.loflexmdm.oracle import OracleLengthModel
    from zoo.methods.loflexmdm.sampler import tau_leap

    tok = task.tokenizer()
    model = OracleLengthModel(task.length_law(), tok.vocab_size, [tok.encode_raw(c)[0] for c in task.symbols], a, b, gap_share)
    g = torch.Generator().manual_seed(seed)
    _, lengths, _ = tau_leap(model, n, SamplerConfig(max_steps=steps), g, tok.eos_token_id, tok.mask_token_id, tok.pad_token_id,
                             4 * task.max_len)
    return length_tv(["x" * (int(k) - 1) for k in lengths], task)


def test_oracle_rates_match_the_forward_process() -> None:
    """The oracle's ``E[L - n | n, t]`` (posterior ∝ P(L) C(L, n) F^n (1 - F)^(L - n)) equals the Monte Carlo mean
    of the forward process (L from the law, every position present with probability F(t; a, b)), within 5 SE."""
    from zoo.methods.loflexmdm.oracle import OracleLengthModel
    from zoo.methods.loflexmdm.schedule import kuma_cdf

    task = Task("brackets")
    law = task.length_law()
    m = OracleLengthModel(law, 8, [0], a=2.0, b=3.0)
    g = torch.Generator().manual_seed(0)
    big = 200_000
    ls = torch.tensor(sorted(law))[torch.multinomial(torch.tensor([law[k] for k in sorted(law)]), big, True, generator=g)]
    for t in (0.2, 0.5, 0.8):
        f = float(kuma_cdf(torch.tensor(t, dtype=torch.float64), 2.0, 3.0))
        present = (torch.rand(big, 10, generator=g) < f) & (torch.arange(10)[None] < ls[:, None])
        n = present.sum(1)
        for k in (0, 2, 5):
            sel = n == k
            if int(sel.sum()) < 500:
                continue
            rem = (ls[sel] - k).double()
            want = float(m.expected_remaining(torch.tensor([k]), torch.tensor([t]))[0])
            assert abs(float(rem.mean()) - want) < 5 * float(rem.std()) / float(sel.sum()) ** 0.5 + 1e-9, (t, k)


def test_tau_leaping_with_exact_rates_draws_the_length_law() -> None:
    """Given the exact conditional insertion rate of a known length law (brackets: 2..10 even, uniform; shared
    Kumaraswamy(2, 3) schedule), the real τ-leaping sampler reproduces the law: TV < 0.1 over 1000 draws at 128
    steps (Monte Carlo floor ≈ 0.025, τ-leaping bias ≈ 0.01; measured 0.028-0.051 over three seeds). Negative
    controls: every gap's rate 0.8x or 1.25x the exact one gives TV > 0.15 (measured 0.18-0.23). A sampler that
    drops or double-counts a gap, mis-scales the hazard or mis-steps t fails this."""
    task = Task("brackets")
    assert _oracle_lengths(task, 2.0, 3.0, 128, 1000) < 0.1
    assert _oracle_lengths(task, 2.0, 3.0, 128, 500, gap_share=0.8) > 0.15
    assert _oracle_lengths(task, 2.0, 3.0, 128, 500, gap_share=1.25) > 0.15


@pytest.mark.slow
def test_tau_leaping_linear_schedule_converges_to_the_length_law() -> None:
    """FlexMDM's linear schedule (a = b = 1) with exact rates: the checksum length law (5..8 uniform) within TV 0.06
    at 512 steps (1000 draws; measured 0.009-0.032), while at 64 steps the τ-leaping grid alone leaves TV ≈ 0.05
    on this law (and 0.16 on the brackets law): the bar TV < 0.05 is a many-step bar for any generator."""
    task = Task("checksum")
    assert _oracle_lengths(task, 1.0, 1.0, 512, 1000) < 0.06
    assert _oracle_lengths(task, 1.0, 1.0, 512, 1000, gap_share=0.8) > 0.12
    assert _oracle_lengths(Task("brackets"), 1.0, 1.0, 64, 2000) > 0.1


def test_checksum_task_check_digit_is_the_last_free_digit() -> None:
    task = Task("checksum")
    texts = task.sample_texts(200, torch.Generator().manual_seed(0))
    assert all(task.valid(s) and s[-1] == s[-3] and s[-2] == "=" for s in texts)
    assert {len(s) for s in texts} == set(task.length_law())
    assert not task.valid("0123=4") and task.valid("0123=3") and not task.valid("01=1")


def test_trained_generators_learn_the_check_digit() -> None:
    """Both retrained checksum generators predict the check digit far above chance (0.2) among well-formed
    samples (256 samples, 16 steps; measured 0.75-0.91): the earlier (d_{n-1} + d_n) mod 5 toys stayed at 0.20."""
    from zoo.methods.loflexmdm.metrics import check_digit_accuracy

    for spec in ("flexmdm", "loflexmdm"):
        pipe = zoo.load(spec)
        assert check_digit_accuracy(pipe, sampler="tau-leaping-plain", n=256) > 0.5, spec


def _grads(model, cfg, seed: int = 0) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    task = Task("checksum")
    tok = model.zoo_tokenizer
    g = torch.Generator().manual_seed(seed)
    z1, fixed, valid = task.encode_latents(task.sample_texts(48, g), tok)
    model.zero_grad()
    loss, _ = joint_loss(model, z1, fixed, valid, tok.mask_token_id, tok.pad_token_id, g, cfg)
    loss.backward()
    grab = lambda ps: [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in ps]  # noqa: E731
    return grab(model.generator.parameters()), grab(model.aux.parameters())


def test_unit_time_weight_leaves_phi_with_the_papers_objective() -> None:
    """``time_weight="unit"`` reweights θ's loss only: φ's gradient (REINFORCE reward + the pathwise term through
    the target hazards) is exactly the one of the paper's hazard-weighted loss, while θ's gradient differs.
    Dividing the reward by h(t) too (the first toys) changes φ's gradient; on the checksum toy it flipped its sign
    (finite differences on the trained generator: dE[L]/db_in < 0 with the paper's weighting, > 0 with unit
    weighting, so every b_in fell to min_rate 1.01; see the card)."""
    from zoo.methods.loflexmdm.core import LossConfig

    m = build_model(task="checksum")
    with torch.no_grad():
        for p in m.aux.parameters():
            p.add_(0.3 * torch.randn_like(p, generator=torch.Generator().manual_seed(1)))
    th_h, ph_h = _grads(m, LossConfig(time_weight="hazard"))
    th_u, ph_u = _grads(m, LossConfig(time_weight="unit"))
    assert any(float(g.abs().sum()) > 0 for g in ph_h)
    for a, b in zip(ph_h, ph_u):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    assert any(not torch.allclose(a, b, rtol=1e-2) for a, b in zip(th_h, th_u))


def test_training_clips_theta_and_phi_separately(monkeypatch: pytest.MonkeyPatch) -> None:
    """φ's hazard-weighted gradients (up to ~1e4 near t = 1) must not shrink θ's step: with a loss whose φ part
    is 1e6 times larger on the first step than on the second, θ's parameters after two steps are exactly those of
    a run whose loss has no φ part (a global clip would scale θ's first gradient by ~1e-6 and change them)."""
    import copy

    from zoo.methods.loflexmdm import training

    calls = {"n": 0}

    def fake_loss(with_phi: bool):
        def f(model, *args, **kwargs):
            calls["n"] += 1
            gen = sum((p * (k + 1)).sum() for k, p in enumerate(model.generator.parameters()))
            aux = sum(p.sum() for p in model.aux.parameters()) * (1e6 if calls["n"] % 2 else 1e-3)
            loss = gen + (aux if with_phi else 0.0 * aux)
            return loss, {"loss_theta": float(gen.detach())}
        return f

    base = build_model(task="checksum")
    out = []
    for with_phi in (True, False):
        m = copy.deepcopy(base)
        monkeypatch.setattr(training, "joint_loss", fake_loss(with_phi))
        training.train(m, Task("checksum"), 2, 4, 1e-2, 1e-2, torch.Generator().manual_seed(0))
        out.append([p.detach().clone() for p in m.generator.parameters()])
    for a, b in zip(*out):
        assert torch.equal(a, b)


def _oracle_as_model(task: Task, gap_share: float = 1.0):
    from zoo.methods.loflexmdm.oracle import OracleLengthModel

    tok = task.tokenizer()
    model = OracleLengthModel(task.length_law(), tok.vocab_size, [tok.encode_raw(c)[0] for c in task.symbols], gap_share=gap_share)
    model.zoo_tokenizer, model.zoo_task, model.zoo_max_length = tok, task.name, task.latent_len
    return model


def test_insertion_calibration_is_exact_for_the_oracle_and_flags_a_wrong_rate() -> None:
    """`insertion_calibration` (the length diagnosis in the card) reports, along the sampler's own trajectories,
    the remaining insertions implied by the generator's total rate next to the exact `E[L - k | k, t]`: equal (to
    float32) for the exact-rate oracle at every (t, k) it visits, and 1.25x the exact value for an oracle whose
    every gap is 1.25x too fast (a table that compared the wrong quantity, or mis-scaled by the gap count or
    the hazard, fails one of the two)."""
    task = Task("checksum")
    exact = insertion_calibration(_oracle_as_model(task), 200, 32)
    assert len({k for _, k in exact}) >= 5 and sum(r[2] for r in exact.values()) >= 200 * 32
    for model_rem, true_rem, _ in exact.values():
        assert model_rem == pytest.approx(true_rem, rel=1e-5, abs=1e-6)
    fast = insertion_calibration(_oracle_as_model(task, gap_share=1.25), 200, 32)
    ratios = [m / e for m, e, _ in fast.values() if e > 1e-3]
    assert ratios and all(r == pytest.approx(1.25, rel=1e-4) for r in ratios)


@pytest.mark.parametrize("schedule", ["linear", "kumaraswamy"])
def test_survival_insertion_head_vanishes_at_the_clean_end_for_any_weights(schedule: str) -> None:
    """`insertion_head: survival` (the card's departure): θ's insertion multiplier is the rate head times
    `(1 - t^a)^b_ref`, so on a finished clean row the implied remaining insertions `Σ_gaps b_in^θ` fall like
    `1 - t` as t → 1 whatever the weights (b_ref = 1: FlexMDM, and φ's floor 1.01 ≥ 1). With the head's bias pushed
    to a large rate (≈ 300 per gap) the total at t = 1 - 1e-6 is < 1e-2, exactly the paper's `multiplier` head's
    total with the same weights times `1 - t`; that head keeps a total of hundreds (the plateau that the
    sampler's hazard `1/(1 - t)` turns into spurious insertions)."""
    task = Task("checksum")
    texts = task.sample_texts(16, torch.Generator().manual_seed(0))
    heads = {}
    for head in ("multiplier", "survival"):
        m = build_model(task="checksum", schedule=schedule, insertion_head=head)
        with torch.no_grad():
            m.generator.rate_head[-1].bias[0] = 3.0
        heads[head] = m
    z1, _, valid = task.encode_latents(texts, heads["survival"].zoo_tokenizer)
    totals = {}
    for head, m in heads.items():
        for eps in (1e-3, 1e-4, 1e-6):
            t = torch.full((len(texts),), 1.0 - eps)
            with torch.no_grad():
                _, b_in, _ = m.generator_rates(z1, valid, t)
            totals[head, eps] = (b_in * valid).sum(1).double()
    assert bool((totals["survival", 1e-6] < 1e-2).all())
    assert bool((totals["multiplier", 1e-6] > 100).all())
    for eps in (1e-3, 1e-4, 1e-6):
        one_minus_t = 1.0 - torch.tensor(1.0 - eps, dtype=torch.float32).double()  # the float32 t the model saw
        torch.testing.assert_close(totals["survival", eps], totals["multiplier", eps] * one_minus_t, rtol=1e-4, atol=0)
    with pytest.raises(ValueError, match="insertion_head"):
        build_model(task="checksum", schedule=schedule, insertion_head="rate")


@pytest.mark.parametrize("schedule", ["linear", "kumaraswamy"])
def test_length_conditioning_starts_as_the_plain_generator_and_reads_each_rows_own_length(schedule: str) -> None:
    """`length_conditioning: true` (the card's toy departure) adds a zero-initialised embedding of the row length
    (the tokens attention sees, `<eos>` included) to the generator's adaLN condition: at initialisation the rates
    equal the plain generator's with the same shared weights (adaLN randomised so the condition matters); after
    perturbing only the embedding of length n, exactly the rows of length n change, and a row's rates in a
    mixed-length batch equal the row alone."""
    task = Task("brackets")
    plain = build_model(task="brackets", schedule=schedule)
    with torch.no_grad():  # adaLN starts at zero (the condition has no effect): give it random weights
        g = torch.Generator().manual_seed(1)
        for name, p in plain.generator.named_parameters():
            if "ada" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    cond = build_model(task="brackets", schedule=schedule, length_conditioning=True)
    missing, unexpected = cond.load_state_dict(plain.state_dict(), strict=False)
    assert missing == ["generator.length_embed.weight"] and unexpected == []
    texts = ["()", "([])", "(())[]", "()()()()", "[()]", "()[]()[]()"]
    z1, _, valid = task.encode_latents(texts, cond.zoo_tokenizer)
    t = torch.linspace(0.2, 0.9, len(texts))
    with torch.no_grad():
        before = cond.generator_rates(z1, valid, t)
        torch.testing.assert_close(before, plain.generator_rates(z1, valid, t))
        n = len("(())[]") + 1  # the <eos> is part of the row
        cond.generator.length_embed.weight[n] = torch.randn(cond.generator.length_embed.weight.shape[1], generator=torch.Generator().manual_seed(0))
        after = cond.generator_rates(z1, valid, t)
        row_len = valid.sum(1)
        changed = (after[1] - before[1]).abs().sum(1) > 1e-6
        assert changed.tolist() == (row_len == n).tolist()
        for i in range(len(texts)):
            alone = cond.generator_rates(z1[i:i + 1], valid[i:i + 1], t[i:i + 1])
            torch.testing.assert_close(alone[1], after[1][i:i + 1])
    with pytest.raises(ValueError, match="length_conditioning"):
        build_model(task="bracket-safe", schedule=schedule, vocab_size=16, length_conditioning=True)


# --------------------------------------------------------------------------- the chain task (an order to learn)
def test_chain_task_is_determined_right_to_left_and_a_guess_left_to_right() -> None:
    """Every sequence of the chain law is a root-to-leaf path: each token is the parent of its right neighbour (a
    function of it), while every non-final token has exactly 2 possible right neighbours (left-to-right is a
    guess) and only the last token determines the whole sequence. The sampler draws the exact law (chi-square over
    the 20 paths, 20k draws, false-fail < 1e-4); `valid` rejects a token of another branch, a path cut at an inner
    node, a reversed path and a path with its leaf moved."""
    from zoo.methods.loflexmdm.tasks import CHAIN_TREE

    task = Task("chain")
    law = task.support()
    assert len(law) == 20 and sum(law.values()) == pytest.approx(1.0)
    assert {len(s) for s in law} == set(task.length_law()) == {3, 4, 5, 6}
    children: dict[str, set[str]] = {}
    for s in law:
        assert task.valid(s) and CHAIN_TREE.parent[s[0]] is None
        for left, right in zip(s, s[1:]):
            assert CHAIN_TREE.parent[right] == left
            children.setdefault(left, set()).add(right)
    assert all(len(c) == 2 for c in children.values())  # branching 2 at every inner node
    # only the leaf determines the sequence: every proper prefix is shared by >= 2 paths
    for s in law:
        for i in range(1, len(s)):
            assert sum(p.startswith(s[:i]) for p in law) >= 2
    g = torch.Generator().manual_seed(0)
    draws = task.sample_texts(20_000, g)
    counts = torch.tensor([draws.count(s) for s in law], dtype=torch.float64)
    expected = torch.tensor(list(law.values()), dtype=torch.float64) * len(draws)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 49.0  # chi-square with 19 d.o.f.: P(> 49) ≈ 1.7e-4
    deep = max(law, key=len)
    other = next(c for c in children[deep[-2]] if c != deep[-1])
    assert task.valid(deep[:-1] + other)  # the sibling leaf is fine ...
    sibling_inner = next(s for s in law if len(s) == len(deep) and s[1] != deep[1])
    assert not task.valid(deep[:2] + sibling_inner[2:])  # ... a token of another branch is not
    assert not task.valid(deep[:-1]) and not task.valid(deep[::-1]) and not task.valid(deep[:-2] + deep[-1])


def test_chain_error_split_separates_missing_from_conflicting_tokens() -> None:
    from zoo.methods.loflexmdm.metrics import chain_error_split

    task = Task("chain")
    deep = max(task.support(), key=len)
    other = next(s for s in task.support() if len(s) == len(deep) and s[1] != deep[1])
    texts = [deep, deep[:2] + deep[3:], deep[:-1], deep[:2] + other[2:], deep + deep[-1], ""]
    split = chain_error_split(texts, task)
    # valid: 1; missing only: the gapped path, the cut path, the empty row; conflict: the mixed branches, the extra token
    assert split == {"missing_only": pytest.approx(3 / 6), "conflict": pytest.approx(2 / 6)}


class _StubPhi(torch.nn.Module):
    """A model with a planted φ: b_in = high at the last token and at the floor elsewhere (or the mirror)."""

    def __init__(self, leaf_first: bool) -> None:
        super().__init__()
        self.a, self.leaf_first = 1.0, leaf_first
        self.zoo_task, self.zoo_tokenizer = "chain", Task("chain").tokenizer()

    def aux_rates(self, z1: torch.Tensor, valid: torch.Tensor):
        n_tok = valid.sum(1, keepdim=True) - 1
        pos = torch.arange(z1.shape[1])[None]
        hot = pos == (n_tok - 1 if self.leaf_first else 0)
        b = torch.where(hot, 5.0, 1.01) + 0.01 * pos * (1 if self.leaf_first else -1)  # ranks: distinct b per position
        b = b.expand(z1.shape).clone()
        return b, torch.ones_like(b)


def test_chain_schedule_reports_the_leaf_and_the_distance_order() -> None:
    """`chain_schedule` (φ's insertion times by position): a planted leaf-first φ gives ratio
    (determined / leaf) < 1, the leaf's mean insertion time 1/(1 + b) = 1/6 at distance 0 and a negative Spearman
    with the distance from the end; the mirror (first token early) gives ratio > 1, a positive Spearman and the high
    multiplier at position 0 of ``by_position``, so a report that read positions from the wrong end, or the ratio
    upside down, fails."""
    from zoo.methods.loflexmdm.metrics import chain_schedule

    good, mirror = chain_schedule(_StubPhi(True), 256), chain_schedule(_StubPhi(False), 256)
    assert good["ratio"] < 0.3 and good["by_distance"][0] == pytest.approx(5.0, abs=0.06)
    assert good["mean_time_by_distance"][0] == pytest.approx(1 / (1 + good["by_distance"][0]), rel=1e-5)
    assert good["spearman"] < -0.3 and mirror["spearman"] > 0.3 and mirror["ratio"] > 1.0
    # by position from the root: the mirror's root (position 0) is the hot one, the leaf-first root sits at the floor
    assert mirror["root"] == mirror["by_position"][0] == pytest.approx(5.0) and good["root"] == pytest.approx(1.01)


def _forward_rows(task: Task, sched: dict[str, list[float]], t: float, n: int, seed: int = 0):
    """``n`` noised rows of the training forward process (``core.noise``) at time ``t`` under ``sched``, grouped by
    row: ``{tokens: (count, clean-token counts per slot [k, V], Σ gap sums [k + 1], Σ squared gap sums)}``, the gap
    sums being the multipliers of the dropped positions per gap (float32, as in training)."""
    from zoo.common import varlen
    from zoo.methods.loflexmdm.core import noise

    tok = task.tokenizer()
    g = torch.Generator().manual_seed(seed)
    texts = task.sample_texts(n, g)
    z1, fixed, valid = task.encode_latents(texts, tok)
    b = torch.ones(z1.shape)
    for i, s in enumerate(texts):
        b[i, : len(s)] = torch.tensor(sched[s])
    nz = noise(z1, fixed, valid, torch.full((n,), t), 1.0, b, torch.ones_like(b), tok.mask_token_id, tok.pad_token_id, g)
    rows = nz.rows
    width = z1.shape[1]
    toks = torch.full((n, width), -1, dtype=torch.long)
    toks[:, : rows.tokens.shape[1]] = torch.where(rows.attention_mask, rows.tokens, -1)
    keys, inv, counts = torch.unique(toks, dim=0, return_inverse=True, return_counts=True)
    clean = torch.gather(z1, 1, rows.positions.clamp_min(0))  # [n, L]: the clean token under each slot
    onehot = torch.nn.functional.one_hot(clean, tok.vocab_size).double() * rows.attention_mask[..., None]
    tok_counts = torch.zeros(len(keys), *onehot.shape[1:], dtype=torch.float64).index_add_(0, inv, onehot)
    gaps = varlen.gap_sums(b * (valid & ~fixed) * ~nz.present, nz.present, rows).double()
    gsum = torch.zeros(len(keys), gaps.shape[1], dtype=torch.float64).index_add_(0, inv, gaps)
    gsq = torch.zeros(len(keys), gaps.shape[1], dtype=torch.float64).index_add_(0, inv, gaps ** 2)
    out = {}
    for i, key in enumerate(keys.tolist()):
        k = sum(x >= 0 for x in key) - 1  # slots before <eos>
        out[tuple(key[:k])] = (int(counts[i]), tok_counts[i, :k], gsum[i, : k + 1], gsq[i, : k + 1])
    return out


def test_exact_posterior_matches_the_forward_process() -> None:
    """`ExactPosteriorModel` (the chain ceilings' generator): on the 10 most frequent noised rows of 20k draws of the
    training forward process (`core.noise`, a planted increasing schedule b_in = 1.01 + 2i, t = 0.35) its token law
    of every masked slot and its expected dropped-multiplier sum of every gap agree with the Monte Carlo frequencies:
    max |z| < 5 over the token cells with >= 5 expected counts (the rarer cells of a slot pooled into one
    Poisson count) and every gap (SE from the model's second moment; measured 2.4-3.6 for data seeds 0-7). Negative
    controls: the posterior of the *linear* schedule (a model blind to the per-position b) and of the *mirrored*
    schedule (the same multipliers, right to left) on the same rows miss by |z| > 20 (measured ≥ 50 / ≥ 80 on the
    token cells and the gaps alone), so an oracle that ignored the per-position drop probabilities, read the
    positions from the wrong end or mis-kept the gaps fails."""
    from zoo.methods.loflexmdm.oracle import ExactPosteriorModel

    task = Task("chain")
    law = task.support()
    planted = {s: [1.01 + 2.0 * i for i in range(len(s))] for s in law}
    rows = _forward_rows(task, planted, 0.35, 20_000)
    top = sorted(rows.items(), key=lambda kv: -kv[1][0])[:10]

    def worst(model: ExactPosteriorModel) -> float:
        z = 0.0
        for key, (c, tok_counts, gsum, gsq) in top:
            p, gap, ok, gap_sq = model.posterior(list(key), 0.35, second_moment=True)
            assert ok
            big = c * p >= 5
            zt = (tok_counts - c * p).abs() / (c * p * (1 - p)).clamp_min(1e-12).sqrt()
            z = max(z, float(zt[big].max()) if bool(big.any()) else 0.0)
            rare_obs, rare_exp = (tok_counts * ~big).sum(-1), (c * p * ~big).sum(-1)  # per slot, pooled
            z = max(z, float(((rare_obs - rare_exp).abs() / (rare_exp + 1.0).sqrt()).max()) if key else 0.0)
            se_gap = ((gap_sq - gap**2).clamp_min(0) / c).sqrt()  # the model's own variance of the gap sums
            diff = (gsum / c - gap).abs()
            zg = torch.where(se_gap > 0, diff / se_gap.clamp_min(1e-12), (diff > 1e-4) * 1e6)  # no variance: equal up to float32
            z = max(z, float(zg.max()))
        return z

    assert worst(ExactPosteriorModel(law, task.tokenizer(), planted)) < 5.0
    assert worst(ExactPosteriorModel(law, task.tokenizer(), None)) > 20.0
    assert worst(ExactPosteriorModel(law, task.tokenizer(), {s: b[::-1] for s, b in planted.items()})) > 20.0


def test_exact_posterior_rows_no_sequence_explains_get_no_insertions() -> None:
    from zoo.methods.loflexmdm.oracle import ExactPosteriorModel

    task = Task("chain")
    tok = task.tokenizer()
    m = ExactPosteriorModel(task.support(), tok)
    deep = max(task.support(), key=len)
    p, gaps, ok = m.posterior(tok.encode_raw(deep[::-1][:3]), 0.5)  # leaf before its ancestors: unreachable
    assert not ok and float(gaps.abs().sum()) == 0.0 and torch.allclose(p.sum(-1), torch.ones(3, dtype=torch.float64))
    p, gaps, ok = m.posterior([], 0.2)  # the empty row: P(z | empty) ∝ P(z) (1 - t)^L, all of z's multipliers in the one gap
    law = task.support()
    want = sum(len(s) * w * 0.8 ** len(s) for s, w in law.items()) / sum(w * 0.8 ** len(s) for s, w in law.items())
    assert ok and float(gaps[0]) == pytest.approx(want, rel=1e-6)  # t reaches the model as float32


@pytest.mark.slow
def test_exact_posterior_sampler_draws_the_chain_law_at_many_steps() -> None:
    """The τ-leaping sampler driven by the exact posterior (linear schedule) is exact up to its time grid: at 256
    steps 500 draws are valid ≥ 0.9 of the time (measured 0.95), at 8 steps far less (measured 0.30: the grid,
    not the generator, is what limits few-step validity on this task). Negative control: the same generator with
    every gap's insertion rate halved gives < 0.7 at 256 steps (measured 0.5)."""
    from zoo.methods.loflexmdm.metrics import bayes_validity

    task = Task("chain")
    many = bayes_validity(task, None, 500, SamplerConfig(max_steps=256))
    few = bayes_validity(task, None, 500, SamplerConfig(max_steps=8))
    assert many["validity"] >= 0.9 and few["validity"] < 0.5
    half = {s: [0.5] * len(s) for s in task.support()}  # posterior of a slower schedule: too few insertions at t -> 1
    assert bayes_validity(task, half, 500, SamplerConfig(max_steps=256))["validity"] < 0.7


def test_make_model_init_seed_and_train_toy_seeding() -> None:
    """`build_model` is `make_model(init_seed=0)` (the shipped checkpoints' initialisation); other init seeds give
    other weights. `train_toy` is deterministic per (method, task, seed) and differs across seeds."""
    from zoo.methods.loflexmdm.model import make_model
    from zoo.methods.loflexmdm.training import train_toy

    a, b, c = build_model(task="chain"), make_model(init_seed=0, task="chain"), make_model(init_seed=1, task="chain")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), c.state_dict().values()))
    runs = [train_toy("flexmdm", "chain", s, steps=3, batch_size=8) for s in (0, 0, 1)]
    sd = [r.state_dict() for r in runs]
    assert all(torch.equal(sd[0][k], sd[1][k]) for k in sd[0])
    assert not all(torch.equal(sd[0][k], sd[2][k]) for k in sd[0])
    with pytest.raises(ValueError, match="method"):
        train_toy("mdm", "chain", 0, steps=1)


def test_trained_chain_toys_learn_the_tree() -> None:
    """The shipped chain generators (training seed 0) have learned the forest: at 64 steps (plain sampler, 256 draws)
    most samples are valid root-to-leaf paths (measured 0.80 LoFlexMDM / 0.82 FlexMDM) where the same architecture
    at random init draws none, and their conflicting samples are a small share (measured 0.13 / 0.11 vs 0.94)."""
    cfg = SamplerConfig(max_steps=64)
    for spec, schedule in (("flexmdm", "linear"), ("loflexmdm", "kumaraswamy")):
        trained = evaluate(zoo.load(spec, variant="toy-chain").models["model"], 256, cfg)
        random = evaluate(build_model(task="chain", schedule=schedule, length_conditioning=True), 256, cfg)
        assert trained["validity"] > 0.6 and random["validity"] < 0.05, spec
        assert trained["conflict"] < 0.25 < random["conflict"], spec


def test_chain_gap_summary_pairs_by_training_seed_and_uses_the_seed_spread() -> None:
    """`evaluation.gap_summary` (the bench's LoFlexMDM − FlexMDM line): per-seed gaps pair rows by ``train_seed``
    (rows given out of order), the SE of the difference comes from both arms' training-seed spread
    (sqrt((sd_a² + sd_b²)/n), not the binomial SE), and ``separated`` only when every seed of one arm beats every
    seed of the other. A summary that paired rows by position, or used the sampling SE, fails."""
    from zoo.methods.loflexmdm.evaluation import gap_summary

    def row(method: str, seed: int, v: float) -> dict:
        return {"method": method, "steps": 16, "train_seed": seed, "validity": v, "validity_se": 0.01}

    a, b = "LoFlexMDM plain", "FlexMDM plain"
    rows = [row(a, 2, 0.54), row(b, 0, 0.45), row(a, 0, 0.50), row(b, 2, 0.49), row(a, 1, 0.52), row(b, 1, 0.47)]
    (g,) = gap_summary(rows, [0, 1, 2])
    assert [p["gap"] for p in g["per_seed"]] == pytest.approx([0.05, 0.05, 0.05])
    assert g["gap_mean"] == pytest.approx(0.05) and g["a_sd"] == pytest.approx(0.02) and g["b_sd"] == pytest.approx(0.02)
    assert g["gap_se_seeds"] == pytest.approx(math.sqrt((0.02**2 + 0.02**2) / 3))
    assert g["separated"] and g["sampling_se"] == pytest.approx(math.hypot(0.01, 0.01))
    rows[3]["validity"] = 0.51  # FlexMDM seed 2 above LoFlexMDM seed 0: the arms overlap
    (g,) = gap_summary(rows, [0, 1, 2])
    assert not g["separated"] and g["gap_min"] == pytest.approx(0.03)


@pytest.mark.parametrize("spec", ["loflexmdm", "flexmdm"])
def test_training_entries_name_every_shipped_toy_checkpoint(spec: str) -> None:
    """Each spec's `training:` has one entry per toy task, produced by the one trainer with the spec's own method, and
    together they produce every shipped `weights/*.safetensors` of the spec (what `zoo train NAME --check` compares)."""
    s = load_spec_file(SPECS / f"{spec}.yaml")
    assert set(s.training) == {"checksum", "brackets", "chain"}
    for task, entry in s.training.items():
        assert entry.trainer == "zoo.methods.loflexmdm.train:train_task"
        assert entry.params == {"method": spec, "task": task}
        assert entry.produces == [f"weights/{spec}-{task}.safetensors"]
    shipped = {v.weights for v in s.models["model"].variants.values() if isinstance(v.weights, str)}
    assert shipped == {p for e in s.training.values() for p in e.produces}


def test_trainer_writes_the_checkpoint_the_entry_produces(tmp_path: Path) -> None:
    """`train.train_task` (the `zoo train` hook) writes `<method>-<task>.safetensors` into the run's folder, the state of
    `training.train_toy` with the same options (ctx.seed = the training seed), loadable into the spec's architecture."""
    from safetensors.torch import load_file

    from registry.context import Context
    from zoo.methods.loflexmdm.train import ToyOptions, train_task
    from zoo.methods.loflexmdm.training import train_toy

    spec_file = SPECS / "flexmdm.yaml"
    ctx = Context(load_spec_file(spec_file), spec_file, out_dir=tmp_path, use_cache=False)
    train_task(ctx, ToyOptions(method="flexmdm", task="chain", steps=2, batch_size=8))
    state = load_file(str(tmp_path / "flexmdm-chain.safetensors"))
    ref = train_toy("flexmdm", "chain", 0, steps=2, batch_size=8).state_dict()
    assert set(state) == set(ref) and all(torch.equal(state[k], ref[k]) for k in ref)
    build_model(task="chain", schedule="linear", length_conditioning=True).load_state_dict(state)
    with pytest.raises(ValueError, match="task"):
        ToyOptions(method="flexmdm", task="sudoku")


def test_bench_through_the_engine_writes_table_png_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`zoo bench loflexmdm` (one task, few samples): the engine's flags, the table in the report, the PNG named
    after the tasks run and `<name>-bench.json` in --out-dir, with the three methods' rows and the oracle's; a bad
    option value is one line naming the flag."""
    import json

    from zoo.cli import main

    argv = ["bench", "loflexmdm", "--tasks", "checksum", "--samples", "16", "--steps", "4", "--tv-steps", "8",
            "--out-dir", str(tmp_path)]
    assert main(argv) == 0
    assert "| checksum | LoFlexMDM plain" in (tmp_path / "loflexmdm-bench.md").read_text()
    assert (tmp_path / "loflexmdm-checksum-bench.png").stat().st_size > 0
    res = json.loads((tmp_path / "loflexmdm-bench.json").read_text())["result"]
    got = {(r["method"], r["steps"]) for r in res["rows"]}
    assert got == {(m, s) for m in ("FlexMDM plain", "LoFlexMDM plain") for s in (4, 8)} | {
        ("LoFlexMDM paper (top_prob, p=0.5)", 4)} | {("oracle rates (linear schedule)", s) for s in (4, 8)}
    assert set(res["schedule"]) == {"checksum"} and "chain" not in res
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # argparse's one line for a choice
        main(["bench", "loflexmdm", "--tasks", "sudoku", "--out-dir", str(tmp_path)])
    assert exc.value.code == 2 and "argument --tasks: invalid choice: 'sudoku'" in capsys.readouterr().err
    assert main(["bench", "loflexmdm", "--samples", "0", "--out-dir", str(tmp_path)]) == 2
    assert "--samples" in capsys.readouterr().err


def test_length_diagnosis_tables() -> None:
    """`diagnostics.length_diagnosis` (the NOTES' "Diagnosis" tool): the sampled length histogram sums to 1 next to the
    exact law (which sums to 1), the calibration rows per t bin, and the clean-row remainders, whose exact column is
    0 for rows of the longest length (nothing left to insert)."""
    from zoo.methods.loflexmdm.diagnostics import length_diagnosis

    text = length_diagnosis(zoo.load("flexmdm", variant="toy").models["model"], samples=64, steps=16, t_bins=(0.5,))
    lines = text.splitlines()
    assert lines[0].startswith("16 steps, 64 samples: length TV ")
    hist = [line.split() for line in lines[2:] if line.split()[0].isdigit()]
    assert sum(float(h[1]) for h in hist) == pytest.approx(1.0, abs=1e-2) and sum(float(h[2]) for h in hist) == pytest.approx(1.0, abs=1e-2)
    assert any(line.startswith("t~0.50 ") for line in lines)
    clean = [line for line in lines if line.startswith("t=0.999")]
    assert clean and clean[0].split()[-1].split("/")[1] == "0.000"  # the longest length
