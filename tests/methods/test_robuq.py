"""Behaviour of ``zoo.methods.robuq`` beyond the spec's invariants: every invariant's negative control
(a plausible wrong implementation fails the same check), the packed export, the derived roles built
from the spec, the DiT-XL/2 loading/sampling path on tiny models, and QAT."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shipped import digits_dit

from zoo.methods.robuq import invariants as inv
from zoo.methods.robuq.inject import SITES, channel_outlier_ratio, function_deviation, inject_outlier_channels, operator_oracle
from zoo.methods.robuq.model import _pack, _unpack, allocate_bits, install_quantizers, load_packed, pack_model, quant_modules, set_enabled
from zoo.methods.robuq.procedures import DiTLatentSampler, heldout_eps_mse, qat_finetune, quantize_dit
from zoo.methods.robuq.quant import QuantLinear, fast_hadamard, hadamard_block, hadamard_matrix, quantize_tokens, ternarize


# ----------------------------------------------------------------------------- negative controls
def test_hadamard_check_rejects_unnormalised_and_wrong_fast_transform():
    with pytest.raises(AssertionError, match="orthonormal"):
        inv.check_hadamard(lambda n, b: hadamard_matrix(n, b) * hadamard_block(n, b) ** 0.5, fast_hadamard, 64, None, 0)
    # a "fast" transform that forgets the 1/sqrt(b) normalisation
    with pytest.raises(AssertionError, match="fast != dense"):
        inv.check_hadamard(hadamard_matrix, lambda x, b: fast_hadamard(x, b) * 8, 64, None, 0)
    # a fast transform over the whole width where the dense one is block-diagonal (96 = 3 x 32)
    with pytest.raises(AssertionError):
        inv.check_hadamard(hadamard_matrix, lambda x, b: x @ torch.linalg.qr(torch.randn(96, 96, dtype=torch.float64))[0], 96, None, 0)


def test_ternary_check_rejects_per_tensor_scale_and_threshold_variant():
    per_tensor = lambda w: (a := w.abs().mean() + 1e-8) * (w / a).round().clamp(-1, 1)  # noqa: E731
    with pytest.raises(AssertionError, match="not in"):
        inv.check_ternary(per_tensor, 0)
    sign_only = lambda w: w.abs().mean(-1, keepdim=True) * torch.sign(w)  # binary, never 0: still {−a, a} ⊂ allowed  # noqa: E731
    inv.check_ternary(sign_only, 0)  # the value-set check alone cannot tell binary from ternary ...
    w = torch.randn(8, 64, dtype=torch.float64)
    assert (ternarize(w) == 0).any() and not (sign_only(w) == 0).any()  # ... so assert the zero level separately


def test_token_quantizer_check_rejects_floor_and_per_tensor_range():
    def floor_q(x, bits):
        m, M = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
        s = (M - m) / (2**bits - 1)
        return m + ((x - m) / s).floor() * s

    with pytest.raises(AssertionError):
        inv.check_token_quantizer(floor_q, 3, 0)

    def per_tensor(x, bits):
        return quantize_tokens(x.reshape(1, -1), bits).reshape(x.shape)

    with pytest.raises(AssertionError):
        inv.check_token_quantizer(per_tensor, 3, 0)


def test_ste_check_rejects_detached_and_plain_rounding():
    with pytest.raises(AssertionError, match="gradient"):
        inv.check_ste(lambda x, b: quantize_tokens(x, b).detach() + 0 * x, 0)
    with pytest.raises(AssertionError, match="gradient"):
        inv.check_ste(lambda x, b: quantize_tokens(x, b), 0)  # autograd through round(): zero gradient


def test_hadamard_gate_rejects_a_rotation_that_does_nothing():
    with pytest.raises(AssertionError, match="did not lower"):
        inv.check_hadamard_helps(lambda seed, b, o: (inv.hadamard_gain(seed, b, o)[0],) * 2, 0, 3, 2)


def test_hadamard_does_not_help_gaussian_tokens_much():
    """Without outliers the rotation buys little (the gate is about spiky tokens): ratio < 3."""
    plain, rot = inv.hadamard_gain(0, 3, 0)
    assert rot * 3 > plain


def test_dp_check_rejects_greedy_allocation():
    fails = 0
    for seed in range(40):
        try:
            inv.check_dp(inv.greedy_bits, seed, 5)
        except AssertionError:
            fails += 1
    assert fails > 0, "greedy never sub-optimal: the DP check would not catch a heuristic"


def test_dp_budget_and_edge_cases():
    bits, obj = allocate_bits([[4, 3, 2, 1]] * 3, [1, 1, 1], [1, 2, 3, 4], 4.0)
    assert bits == [4, 4, 4] and obj == 3
    bits, _ = allocate_bits([[4, 3, 2, 1]] * 3, [1, 1, 1], [1, 2, 3, 4], 1.0)
    assert bits == [1, 1, 1]
    with pytest.raises(ValueError, match="below the smallest"):
        allocate_bits([[1.0, 0.5]], [1], [2, 4], 1.0)
    # spare budget goes to the cheap layer: budget 2.4 x 5 = 12 -> (4, 2) (objective 5) beats (2, 2) (8)
    bits, obj = allocate_bits([[8, 4, 2, 1]] * 2, [1, 4], [1, 2, 3, 4], 2.4)
    assert bits == [4, 2] and obj == 5


def test_passthrough_check_rejects_unrotated_weight():
    class NoWeightRotation(QuantLinear):
        def rotated_weight(self):
            return self.weight

    def bad_install(model, **kw):
        from zoo.methods.robuq import model as M

        orig = M.QuantLinear
        M.QuantLinear = NoWeightRotation
        try:
            return install_quantizers(model, **kw)
        finally:
            M.QuantLinear = orig

    with pytest.raises(AssertionError, match="passthrough"):
        inv.check_passthrough(bad_install, 0, 8)


# ----------------------------------------------------------------------------- QuantLinear, packing
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.sampled_from([1, 2, 4]))
def test_pack_unpack_roundtrip_is_exact(seed, bits):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(1, 50, (1,), generator=g))
    codes = torch.randint(0, 2**bits, (n,), generator=g)
    packed = _pack(codes, bits)
    assert packed.dtype == torch.uint8 and packed.numel() == -(-n * bits // 8)
    assert torch.equal(_unpack(packed, bits, n).long(), codes)


def test_packed_export_reloads_exactly_and_is_smaller(tmp_path):
    from shipped import spec_file

    from zoo.common.digits import build_digits_dit

    fp = digits_dit()
    q = quantize_dit(copy.deepcopy(fp), a_bits=3, lowrank_rank=8)
    path = pack_model(q, tmp_path / "p.safetensors")
    loaded = load_packed(path, build_digits_dit)
    for m in quant_modules(q).values():
        m.freeze()
    x, t, y = torch.randn(3, 1, 8, 8), torch.tensor([5, 400, 900]), torch.tensor([0, 3, 9])
    with torch.no_grad():
        assert torch.equal(loaded(x, t, class_labels=y).sample, q(x, t, class_labels=y).sample)
    ratio = spec_file("digits", "weights/digits-dit.safetensors").stat().st_size / path.stat().st_size
    assert 2.0 < ratio < 3.0  # the toy's FP embedders and low-rank branches dominate (measured 2.28)
    with pytest.raises(ValueError, match="before freeze"):
        pack_model(q, tmp_path / "again.safetensors")
    set_enabled(loaded, False)
    with pytest.raises(RuntimeError, match="no FP weight"):
        loaded(x, t, class_labels=y)


def test_ternary_weights_of_installed_layers_have_three_levels_per_row():
    q = quantize_dit(digits_dit(), a_bits=4)
    for name, m in quant_modules(q).items():
        w = m.quantize_weight(m.rotated_weight()).detach()
        if m.weight_mode == "ternary":
            assert all(row.abs().unique().numel() <= 2 for row in w), name
        else:
            assert m.weight_mode == "int4" and name.endswith("norm1.linear") and all(row.unique().numel() <= 15 for row in w)


def test_quantisation_changes_output_more_at_fewer_bits():
    fp = digits_dit()
    errs = [heldout_eps_mse(quantize_dit(copy.deepcopy(fp), a_bits=b, lowrank_rank=8), n=120) for b in (8, 2)]
    assert errs[1] > errs[0] > heldout_eps_mse(fp, n=120)


# ----------------------------------------------------------------------------- the spec's roles
@pytest.fixture(scope="module")
def pipe():
    import zoo

    return zoo.load("robuq", variant="toy")


def test_derived_roles_are_quantised_copies(pipe):
    assert not quant_modules(pipe.models["dit"])  # the FP parent is untouched
    for role in ("dit-w158a4", "dit-w158a3-nohad", "dit-ampn2"):
        qm = quant_modules(pipe.models[role])
        assert len(qm) == 2 * (6 + 1)  # 6 targeted Linear + adaLN per block
        assert pipe.models[role].transformer_blocks[0].norm1.emb is not pipe.models["dit"].transformer_blocks[0].norm1.emb
    assert {m.hadamard for n, m in quant_modules(pipe.models["dit-w158a3-nohad"]).items() if "norm1" not in n} == {False}
    assert {m.a_bits for n, m in quant_modules(pipe.models["dit-w158a3"]).items() if "norm1" not in n} == {3}


def test_ampn_role_respects_budget(pipe):
    from zoo.methods.robuq.model import group_costs

    model = pipe.models["dit-ampn2-nohad"]
    bits, costs = model.robuq_bits, group_costs(model)
    assert sum(costs[g] * b for g, b in bits.items()) <= 2.0 * sum(costs.values())
    assert set(bits.values()) <= {1, 2, 3, 4}


def test_transform_takes_packed_files_only_as_verified_paths():
    """``packed`` must be a file the engine resolved and verified (a spec's ``{file:, sha256:}`` value, a Path in
    Python): a bare string (an unverified name the transform would have to resolve itself) is refused in one line;
    the spec's packed roles reach it as absolute paths inside the spec's folder (checked in tests/test_context.py)."""
    with pytest.raises(ValueError, match=r"transform_config.packed: expected a shipped file, written \{file:"):
        quantize_dit(digits_dit(), packed="weights/robuq-w158a4-qat.safetensors")
    with pytest.raises(ValueError, match="does not exist"):
        quantize_dit(digits_dit(), packed=Path("/nonexistent/robuq.safetensors"))


def test_samplers_accuracy_ordering_is_reported_not_assumed(pipe):
    """Samplers run end to end; FP samples are recognised (the quantised ordering is measured by the bench)."""
    from zoo.common.digits import digits_classifier

    out = pipe.procedures["fp"](seed=0, per_class=3, num_inference_steps=10)
    assert out.samples.shape == (30, 1, 8, 8)
    assert digits_classifier().accuracy(out.samples, out.labels) >= 0.8
    q = pipe.procedures["w158a3"](seed=0, per_class=1, num_inference_steps=5)
    assert torch.isfinite(q.samples).all()


def test_qat_lowers_heldout_error_and_is_reproducible():
    fp = digits_dit()
    a = quantize_dit(copy.deepcopy(fp), a_bits=3)
    b = copy.deepcopy(a)
    before = heldout_eps_mse(a, n=120)
    la = qat_finetune(a, 15, 5e-4, 32, seed=0)
    lb = qat_finetune(b, 15, 5e-4, 32, seed=0)
    assert la == lb
    assert heldout_eps_mse(a, n=120) < before


# ----------------------------------------------------------------------------- DiT-XL/2 path on tiny models
def test_latent_sampler_runs_on_tiny_dit_and_vae():
    from diffusers import AutoencoderKL, DiTTransformer2DModel

    torch.manual_seed(0)
    dit = DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8, num_layers=1, sample_size=4,
                                patch_size=2, num_embeds_ada_norm=1000).eval()
    vae = AutoencoderKL(block_out_channels=[8], down_block_types=["DownEncoderBlock2D"], up_block_types=["UpDecoderBlock2D"], latent_channels=4,
                        norm_num_groups=4, layers_per_block=1, sample_size=8).eval()
    q = quantize_dit(copy.deepcopy(dit), a_bits=4, block=8)  # width 16: quantised module surgery on a learned-sigma DiT
    for models in ({"dit": dit, "vae": vae}, {"dit": q, "vae": vae}):
        s = DiTLatentSampler(models, DiTLatentSampler.Params(num_inference_steps=2))
        a, b = s(seed=3, class_labels=[1, 2]), s(seed=3, class_labels=[1, 2])
        assert a.samples.shape == (2, 3, 4, 4) and torch.equal(a.samples, b.samples)
    set_enabled(q, False)
    x, t, y = torch.randn(2, 4, 4, 4), torch.tensor([3, 700]), torch.tensor([1, 999])
    with torch.no_grad():
        assert (q(x, t, class_labels=y).sample - dit(x, t, class_labels=y).sample).abs().max() < 1e-5


# ----------------------------------------------------------------------------- 8-bit attention products
from zoo.methods.robuq.attention import QuantAttnProcessor, attention_bits_of, quantized_attention  # noqa: E402


class _AlwaysExplicit(QuantAttnProcessor):
    """Wrong: with quantisation off it still runs its own explicit softmax path (not the stock processor)."""

    def __init__(self, bits):
        super().__init__(16 if bits is None else bits)
        self._off = bits is None

    def __call__(self, attn, hidden_states, *a, **kw):
        if not self.enabled:
            return self._stock(attn, hidden_states, *a, **kw)
        if self._off:
            import zoo.methods.robuq.attention as A

            orig = A.ste_quantize_tokens
            A.ste_quantize_tokens = lambda x, b: x
            try:
                return super().__call__(attn, hidden_states, *a, **kw)
            finally:
                A.ste_quantize_tokens = orig
        return super().__call__(attn, hidden_states, *a, **kw)


def test_attention_off_check_rejects_an_explicit_fp_path():
    with pytest.raises(AssertionError, match="off changed the output"):
        inv.check_attention_off_exact(_AlwaysExplicit, 0, 8)


def _wrong_processor(which: str):
    import zoo.methods.robuq.attention as A

    class Wrong(QuantAttnProcessor):
        def __call__(self, *a, **kw):
            orig = A.quantized_attention

            def fn(q, k, v, scale, bits):
                Q = lambda t: quantize_tokens(t, bits)  # noqa: E731
                if which == "per-tensor":
                    Q = lambda t: quantize_tokens(t.reshape(1, -1), bits).reshape(t.shape)  # noqa: E731
                p = (Q(q) @ Q(k).transpose(-1, -2) * scale).softmax(-1)
                return (p if which == "no-p" else Q(p)) @ (v if which == "no-v" else Q(v))

            A.quantized_attention = fn
            try:
                return super().__call__(*a, **kw)
            finally:
                A.quantized_attention = orig

    return Wrong


@pytest.mark.parametrize("which", ["per-tensor", "no-p", "no-v"])
def test_attention_reference_check_rejects_wrong_operand_quantisation(which):
    """Per-tensor instead of per-token scales, unquantised probabilities, unquantised values: each differs
    from the brute-force reference."""
    with pytest.raises(AssertionError, match="brute-force"):
        inv.check_attention_reference(_wrong_processor(which), 0, 4, 2, 4)


def test_attention_bound_check_rejects_a_missing_scale():
    no_scale = lambda q, k, v, scale, bits: quantized_attention(q, k, v, 1.0, bits)  # noqa: E731
    with pytest.raises(AssertionError, match="above the quantisation bound"):
        inv.check_attention_error_bound(no_scale, 0, 8)


def test_attention_error_on_the_digits_dit_is_small_and_falls_with_bits():
    """Measured on the FP DiT's own attention inputs (the spec metric): 8 bits ~1.5e-5 relative."""
    from zoo.methods.robuq.metrics import attention_error

    errs = [attention_error(digits_dit(), b) for b in (4, 6, 8)]
    assert errs[0] > errs[1] > errs[2] > 0 and errs[2] < 1e-4


def test_attention_quantiser_passes_straight_through_gradients():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g, requires_grad=True) for _ in range(3))
    quantized_attention(q, k, v, 0.5, 4).square().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0


def test_quantize_dit_attention_bits_layout_and_validation(tmp_path):
    from zoo.common.digits import build_digits_dit

    fp = digits_dit()
    q = quantize_dit(copy.deepcopy(fp), a_bits=4)
    assert attention_bits_of(q) == {"transformer_blocks.0.attn1": 8, "transformer_blocks.1.attn1": 8}  # the paper's default
    assert set(attention_bits_of(quantize_dit(copy.deepcopy(fp), a_bits=4, attention_bits=None)).values()) == {None}
    for bad in (1, 17, True):
        with pytest.raises(ValueError, match="attention_bits"):
            quantize_dit(copy.deepcopy(fp), attention_bits=bad)
    loaded = load_packed(pack_model(q, tmp_path / "p.safetensors"), build_digits_dit)
    assert attention_bits_of(loaded) == attention_bits_of(q)
    set_enabled(q, False)
    assert {b.attn1.processor.enabled for b in q.transformer_blocks} == {False}


# ----------------------------------------------------------------------------- Gaussian-clip activation quantiser
def test_gaussian_step_is_max_1960_and_mse_optimal():
    from zoo.methods.robuq.quant import gaussian_step, quantize_tokens_gaussian

    for b, ref in zip((1, 2, 3, 4), (1.596, 0.996, 0.586, 0.335)):  # Max 1960's table (the note's Monte-Carlo check agrees)
        assert abs(gaussian_step(b) - ref) < 2e-3
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 4096, generator=g, dtype=torch.float64)
    for b, mse_ref in zip((2, 3, 4), (0.119, 0.037, 0.012)):
        q = quantize_tokens_gaussian(x, b)
        assert all(row.unique().numel() <= 2**b for row in q[:20])
        mse = float(((q - x) ** 2).mean())
        assert abs(mse - mse_ref) / mse_ref < 0.06, (b, mse)
        # a step 20 % off either way is worse (the negative control for the optimality)
        c = gaussian_step(b)
        for f in (0.8, 1.2):
            half = (2**b - 1) / 2
            mu, sd = x.mean(-1, keepdim=True), x.std(-1, keepdim=True, correction=0)
            qq = mu + ((((x - mu) / (sd * c * f)) + half).round().clamp(0, 2 * half) - half) * sd * c * f
            assert float(((qq - x) ** 2).mean()) > mse


def test_gaussian_clip_gradient_is_zero_beyond_the_outer_levels_and_round_trips(tmp_path):
    from zoo.common.digits import build_digits_dit
    from zoo.methods.robuq.quant import gaussian_step, ste_quantize_tokens

    x = torch.tensor([[0.0, 0.1, -0.1, 0.2, -0.2, 0.05, -0.05, 9.0]], requires_grad=True)
    ste_quantize_tokens(x, 2, "gaussian").sum().backward()
    xd = x.detach()
    reach = xd.std(-1, correction=0) * gaussian_step(2) * 1.5
    inside = ((xd - xd.mean(-1, keepdim=True)).abs() < reach).float()
    assert torch.equal(x.grad, inside) and inside[0, -1] == 0 and inside[0, 0] == 1
    with pytest.raises(ValueError, match="a_clip"):
        quantize_dit(digits_dit(), a_clip="lloyd")
    q = quantize_dit(digits_dit(), a_bits=3, a_clip="gaussian")
    assert {m.a_clip for n, m in quant_modules(q).items() if "norm1" not in n} == {"gaussian"}
    loaded = load_packed(pack_model(q, tmp_path / "g.safetensors"), build_digits_dit)
    for m in quant_modules(q).values():
        m.freeze()
    x, t, y = torch.randn(2, 1, 8, 8), torch.tensor([5, 600]), torch.tensor([1, 7])
    with torch.no_grad():
        assert torch.equal(loaded(x, t, class_labels=y).sample, q(x, t, class_labels=y).sample)


def test_ampn_allocate_after_qat_respects_budget_and_sets_bits():
    from zoo.methods.robuq.model import group_costs, layer_groups
    from zoo.methods.robuq.procedures import ampn_allocate

    q = quantize_dit(digits_dit(), a_bits=2)
    qat_finetune(q, 3, 5e-4, 16, seed=0)
    bits = ampn_allocate(q, 2.0, calib_size=16)
    costs = group_costs(q)
    assert sum(costs[g] * b for g, b in bits.items()) <= 2.0 * sum(costs.values()) and set(bits.values()) <= {1, 2, 3, 4}
    assert {g: q.get_submodule(n[0]).a_bits for g, n in layer_groups(q).items()} == bits


def test_packed_metadata_is_one_key_and_old_files_still_load(tmp_path):
    """safetensors writes its metadata map in a per-process order: one key keeps the file bytes (and the
    pinned sha256) reproducible. Files from before the attention quantiser (``robuq_layout`` only) load
    with FP attention products."""
    import json

    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from zoo.common.digits import build_digits_dit

    q = quantize_dit(digits_dit(), a_bits=4)
    path = pack_model(q, tmp_path / "new.safetensors")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    assert list(meta) == ["robuq"]
    old = tmp_path / "old.safetensors"
    save_file(load_file(str(path)), str(old), metadata={"robuq_layout": json.dumps(json.loads(meta["robuq"])["linear"])})
    loaded = load_packed(old, build_digits_dit)
    assert attention_bits_of(loaded) == {} and len(quant_modules(loaded)) == len(quant_modules(q))


def test_attention_processor_refuses_cross_attention_and_masks():
    from diffusers.models.attention_processor import Attention

    attn = Attention(query_dim=8, heads=2, dim_head=4).eval()
    attn.set_processor(QuantAttnProcessor(8))
    x = torch.randn(1, 3, 8)
    with pytest.raises(ValueError, match="unmasked"):
        attn(x, encoder_hidden_states=x)
    with pytest.raises(ValueError, match="unmasked"):
        attn(x, attention_mask=torch.zeros(1, 3))
    attn.processor.enabled = False  # off: the stock processor handles whatever diffusers supports
    assert attn(x, encoder_hidden_states=x).shape == (1, 3, 8)


def test_quantize_dit_explicit_attention_bits_must_agree_with_a_packed_file(tmp_path):
    """With ``packed:`` the file's attention layout rules: the default (``auto``) takes it, an explicit value equal to it
    loads, a conflicting one (including FP vs a quantised file, and 8 vs an old file written without attention
    quantisers, i.e. FP) is a one-line error naming the parameter. Old files still load."""
    import json

    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from zoo.common.digits import build_digits_dit

    new = pack_model(quantize_dit(digits_dit(), a_bits=4, attention_bits=6), tmp_path / "new.safetensors")
    with safe_open(str(new), framework="pt") as f:
        meta = f.metadata()
    old = tmp_path / "old.safetensors"
    save_file(load_file(str(new)), str(old), metadata={"robuq_layout": json.dumps(json.loads(meta["robuq"])["linear"])})

    def load(name, **kw):
        return quantize_dit(build_digits_dit(), packed=tmp_path / name, **kw)

    assert set(attention_bits_of(load("new.safetensors")).values()) == {6}  # auto: the file's bits, not 8
    assert set(attention_bits_of(load("new.safetensors", attention_bits=6)).values()) == {6}
    for bad, shown in ((8, "8"), (None, "None")):
        with pytest.raises(ValueError) as err:
            load("new.safetensors", attention_bits=bad)
        assert str(err.value) == (f"transform_config.attention_bits: {shown} conflicts with the packed file new.safetensors "
                                  f"(attention bits 6); omit attention_bits to use the file's")
    assert attention_bits_of(load("old.safetensors")) == {}  # an old file loads as before: FP attention
    assert attention_bits_of(load("old.safetensors", attention_bits=None)) == {}
    with pytest.raises(ValueError, match=r"^transform_config.attention_bits: 8 conflicts .* \(attention bits null \(FP\)\)"):
        load("old.safetensors", attention_bits=8)
    with pytest.raises(ValueError, match="transform_config.attention_bits: expected 2..16, null"):
        load("new.safetensors", attention_bits="eight")
    # without a packed file the default is the paper's 8
    assert set(attention_bits_of(quantize_dit(digits_dit(), a_bits=4)).values()) == {8}


def test_quantize_dit_layout_arguments_set_away_from_defaults_must_agree_with_a_packed_file(tmp_path):
    """A packed file rebuilds its own layout, so ``a_bits: 2`` beside a 4-bit file used to be ignored silently. Now a
    layout argument set away from its default that the file contradicts is a one-line error naming it; one that
    agrees loads; AMPN arguments beside a file (which holds its allocation) are refused."""
    from zoo.common.digits import build_digits_dit

    pack_model(quantize_dit(digits_dit(), a_bits=3, hadamard=False, lowrank_rank=4), tmp_path / "w3.safetensors")

    def load(**kw):
        return quantize_dit(build_digits_dit(), packed=tmp_path / "w3.safetensors", **kw)

    assert {m.a_bits for n, m in quant_modules(load(a_bits=3, hadamard=False, lowrank_rank=4)).items() if "norm1" not in n} == {3}
    load(block=8)  # a Hadamard block is moot in a file without the rotation, as it is without a file
    for kw, line in (({"a_bits": 2}, "transform_config.a_bits: 2 conflicts with the packed file w3.safetensors (a_bits 3); omit a_bits to use the file's"),
                     ({"lowrank_rank": 2}, "transform_config.lowrank_rank: 2 conflicts with the packed file w3.safetensors (lowrank_rank 4); "
                                           "omit lowrank_rank to use the file's"),
                     ({"weight": "int4"}, "transform_config.weight: int4 conflicts with the packed file w3.safetensors (weight ternary); "
                                          "omit weight to use the file's"),
                     ({"adaln": False}, "transform_config.adaln: False conflicts with the packed file w3.safetensors (adaln True); "
                                        "omit adaln to use the file's"),
                     ({"ampn_avg_bits": 2.0}, "transform_config.ampn_avg_bits: the packed file w3.safetensors already holds its AMPN "
                                              "allocation; omit ampn_avg_bits")):
        with pytest.raises(ValueError) as err:
            load(**kw)
        assert str(err.value) == line


# ----------------------------------------------------------------------------- injected outlier channels (issue 38 item 3)
@pytest.fixture(scope="module")
def fp_dit():
    return digits_dit().eval()


@pytest.mark.parametrize("sites", [("v_out",), ("adaln_attn",), ("adaln_ff",), SITES])
@pytest.mark.parametrize("scale", [10.0, 30.0])
def test_outlier_injection_preserves_the_fp_function(fp_dit, sites, scale):
    inj = copy.deepcopy(fp_dit)
    chosen = inject_outlier_channels(inj, sites, n_channels=3, scale=scale, seed=4)
    assert len(chosen) == 2 * len(sites) and all(len(set(c)) == 3 for c in chosen.values())
    assert function_deviation(fp_dit, inj) < 1e-5  # measured 2e-7 .. 4e-7 (float32 rounding)
    assert any(not torch.equal(p, q) for p, q in zip(inj.parameters(), fp_dit.parameters()))  # something was injected


def _planted_no_inverse(m, c, s):  # to_v rows x s, to_out.0 left alone
    with torch.no_grad():
        m.transformer_blocks[0].attn1.to_v.weight[c] *= s
        m.transformer_blocks[0].attn1.to_v.bias[c] *= s


def _planted_across_gelu(m, c, s):  # ff.net.0.proj rows x s, ff.net.2 columns x 1/s: GELU(s u) != s GELU(u)
    with torch.no_grad():
        ff = m.transformer_blocks[0].ff.net
        ff[0].proj.weight[c] *= s
        ff[0].proj.bias[c] *= s
        ff[2].weight[:, c] /= s


def _planted_naive_modulation(m, c, s):  # scale_msa's weight and bias x s (so 1 + scale is NOT x s), shift x s, to_q/k/v x 1/s
    with torch.no_grad():
        blk, d = m.transformer_blocks[0], 64
        for r in (c, d + c):
            blk.norm1.linear.weight[r] *= s
            blk.norm1.linear.bias[r] *= s
        for lin in (blk.attn1.to_q, blk.attn1.to_k, blk.attn1.to_v):
            lin.weight[:, c] /= s


@pytest.mark.parametrize("planted", [_planted_no_inverse, _planted_across_gelu, _planted_naive_modulation])
def test_preservation_check_rejects_non_preserving_injections(fp_dit, planted):
    m = copy.deepcopy(fp_dit)
    planted(m, torch.tensor([3, 17]), 10.0)
    assert function_deviation(fp_dit, m) > 1e-3  # what the preservation test bounds by 1e-5


def test_injection_puts_the_outliers_on_the_chosen_channels(fp_dit):
    from zoo.methods.robuq.metrics import recorded_inputs

    inj = copy.deepcopy(fp_dit)
    chosen = inject_outlier_channels(inj, scale=30.0, seed=1)
    names = {"v_out": "attn1.to_out.0", "adaln_attn": "attn1.to_q", "adaln_ff": "ff.net.0.proj"}
    full = [f"transformer_blocks.{i}.{n}" for i in (0, 1) for n in [*names.values(), "ff.net.2"]]
    before, after = recorded_inputs(fp_dit, full), recorded_inputs(inj, full)
    for i in (0, 1):
        for site, n in names.items():
            x = after[f"transformer_blocks.{i}.{n}"]
            top = x.reshape(-1, x.shape[-1]).abs().amax(0).topk(2).indices.tolist()
            assert sorted(top) == chosen[f"blocks.{i}.{site}"]
            assert channel_outlier_ratio(x) > 4 * channel_outlier_ratio(before[f"transformer_blocks.{i}.{n}"])
        nm = f"transformer_blocks.{i}.ff.net.2"  # after the GELU: not a site, its inputs are unchanged
        torch.testing.assert_close(after[nm], before[nm], rtol=1e-4, atol=1e-5)


def test_injection_validation_and_seeded_channel_choice(fp_dit):
    m = copy.deepcopy(fp_dit)
    with pytest.raises(ValueError, match="unknown injection sites"):
        inject_outlier_channels(m, ("ff_gelu",))
    with pytest.raises(ValueError, match="scale must be > 0"):
        inject_outlier_channels(m, scale=-10.0)
    with pytest.raises(ValueError, match="before quantize_dit"):
        inject_outlier_channels(quantize_dit(copy.deepcopy(fp_dit)))
    a, b = inject_outlier_channels(copy.deepcopy(fp_dit), seed=0), inject_outlier_channels(copy.deepcopy(fp_dit), seed=0)
    assert a == b and a != inject_outlier_channels(copy.deepcopy(fp_dit), seed=1)


def test_operator_oracle_agrees_with_the_activation_error_metric(fp_dit):
    from zoo.methods.robuq.metrics import activation_error

    o = operator_oracle(fp_dit)["total"]
    for h in (False, True):
        assert o["hadamard" if h else "plain"]["act_out"] == pytest.approx(activation_error(fp_dit, 4, h), rel=1e-4)
    # E = T(WH) H - W: with rotation the weight error seen through the inputs is not the unrotated one
    assert o["plain"]["weight_out"] != pytest.approx(o["hadamard"]["weight_out"], rel=1e-3)
