"""The shared discrete toolkit in zoo/common: sampling (top-p order), masked-diffusion losses against hand
computations, the tiny denoiser, unconditional generation, model-role parameters, AR cache helpers with a
caller-supplied cache, the symbol tokenizer, and the rule that zoo/common never imports zoo/methods."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
import torch

from registry.errors import ParamError

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- layering
def test_zoo_common_never_imports_zoo_methods():
    """No module of zoo/common imports zoo.methods (statically, at any depth of the module)."""
    offenders = []
    for path in sorted((ROOT / "zoo" / "common").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n == "zoo.methods" or n.startswith("zoo.methods.")]
    assert not offenders, offenders


# ----------------------------------------------------------------------------- sampling
def _lg():
    return torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64))


def test_top_p_order_after_temperature_is_the_nucleus_of_the_tempered_law():
    from zoo.common.discrete import draft_logits

    lg = _lg()
    out = draft_logits(lg, 0.5, 0.79, "after_temperature")
    tempered = torch.softmax(lg / 0.5, -1)[0]  # [0.6579, 0.2368, 0.0592, 0.0066]
    assert tempered[0] < 0.79 < tempered[0] + tempered[1]
    assert torch.isfinite(out)[0].tolist() == [True, True, False, False]
    assert torch.allclose(out[0, :2], torch.log_softmax(lg / 0.5, -1)[0, :2])


def test_top_p_order_before_temperature_uses_the_untempered_nucleus():
    """The repository's order: nucleus on softmax(l) (0.5+0.3 < 0.81 -> three tokens), then l / tau."""
    from zoo.common.discrete import draft_logits

    lg = _lg()
    before = draft_logits(lg, 0.5, 0.81, "before_temperature")
    after = draft_logits(lg, 0.5, 0.81, "after_temperature")
    assert torch.isfinite(before)[0].tolist() == [True, True, True, False]
    assert torch.isfinite(after)[0].tolist() == [True, True, False, False]  # tempered: 0.658 + 0.237 >= 0.81
    assert torch.allclose(before[0, :3], torch.log_softmax(lg / 0.5, -1)[0, :3])
    # at tau = 1 the two orders agree
    assert torch.equal(draft_logits(lg, 1.0, 0.81, "before_temperature"), draft_logits(lg, 1.0, 0.81, "after_temperature"))
    with pytest.raises(ValueError, match="top-p order"):
        draft_logits(lg, 0.5, 0.8, "sideways")


def test_draft_logits_per_lane_temperatures_broadcast():
    from zoo.common.discrete import draft_logits

    ld = torch.randn(1, 3, 7, generator=torch.Generator().manual_seed(0))
    taus = torch.tensor([0.2, 0.5, 1.0])
    for order in ("before_temperature", "after_temperature"):
        out = draft_logits(ld, taus, 0.9, order)
        assert out.shape == (3, 3, 7)
        for k in range(3):
            assert torch.equal(out[k], draft_logits(ld, float(taus[k]), 0.9, order)[0])


def test_poe_bridge_core_reexports_the_shared_samplers():
    import zoo.common.discrete as d
    import zoo.methods.poe_bridge.core as core

    for name in ("gumbel_max", "categorical", "top_p_filter", "uniform", "tempered"):
        assert getattr(core, name) is getattr(d, name)


def test_repo_sampler_spec_uses_the_repository_top_p_order():
    import yaml

    samplers = yaml.safe_load((ROOT / "specs" / "poe-bridge.yaml").read_text())["samplers"]
    assert samplers["poe-bridge-repo"]["params"]["top_p_order"] == "before_temperature"
    assert "top_p_order" not in samplers["poe-bridge"]["params"]  # this project's default order
    from zoo.methods.poe_bridge import PoEBridgeSampler

    assert PoEBridgeSampler.Params().top_p_order == "after_temperature"


# ----------------------------------------------------------------------------- losses
def _hand_case():
    logits = torch.tensor([[[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]],
                           [[0.0, 1.0, 0.0], [1.0, -1.0, 3.0]]])
    x0 = torch.tensor([[0, 1], [2, 2]])
    masked = torch.tensor([[True, False], [True, True]])
    t = torch.tensor([[0.25], [0.5]])
    return logits, x0, masked, t


def _nll(row, k):
    return -(row[k] - math.log(sum(math.exp(v) for v in row)))


def test_masked_diffusion_loss_matches_a_hand_computation_with_one_over_t():
    """L = (1/(B*L)) sum_b (1/t_b) sum_{i masked} -log softmax(l_bi)[x0_bi] (MDLM eq. 10 / LLaDA eq. 3)."""
    from zoo.common.masked_dlm import masked_diffusion_loss

    logits, x0, masked, t = _hand_case()
    L = logits.tolist()
    hand = (_nll(L[0][0], 0) / 0.25 + (_nll(L[1][0], 2) + _nll(L[1][1], 2)) / 0.5) / 4
    assert masked_diffusion_loss(logits, x0, masked, t).item() == pytest.approx(hand, rel=1e-6)
    plain = (_nll(L[0][0], 0) + _nll(L[1][0], 2) + _nll(L[1][1], 2)) / 10
    assert masked_diffusion_loss(logits, x0, masked, t, "none", normalizer=10).item() == pytest.approx(plain, rel=1e-6)
    with pytest.raises(ValueError):
        masked_diffusion_loss(logits, x0, masked, t, "sqrt")


def test_dfm_form_equals_mdlm_for_the_linear_schedule_and_weights_kappa_prime_over_one_minus_kappa():
    from zoo.common.masked_dlm import dfm_masked_loss, masked_diffusion_loss

    logits, x0, masked, t = _hand_case()
    s = 1 - t  # DFM time: data at s = 1
    assert dfm_masked_loss(logits, x0, masked, s).item() == pytest.approx(masked_diffusion_loss(logits, x0, masked, t).item(), rel=1e-6)
    assert dfm_masked_loss(logits, x0, masked, s, weighting="cross_entropy").item() == pytest.approx(
        masked_diffusion_loss(logits, x0, masked, t, "none").item(), rel=1e-6)
    # kappa = s^2: weight 2 s / (1 - s^2) per masked token
    L = logits.tolist()
    w0, w1 = 2 * 0.75 / (1 - 0.75**2), 2 * 0.5 / (1 - 0.5**2)
    hand = (w0 * _nll(L[0][0], 0) + w1 * (_nll(L[1][0], 2) + _nll(L[1][1], 2))) / 4
    assert dfm_masked_loss(logits, x0, masked, s, power=2.0).item() == pytest.approx(hand, rel=1e-6)


def test_mask_tokens_is_the_training_scripts_corruption_draw_for_draw():
    """Same generator state -> the same mask as the inline ``rand(x.shape) < t; m[:, :P] = False``."""
    from zoo.common.masked_dlm import mask_tokens

    x = torch.randint(4, 18, (5, 12), generator=torch.Generator().manual_seed(0))
    t = torch.rand(5, 1, generator=torch.Generator().manual_seed(1))
    xt, m = mask_tokens(x, t, 3, torch.Generator().manual_seed(2), keep_prefix=4)
    ref = torch.rand(x.shape, generator=torch.Generator().manual_seed(2)) < t
    ref[:, :4] = False
    assert torch.equal(m, ref)
    assert torch.equal(xt, torch.where(ref, torch.full_like(x, 3), x))


# ----------------------------------------------------------------------------- the tiny denoiser
def test_tiny_masked_lm_default_has_the_shipped_parameters_and_time_input_is_optional():
    from safetensors.torch import load_file

    from zoo.common.masked_dlm import TinyMaskedLM

    shipped = load_file(str(ROOT / "specs" / "weights" / "poe-bridge-dlm.safetensors"))
    m = TinyMaskedLM(18, 3)
    assert set(m.state_dict()) == set(shipped)
    ids = torch.tensor([[1, 4, 3, 3, 5]])
    mt = TinyMaskedLM(18, 3, time_conditioning=True)
    assert set(mt.state_dict()) - set(m.state_dict()) == {"time_proj.weight", "time_proj.bias"}
    a, b = mt(ids, t=0.2), mt(ids, t=0.9)
    assert a.shape == (1, 5, 18) and not torch.allclose(a, b)
    assert torch.equal(mt(ids), mt(ids, t=0.0))
    assert torch.allclose(m(ids), m(ids, t=0.5))  # no time input: t is ignored


# ----------------------------------------------------------------------------- samplers
@pytest.fixture(scope="module")
def toy():
    import zoo

    return zoo.load("poe-bridge", variant="toy", device="cpu").models


def _poe(models, **params):
    from zoo.methods.poe_bridge import PoEBridgeSampler

    return PoEBridgeSampler(models=models, params=PoEBridgeSampler.Params(**params))


def test_unconditional_generation_starts_from_bos_and_is_seeded(toy):
    from zoo.common.masked_dlm import ConfidenceDecoding
    from zoo.methods.poe_bridge import ARDecoding

    seen = []
    for cls, models in ((ConfidenceDecoding, {"proposal": toy["proposal"]}), (ARDecoding, {"target": toy["target"]})):
        smp = cls(models=models, params=cls.Params())
        orig = smp.generate_row
        smp.generate_row = lambda ids, g, eos, orig=orig: (seen.append(list(ids)), orig(ids, g, eos))[1]
        out = smp(num_samples=3, seed=5)
        assert len(out.token_ids) == 3 and all(len(r) >= 1 for r in out.token_ids) and len(out.texts) == 3
        assert out == smp(num_samples=3, seed=5)
    assert seen and all(ids == [1] for ids in seen)  # BOS only, no prompt
    poe = _poe(toy, max_new_tokens=12)
    a = poe(num_samples=4, seed=0)
    assert len(a.token_ids) == 4 and a == poe(num_samples=4, seed=0)
    assert all(1 <= len(r) <= 12 for r in a.token_ids)
    with pytest.raises(ParamError, match=r"^input num_samples of PoEBridgeSampler: Input should be greater than or equal to 1"):
        poe(num_samples=0)  # refused by the call's inputs model, before decoding


def test_role_names_are_parameters(toy):
    from zoo.common.masked_dlm import ConfidenceDecoding

    default = _poe(toy)("347+285=", seed=3)
    renamed = _poe({"drafter": toy["proposal"], "verifier": toy["target"]}, proposal_role="drafter",
                   target_role="verifier")("347+285=", seed=3)
    assert renamed == default
    with pytest.raises(ValueError, match="target_role"):
        _poe({"drafter": toy["proposal"], "verifier": toy["target"]}, proposal_role="drafter")
    cd = ConfidenceDecoding(models={"dlm": toy["proposal"]}, params=ConfidenceDecoding.Params(proposal_role="dlm"))
    assert cd("347+285=").token_ids == ConfidenceDecoding(models={"proposal": toy["proposal"]},
                                                          params=ConfidenceDecoding.Params())("347+285=").token_ids


def test_example_inputs_come_from_the_tokenizer_not_the_base_class(toy):
    from zoo.common.masked_dlm import ConfidenceDecoding, TextSampler

    assert not hasattr(TextSampler, "default_prompts")
    assert TextSampler.Cli().prompt is None
    cd = ConfidenceDecoding(models={"proposal": toy["proposal"]}, params=ConfidenceDecoding.Params())
    assert cd.example_inputs(3) == {"prompt": ["347+285=", "512+489=", "347+285="]}
    cd._tok = type("NoExamples", (), {"bos_token_id": 1, "eos_token_id": 2, "decode": lambda self, r, **k: ""})()
    assert cd.example_inputs(2) == {"input_ids": [[1], [1]]}


def test_cache_factory_supplies_the_ar_cache(toy):
    """A DynamicCache subclass passed as ``cache_factory`` is the cache every AR forward writes to
    (its update counter moves), and the decoded tokens are those of the default cache."""
    from transformers import DynamicCache

    from zoo.common.ar_cache import new_cache
    from zoo.methods.poe_bridge import ARDecoding, PoEBridgeSampler

    made = []

    class CountingCache(DynamicCache):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.updates = 0
            made.append(self)

        def update(self, *a, **k):
            self.updates += 1
            return super().update(*a, **k)

    factory = lambda: CountingCache(config=toy["target"].config)  # noqa: E731
    assert isinstance(new_cache(toy["target"], factory), CountingCache)
    n_layers = toy["target"].config.num_hidden_layers
    for cls, models in ((PoEBridgeSampler, toy), (ARDecoding, {"target": toy["target"]})):
        made.clear()
        plain = cls(models=models, params=cls.Params())("512+489=", seed=2)
        counted = cls(models=models, params=cls.Params(), cache_factory=factory)("512+489=", seed=2)
        assert counted == plain
        assert len(made) == 1
        fwd = counted.stats[0]["ar_forwards"]
        assert made[0].updates == n_layers * fwd > 0
        # a per-call parameter override re-makes the procedure and must keep the caller's cache factory
        made.clear()
        cls(models=models, params=cls.Params(), cache_factory=factory).with_params(max_new_tokens=20)("512+489=", seed=2)
        assert len(made) == 1 and made[0].updates > 0


# ----------------------------------------------------------------------------- tokenizers
def test_symbol_tokenizer_round_trip_and_errors():
    from zoo.common.toy_text import ArithTokenizer, SymbolTokenizer

    tok = SymbolTokenizer(["a", "b", "ab", "<sep>"], example_prompts=("ab",))
    ids = tok.encode("ab<sep>ba")
    assert ids == [1, tok.stoi["ab"], tok.stoi["<sep>"], tok.stoi["b"], tok.stoi["a"]]  # longest match first
    assert tok.decode(ids + [tok.eos_token_id, tok.stoi["a"]]) == "ab<sep>ba"
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.mask_token_id) == (0, 1, 2, 3)
    with pytest.raises(ValueError, match="position 2"):
        tok.encode_raw("abc")
    with pytest.raises(ValueError):
        SymbolTokenizer(["a", "a"])
    with pytest.raises(ValueError):
        SymbolTokenizer(["<mask>"])
    arith = ArithTokenizer()
    assert arith.vocab == ["<pad>", "<bos>", "<eos>", "<mask>", *"0123456789+=;>"]  # the shipped checkpoints' ids
    assert arith.encode("What is 17+23?") == [1] + arith.encode_raw("017+023=")


def test_a_model_folder_without_tokenizer_files_gives_no_tokenizer(tmp_path):
    """A local checkpoint saved without tokenizer files has no tokenizer (``find_tokenizer`` raises, the
    sampler falls back to the config's EOS) instead of an empty one ``AutoTokenizer`` would invent, whose
    EOS id 0 would stop decoding at the wrong token."""
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from zoo.common.masked_dlm import eos_of, find_tokenizer
    from zoo.methods.poe_bridge import ARDecoding

    cfg = Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, eos_token_id=5, bos_token_id=1)
    torch.manual_seed(0)
    Qwen2ForCausalLM(cfg).save_pretrained(tmp_path / "m")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "m")
    with pytest.raises(ValueError, match="no tokenizer"):
        find_tokenizer(model)
    sampler = ARDecoding(models={"target": model}, params=ARDecoding.Params(max_new_tokens=4))
    assert sampler.tokenizer() is None and eos_of(sampler.tokenizer(), model) == 5


def test_masked_losses_are_finite_with_finite_gradients_where_nothing_is_masked_at_the_data_end():
    """At the data end (DFM s = 1, kappa = 1: weight kappa'/(1 - kappa) = inf; MDLM t = 0: weight 1/t = inf) nothing
    is masked, so those rows contribute exactly 0 (not 0 * inf = NaN) and the other rows keep their hand values;
    the gradient is finite too."""
    from zoo.common.masked_dlm import dfm_masked_loss, masked_diffusion_loss

    logits, x0, masked, t = _hand_case()
    masked = masked.clone()
    masked[0] = False                      # row 0: nothing masked, at the data end
    L = logits.tolist()
    for power in (1.0, 2.0):
        s = torch.tensor([[1.0], [0.5]])   # row 0 at s = 1
        w1 = power * 0.5 ** (power - 1) / (1 - 0.5**power)
        hand = w1 * (_nll(L[1][0], 2) + _nll(L[1][1], 2)) / 4
        lg = logits.clone().requires_grad_(True)
        loss = dfm_masked_loss(lg, x0, masked, s, power=power)
        assert loss.item() == pytest.approx(hand, rel=1e-6)
        loss.backward()
        assert torch.isfinite(lg.grad).all() and (lg.grad[0] == 0).all()
    lg = logits.clone().requires_grad_(True)
    loss = masked_diffusion_loss(lg, x0, masked, torch.tensor([[0.0], [0.5]]))
    assert loss.item() == pytest.approx((_nll(L[1][0], 2) + _nll(L[1][1], 2)) / 0.5 / 4, rel=1e-6)
    loss.backward()
    assert torch.isfinite(lg.grad).all() and (lg.grad[0] == 0).all()
    # a masked token at the data end has probability 0 under the path; if one is given anyway its weight is inf
    assert dfm_masked_loss(logits, x0, torch.ones_like(masked), torch.tensor([[1.0], [0.5]])).item() == math.inf
