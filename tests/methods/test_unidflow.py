"""UniDFlow behaviour beyond the spec's invariants: negative controls (a plausible wrong implementation fails
each invariant's check), the shipped toy through the spec (samplers, rule checks, router values, errors), the
surrogate's measured gap to the exact DPO optimum, and the training code's determinism."""
from __future__ import annotations

import copy
import math

import pytest
import torch

import zoo
from registry.errors import ZooError
from zoo.common.lora import lora_layers
from zoo.methods.unidflow import exact_dpo as X
from zoo.methods.unidflow import invariants as I
from zoo.methods.unidflow.dfm import dfm_sample, dpo_loss
from zoo.methods.unidflow.model import TSGRMSNorm, build_unidflow
from zoo.methods.unidflow.procedures import parse_caption
from zoo.methods.unidflow.training import pretrain_backbone, stage1
from zoo.methods.unidflow.world import TOK, all_scenes, faithful, parse, render


@pytest.fixture(scope="module")
def pipe():
    return zoo.load("unidflow", variant="toy", device="cpu")


# ----------------------------------------------------------------------------- negative controls
def test_dpo_optimum_check_rejects_a_reference_free_fit() -> None:
    """Fitting DPO against a uniform reference lands on exp(r/β), not p_ref·exp(r/β): the exact check fails."""
    def wrong(ref, r, beta):
        flat = X.Tables(*(torch.zeros_like(p) for p in ref.params()))
        return X.fit_dpo(flat, r, beta, "exact", iters=200)

    with pytest.raises(AssertionError):
        I.check_dpo_optimum(wrong, 3, 0.5, 1)


def test_surrogate_is_not_the_exact_optimum_and_its_gap_is_measured() -> None:
    """The masked-CE (ELBO) surrogate's DPO optimum misses p* (the exact check is not loosened for it): on the
    benchmark's draw (V = 4, β = 0.5, seed 0) TV 0.19 vs 5e-9 for the exact objective."""
    with pytest.raises(AssertionError):
        I.check_dpo_optimum(lambda ref, r, b: X.fit_dpo(ref, r, b, "surrogate", iters=200), 3, 0.5, 1)
    gap = X.surrogate_gap(4, 0.5, 0)
    assert gap["tv_exact"] < 1e-6 < 1e-3 < gap["tv_surrogate"] < gap["tv_reference"]


def test_two_token_elbo_is_a_lower_bound_and_exact_for_consistent_tables() -> None:
    """ℓ = mean of the two orders' log-likelihoods <= log p (Jensen); equality when both orders give the same law."""
    t = X.random_tables(4, torch.Generator().manual_seed(3))
    assert bool((X.elbo_2tok(t) <= X.law(t) + 1e-12).all()) and float((X.law(t) - X.elbo_2tok(t)).max()) > 1e-3
    c = X.tables_for_law(X.law(t))
    assert torch.allclose(X.elbo_2tok(c), X.law(t), atol=1e-12) and torch.allclose(X.law(c), X.law(t), atol=1e-12)


def test_dpo_loss_check_rejects_reference_free_and_sign_flipped_losses() -> None:
    no_ref = lambda lw, rw, ll, rl, b: torch.nn.functional.softplus(-b * (lw - ll)).mean()  # noqa: E731
    flipped = lambda lw, rw, ll, rl, b: torch.nn.functional.softplus(b * ((lw - rw) - (ll - rl))).mean()  # noqa: E731
    for bad in (no_ref, flipped):
        with pytest.raises(AssertionError):
            I.check_dpo_loss(bad, 0)
    I.check_dpo_loss(dpo_loss, 0)


def test_tsg_check_rejects_gamma_twice_and_nonzero_init() -> None:
    with pytest.raises(AssertionError):
        I.check_zero_init_modulation(lambda b, d: TSGRMSNorm(b, d, gamma_twice=True), 0)

    def nonzero(b, d):
        n = TSGRMSNorm(b, d)
        torch.nn.init.normal_(n.mod.bias, std=0.1)
        return n

    with pytest.raises(AssertionError):
        I.check_zero_init_modulation(nonzero, 0)


def test_router_check_rejects_a_swapped_mix() -> None:
    m = I.random_model(0, modulation=True)
    with pytest.raises(AssertionError):
        I.check_router_extremes(lambda mm, x, t, k, a: mm(x, t, k, alpha=None if a is None else 1 - a), m, 0)


def test_frozen_check_rejects_a_step_that_touches_the_backbone() -> None:
    def leaky(m, stage, seed):
        I._sgd_step(m, stage, seed)
        with torch.no_grad():
            m.backbone.head.weight.add_(1e-3)

    with pytest.raises(AssertionError):
        I.check_frozen_backbone(leaky, 0)


def test_dfm_check_rejects_a_non_absorbing_sampler() -> None:
    def resample(model, cond, task, steps, temperature, g, trace=None):
        out = dfm_sample(model, cond, task, steps, temperature, g, trace=trace)
        if trace is not None and len(trace) > 1:
            trace[-1] = trace[-1].clone()
            trace[-1][trace[-2] != TOK.mask_token_id] = TOK.image_ids[0]  # rewrites decoded tokens
        return out

    with pytest.raises(AssertionError):
        I.check_dfm_rules(resample, 0)


def test_world_check_rejects_a_parser_that_ignores_the_background() -> None:
    def sloppy(image):
        s = parse(image)
        return None if s is None else type(s)(s.fg, (s.bg + 1) % 4 if (s.bg + 1) % 4 != s.fg else (s.bg + 2) % 4, s.size, s.r, s.c)

    with pytest.raises(AssertionError):
        I.check_world(sloppy, 0)


# ----------------------------------------------------------------------------- the shipped toy
def test_samplers_rule_checks_and_router_on_the_shipped_toy(pipe) -> None:
    """Understanding is exact on the scenes' captions (greedy); the generate output marks faithfulness by the
    world's rule; the final router sends understanding to Δu (α high) and generation to Δg (α low)."""
    und = pipe.procedures["understand"](seed=0, scenes=list(range(0, 348, 29)))
    assert sum(und.valid) >= 10 and len(und.valid) == 12
    gen = pipe(seed=0, captions=["red s2 tl", "blue s1 br"])
    assert gen.images.shape == (2, 16) and len(gen.grids) == 2
    for cap, im, ok in zip(["red s2 tl", "blue s1 br"], gen.images.tolist(), gen.valid):
        assert ok == faithful(parse_caption(cap), im)
    assert min(und.alphas) > 0.5 > max(gen.alphas)


def test_fixed_alpha_extremes_match_forced_single_adapters(pipe) -> None:
    """The sampler's alpha = 1 / 0 equals running the model with only Δu / only Δg (same seed, same draws)."""
    m = pipe.models["model"]
    single = copy.deepcopy(m)
    for layer in lora_layers(single.backbone):
        layer.lora_B["gen"].data.zero_()
    a = pipe.procedures["generate"].with_params(alpha=1.0)(seed=3, captions=["green s1 bl"])
    cond = a.sequences.clone()
    g = torch.Generator().manual_seed(3)
    b = dfm_sample(single, cond, "gen", 16, 1.0, g, alpha=torch.ones(1))
    assert torch.equal(a.sequences, b)


def test_bad_inputs_are_one_line_errors(pipe) -> None:
    with pytest.raises(ValueError, match="caption word 'purple'"):
        parse_caption("purple s1 tl")
    with pytest.raises(ZooError, match="caption is 3 words") as exc:
        pipe(seed=0, captions=["red s1"])
    assert "\n" not in str(exc.value)
    with pytest.raises(ZooError, match="declared-only|cannot be built") as exc:
        zoo.load("unidflow", variant="paper")
    assert "\n" not in str(exc.value)


# ----------------------------------------------------------------------------- training code
@pytest.mark.slow
def test_training_stages_are_deterministic_and_learn() -> None:
    """Two runs of stage 0 + a short stage I from the same seed give bitwise-equal weights, and stage I raises
    the DFM loss's fit (its last losses below its first) while the backbone stays frozen."""
    outs = []
    for _ in range(2):
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        m = build_unidflow()
        pretrain_backbone(m, 30, 16, 3e-3, g, quiet=True)
        base = {k: v.clone() for k, v in m.backbone.state_dict().items() if ".lora_" not in k}
        hist = stage1(m, 60, 32, 5e-3, g, quiet=True)
        assert all(torch.equal(base[k], v) for k, v in m.backbone.state_dict().items() if ".lora_" not in k)
        assert sum(hist[-10:]) < sum(hist[:10])
        outs.append(m.state_dict())
    assert all(torch.equal(outs[0][k], outs[1][k]) for k in outs[0])
    assert not math.isnan(sum(float(v.float().sum()) for v in outs[0].values()))


def test_all_scenes_render_distinct_and_parse() -> None:
    scenes = all_scenes()
    assert len(scenes) == 348 and all(parse(render(s)) == s for s in scenes)


def test_bench_figure_title_fits_inside_the_figure_and_clears_the_panels() -> None:
    """The bench PNG's title is not clipped: its rendered box lies inside the figure and above every panel title."""
    from zoo.methods.unidflow.benchmark import figure

    items = [{"grid": "rgby/gbyr/byrg/yrgb", "valid": j % 2 == 0, "label": "yellow s1 tr"} for j in range(6)]
    fig = figure({"grid": [{"name": f"generate: row {i}", "items": items} for i in range(6)]})
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    assert 0 <= title.x0 and title.x1 <= fig.bbox.width and title.y1 <= fig.bbox.height, (title, fig.bbox)
    assert all(title.y0 >= ax.title.get_window_extent(renderer).y1 for ax in fig.axes)
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_sampled_metric_checks_are_means_over_base_seeds_not_the_seed0_draw(pipe) -> None:
    """The spec's sampled rates (generation faithfulness/diversity, caption accuracy, preference margin) are the mean
    of the per-seed evaluations over base seeds 0 … seeds−1 (margin: pair seeds 1234 + k), not one seed-0 draw.
    A memo-less stand-in for the pipeline keeps ``Pipeline.memo`` from answering; small sizes keep it fast."""
    from types import SimpleNamespace

    from zoo.methods.unidflow import evaluate as E
    from zoo.methods.unidflow import metrics as Mx

    fresh = lambda: SimpleNamespace(models=pipe.models)  # noqa: E731
    m = pipe.models["reference"]
    per = [E.generation(m, 2, seed=s) for s in range(3)]
    for key, fn in (("faithfulness", Mx.faithfulness), ("diversity", Mx.diversity)):
        got = fn(fresh(), role="reference", per_caption=2, seeds=3)
        assert got == pytest.approx(sum(p[key] for p in per) / 3, abs=1e-12)
        assert len({p[key] for p in per}) > 1, "the per-seed draws must differ for this test to discriminate"
    caps = [E.caption_accuracy(pipe.models["shared"], seed=s) for s in range(3)]
    assert len(set(caps)) > 1
    assert Mx.caption_accuracy(fresh(), role="shared", seeds=3) == pytest.approx(sum(caps) / 3, abs=1e-12)
    margins = [E.preference_margin(m, n=512, seed=1234 + s) for s in range(2)]
    assert Mx.preference_margin(fresh(), role="reference", seeds=2) == pytest.approx(sum(margins) / 2, rel=1e-9)
    se = E.over_seeds(lambda s: {"x": float(s)}, [0, 1, 2, 3])
    assert se["x"] == 1.5 and se["x_se"] == pytest.approx(math.sqrt((2.25 + 0.25 + 0.25 + 2.25) / 3 / 4))
    with pytest.raises(ValueError, match="seeds is empty"):
        E.over_seeds(lambda s: {"x": 0.0}, [])


# ----------------------------------------------------------------------------- zoo train / zoo bench
def test_trainer_writes_exactly_the_files_its_spec_entry_produces_and_is_deterministic(tmp_path) -> None:
    """``zoo train unidflow``'s recipe (a few steps per stage here): the four checkpoints its ``training:`` entry
    declares, each loadable into its role's model, and byte-identical across two runs from the same seed (what
    ``--check`` relies on)."""
    from safetensors.torch import load_file

    from registry.context import Context
    from zoo.methods.unidflow.train import ToyOptions, stage1_model, train_toy

    spec = zoo.spec("unidflow")
    produced = sorted(p.rsplit("/", 1)[-1] for p in spec.training["toy"].produces)
    opts = ToyOptions(pretrain_steps=2, stage1_steps=2, stage2_steps=2, router_steps=2, dpo_steps=2, quiet=True)
    digests = []
    for run in ("a", "b"):
        ctx = Context(spec, zoo.entry("unidflow").path, out_dir=tmp_path / run, use_cache=False)
        train_toy(ctx, opts)
        assert sorted(p.name for p in (tmp_path / run).iterdir()) == produced
        digests.append({n: (tmp_path / run / n).read_bytes() for n in produced})
    assert digests[0] == digests[1]
    build_unidflow().load_state_dict(load_file(str(tmp_path / "a" / "unidflow-toy.safetensors")), strict=True)
    one = stage1_model(load_file(str(tmp_path / "a" / "unidflow-toy-stage1.safetensors")))
    assert set(one.state_dict()) == set(load_file(str(tmp_path / "a" / "unidflow-toy-shared.safetensors")))


def test_bench_seed_counts_out_of_range_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """`zoo bench unidflow --seeds 0` (and 257): one line naming --seeds, exit 2, before any model is built."""
    from zoo.cli import main

    for bad in ("0", "257"):
        assert main(["bench", "unidflow", "--seeds", bad]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and "--seeds" in err[0] and bad in err[0], err


@pytest.mark.slow
def test_bench_writes_table_png_and_json_into_out_dir(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """``zoo bench unidflow`` at the smallest sizes: the table in the report, the PNG and the JSON with one row per
    model, all inside --out-dir."""
    import json

    from zoo.cli import main

    args = ["--per-caption", "1", "--seeds", "1", "--caption-seeds", "1", "--margin-seeds", "1"]
    assert main(["bench", "unidflow", *args, "--out-dir", str(tmp_path)]) == 0
    assert "| after stage III mRef-DPO (final)" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unidflow-bench.json", "unidflow-bench.md", "unidflow-bench.png"]
    res = json.loads((tmp_path / "unidflow-bench.json").read_text())["result"]
    assert [r["role"] for r in res["rows"]] == ["stage1", "reference", "model", "model", "shared"]
    assert set(res) >= {"interference", "dpo", "exact_2token", "grid"}
    assert (tmp_path / "unidflow-bench.png").stat().st_size > 5000


def test_interference_arms_start_from_identical_stage1_tensors_with_their_own_generators(pipe) -> None:
    """The three interference arms (:mod:`.interference`) hold the very stage-I tensors (fresh copies: training one
    arm moves neither the others nor the source); the decoupled arm adds only Δg at zero and the router at α = 0.5;
    each arm's generator is its own object, seeded from the training seed (equal draws across arms, new per seed)."""
    from zoo.methods.unidflow import interference as IF

    src = pipe.models["stage1"].state_dict()
    before = {k: v.clone() for k, v in src.items()}
    models = IF.start_models(src)
    assert tuple(models) == IF.ARMS == ("decoupled", "joint_shared", "sequential_shared")
    for arm, m in models.items():
        sd = m.state_dict()
        assert all(torch.equal(sd[k], v) for k, v in src.items()), arm
        assert m.shared == (arm != "decoupled")
    extra = {k: v for k, v in models["decoupled"].state_dict().items() if k not in src}
    assert extra and all(k.startswith("router.") or k.endswith(".gen") for k in extra)
    assert all(not v.any() for k, v in extra.items() if ".lora_B." in k or k.startswith("router.2"))
    g0, g0b, g1 = IF.generator(0), IF.generator(0), IF.generator(1)
    assert g0 is not g0b and torch.equal(torch.rand(4, generator=g0), torch.rand(4, generator=g0b))
    assert not torch.equal(torch.rand(4, generator=IF.generator(0)), torch.rand(4, generator=g1))
    IF.train_arm(models["joint_shared"], "joint_shared", 2, 0, 8, 5e-3, 0.05, seed=0)
    moved = models["joint_shared"].state_dict()
    assert any(not torch.equal(moved[k], src[k]) for k in src)  # the arm trained ...
    assert all(torch.equal(models["sequential_shared"].state_dict()[k], v) for k, v in src.items())  # ... alone
    assert all(torch.equal(src[k], v) for k, v in before.items())
    with pytest.raises(ValueError, match="unknown arm"):
        IF.train_arm(models["decoupled"], "shared", 1, 0, 8, 5e-3, 0.05, seed=0)
