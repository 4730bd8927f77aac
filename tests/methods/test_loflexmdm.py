"""LoFlexMDM / FlexMDM behaviour beyond the specs' invariants: the released-checkpoint loading path (converter +
strict loading on a tiny random DDiT saved under the release's file name), the pipelines and samplers through
the specs, finite φ gradients of the joint objective, the trained toy's learned schedule, and one-line errors."""
from __future__ import annotations

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
