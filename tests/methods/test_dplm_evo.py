"""DPLM-Evo behaviour beyond the spec's invariants: DPLM checkpoint conversion against transformers'
EsmForMaskedLM, the edit step's exact bookkeeping on a scripted network, sampler input errors, the recipe, and the
family landscape."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.methods.dplm_evo.alphabet import AA, ESM_VOCAB, aa_ids
from zoo.methods.dplm_evo.editing import EditConfig, edit_row, from_text, replay, to_text
from zoo.methods.dplm_evo.family import LEFT, RIGHT, family
from zoo.methods.dplm_evo.model import EDIT_HEAD_BIAS, MASK, DPLMEvoNet, _config, build_toy, from_dplm, to_dplm


def test_dplm_checkpoint_converts_and_sub_head_matches_esm_for_masked_lm():
    """A (tiny) DPLM checkpoint is an EsmForMaskedLM state dict: from_dplm loads it strictly, the new edit heads
    start at weight 0 / bias EDIT_HEAD_BIAS, and the substitution head equals EsmForMaskedLM's logits at the 20
    amino-acid ids on the same <cls> x <eos> input."""
    from transformers import EsmForMaskedLM

    cfg = _config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=40, token_dropout=False)
    torch.manual_seed(1)
    ref = EsmForMaskedLM(cfg).eval()
    state = {f"net.{k}": v for k, v in ref.state_dict().items()}  # byprot's wrapper prefix
    net = DPLMEvoNet(cfg)
    net.load_state_dict(from_dplm(state), strict=True)
    assert torch.equal(net.del_head.weight, torch.zeros_like(net.del_head.weight))
    assert float(net.ins_head.bias.detach()) == EDIT_HEAD_BIAS
    x = torch.tensor([from_text("ACDEFG#HIK")])
    sub, d, i = net(x, torch.tensor([10]))
    ids = torch.tensor([[0] + [ESM_VOCAB.index(c) if c != "#" else 32 for c in "ACDEFG#HIK"] + [2]])
    with torch.no_grad():
        logits = ref(input_ids=ids).logits[0, 1:11][:, aa_ids()]
    assert torch.allclose(sub[0], logits, atol=1e-5)
    assert torch.allclose(torch.sigmoid(d), torch.full_like(d, torch.sigmoid(torch.tensor(EDIT_HEAD_BIAS))))
    assert set(to_dplm(net.state_dict())) == set(net.state_dict()) - {"del_head.weight", "del_head.bias", "ins_head.weight", "ins_head.bias"}


class Scripted(torch.nn.Module):
    """A network whose heads are fixed functions of the row: delete every 'W', insert right of every 'G'
    (gap k + 1), substitution head certain of 'A' everywhere."""

    def forward(self, rows, lengths):
        b, w = rows.shape
        sub = torch.full((b, w, 20), -20.0)
        sub[..., AA.index("A")] = 20.0
        dl = torch.where(rows == AA.index("W"), 20.0, -20.0)
        il = torch.full((b, w + 1), -20.0)
        il[:, 1:] = torch.where(rows == AA.index("G"), 20.0, -20.0)
        return sub, dl, il


def test_edit_step_deletes_inserts_right_and_fills_exactly():
    """One step on 'CWGKW' with the scripted heads: both W deleted, a mask inserted right of G, filled with A:
    'CGAK' (a left-insertion bug would give 'CAGK'); the trajectory replays; masks are never deleted."""
    final, traj, stats = edit_row(Scripted(), from_text("CWGKW"), EditConfig(steps=1, temperature=0.0), torch.Generator())
    assert to_text(final) == "CGAK"
    assert traj[0].deleted == [1, 4] and traj[0].inserted == [2]
    assert replay("CWGKW", traj) == "CGAK" and stats["deletions"] == 2 and stats["insertions"] == 1
    final, traj, _ = edit_row(Scripted(), from_text("#W"), EditConfig(steps=1, temperature=0.0), torch.Generator())
    assert traj[0].deleted == [1] and to_text(final) == "A"


def test_edit_step_respects_max_length():
    """Insertions stop at the 2L latent size."""
    final, traj, _ = edit_row(Scripted(), from_text("GGGG"), EditConfig(steps=3, temperature=0.0, max_length=6), torch.Generator())
    assert len(final) == 6 and sum(len(t.inserted) for t in traj) == 2


def test_replay_refuses_a_trajectory_that_does_not_fit():
    with pytest.raises(ValueError, match="trajectory says"):
        replay("ACD", [{"deleted": [], "inserted": [], "substituted": [[0, "C", "D"]]}])


def test_sampler_input_errors_are_one_line():
    import zoo

    pipe = zoo.load("dplm-evo", variant="toy", device="cpu")
    with pytest.raises(ValueError, match="not one of|expected letters"):
        pipe.samplers["evolve"](sequences=["ACDJ"])
    with pytest.raises(ValueError, match="de-novo starts from masks"):
        pipe.samplers["de-novo"](sequences=["ACD"])
    with pytest.raises(ValueError, match="pass sequences="):
        pipe.samplers["post-edit"]()


def test_family_landscape_and_loop_only_indels():
    """Every family member parses (length 10..14, finite fitness), the residue counts at every core site rank like
    the PWM row (selection under f shaped the family), and single-substitution effects are
    exact differences of site log-factors."""
    fam = family()
    assert all(10 <= len(s) <= 14 and np.isfinite(fam.fitness(s)) for s in fam.train[:500])
    from scipy.stats import spearmanr

    for i in range(LEFT + RIGHT):
        col = [s[i] if i < LEFT else s[len(s) - LEFT - RIGHT + i] for s in fam.train]
        counts = np.bincount(col, minlength=20)
        assert spearmanr(counts, fam.log_pwm[i]).statistic > 0.85  # measured 0.94 .. 0.98
    wt = list(fam.held_out[0])
    mut = list(wt)
    mut[2] = (wt[2] + 1) % 20
    rows = fam.site_log_probs(len(wt))
    assert abs((fam.fitness(mut) - fam.fitness(wt)) - (rows[2, mut[2]] - rows[2, wt[2]])) < 1e-9
    assert fam.fitness(wt[: LEFT + RIGHT - 1]) == float("-inf")


def test_recipe_is_reproducible_and_leaves_the_cached_model():
    import zoo

    pipe = zoo.load("dplm-evo", variant="toy", device="cpu")
    before = {k: v.clone() for k, v in pipe.models["net"].state_dict().items()}
    rec = pipe.samplers["train-dplm-evo"]  # procedures of both sections live in pipe.samplers
    a = rec(seed=3, steps=3, batch_size=4)
    b = rec(seed=3, steps=3, batch_size=4)
    assert all(torch.equal(a.state[k], b.state[k]) for k in a.state)
    assert any(not torch.equal(a.state[k], before[k]) for k in before)
    assert all(torch.equal(v, pipe.models["net"].state_dict()[k]) for k, v in before.items())
    fresh = build_toy()
    fresh.load_state_dict(a.state_dict(), strict=True)


def test_full_variant_hub_file_path_loads_a_tiny_dplm_layout_file(tmp_path):
    """The full variant's loading path (read -> sha256 -> from_dplm -> strict load) on a tiny DPLM-layout file
    saved under the spec's file name: the spec's own source with only the weights and the factory size swapped."""
    from safetensors.torch import save_file
    from transformers import EsmForMaskedLM

    import zoo
    from registry.build import build_model
    from registry.weights import sha256_file

    src = zoo.spec("dplm-evo").models["net"].variants["full"]
    tiny = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=40)
    ref = EsmForMaskedLM(_config(token_dropout=True, layer_norm_eps=1e-5, emb_layer_norm_before=False, **tiny)).eval()
    path = tmp_path / src.weights.filename
    state = {k: v.contiguous() for k, v in ref.state_dict().items() if k != "lm_head.decoder.weight"}  # tied in DPLM
    save_file(state, str(path))
    local = src.model_copy(update={"weights": str(path), "sha256": sha256_file(path), "config": tiny})
    net = build_model(local, spec_dir=tmp_path, device="cpu", allow_outside_paths=True)
    assert torch.equal(net.lm_head.decoder.weight, ref.esm.embeddings.word_embeddings.weight)
    assert torch.equal(net.esm.encoder.layer[0].attention.self.query.weight, ref.esm.encoder.layer[0].attention.self.query.weight)
    assert float(net.del_head.bias.detach()) == EDIT_HEAD_BIAS
