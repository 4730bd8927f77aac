"""PoE-Bridge behaviour beyond the shared conformance suite (which runs the named invariants the specs
list; here: that they are registered, the exactness negative control), parameter validation, the toy pipeline answering correctly, the
full-variant code path on tiny Hugging Face checkpoints (Dream-style shift) and the CLI text."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from registry.contract import registered_invariants

ROOT = Path(__file__).resolve().parents[2]
SPECS = ["poe-bridge", "dlm-confidence-decoding", "ar-decoding"]


def _listed(name: str) -> list[str]:
    return yaml.safe_load((ROOT / "specs" / f"{name}.yaml").read_text())["invariants"]


def _registered() -> dict:
    import zoo.methods.poe_bridge.invariants  # noqa: F401

    return registered_invariants("zoo.methods.poe_bridge")


@pytest.mark.parametrize("spec", SPECS)
def test_every_listed_invariant_is_registered(spec):
    missing = set(_listed(spec)) - set(_registered())
    assert not missing


def test_exactness_detects_each_wrong_rule_and_accepts_the_right_one():
    """The exactness test proper (also registered as invariants): the right rule passes, wrong ones fail."""
    from zoo.methods.poe_bridge.enumerable import chi2_pvalue, make_toy, stage1_samples

    toy = make_toy(seed=3)
    law = toy.poe_joint(0.5)
    ok = stage1_samples(toy, 0.5, 30000, torch.Generator().manual_seed(1))
    assert chi2_pvalue(law, 30000, toy.empirical(ok.seqs)) > 1e-3
    bad = stage1_samples(toy, 0.5, 30000, torch.Generator().manual_seed(1), residual_fn=lambda p, q: p)
    assert chi2_pvalue(law, 30000, toy.empirical(bad.seqs)) < 1e-6


def test_params_validation():
    from pydantic import ValidationError

    from zoo.methods.poe_bridge import PoEBridgeSampler

    P = PoEBridgeSampler.Params
    assert P().mixture_weight == 0.3 and P().n_lanes == 4 and P().verify_window == 32
    for bad in ({"n_low_temp": 5}, {"temp_low": 0.8}, {"verify_window": 300}, {"mixture_weight": 1.5},
                {"top_p": 0.0}, {"lane_choice": "best"}, {"n_lanes": 0}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            P(**bad)


@pytest.fixture(scope="module")
def toy_pipe():
    import zoo

    return zoo.load("poe-bridge", variant="toy", device="cpu")


def test_toy_pipeline_answers_additions(toy_pipe):
    """zoo.load("poe-bridge") on a CPU answers held-out additions (prompts in free text too)."""
    out = toy_pipe(["347+285=", "What is 17+23?", "999+1"], seed=0)
    assert [t.split(">")[-1] for t in out.texts] == ["0632", "0040", "1000"]
    st = out.stats[0]
    assert st["dlm_forwards"] >= 1 and st["new_tokens"] == 33
    assert st["ar_forwards"] < st["new_tokens"]  # more than one token per AR forward


def test_both_lane_modes_are_deterministic_and_batch_independent(toy_pipe):
    for name in ("poe-bridge", "poe-bridge-repo"):
        s = toy_pipe.procedures[name]
        a = s(["123+456=", "808+192="], seed=4)
        b = s(["123+456=", "808+192="], seed=4)
        assert a == b
        assert s("808+192=", seed=4).token_ids[0] == a.token_ids[1]


def test_cli_prints_answer_and_summary(toy_pipe):
    s = toy_pipe.procedure
    text = s.run_cli(s.CliInputs(prompt="12+34"), seed=0)
    first, second = text.splitlines()
    assert first.endswith(">0046")
    assert "dlm_forwards=" in second and "ar_forwards=" in second and "accepted/window=" in second


def test_full_variant_code_path_on_tiny_hf_checkpoints(tmp_path):
    """The sampler over transformers models loaded from save_pretrained checkpoints: a tiny Qwen2 causal
    LM as target and a tiny Qwen2 read Dream-style (shift-by-one, explicit mask id) as proposal, with a
    vocabulary limit smaller than both models' vocabularies."""
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    from zoo.methods.poe_bridge import PoEBridgeSampler

    cfg = Qwen2Config(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, eos_token_id=2)
    for name, seed in (("ar", 0), ("dlm", 1)):
        torch.manual_seed(seed)
        Qwen2ForCausalLM(cfg).save_pretrained(tmp_path / name)
    ar = AutoModelForCausalLM.from_pretrained(tmp_path / "ar").eval()
    dlm = AutoModelForCausalLM.from_pretrained(tmp_path / "dlm").eval()
    smp = PoEBridgeSampler(models={"target": ar, "proposal": dlm},
                           params=PoEBridgeSampler.Params(max_new_tokens=10, verify_window=4, max_lookahead=8,
                                                          mask_token_id=39, shift_logits=True, vocab_limit=36))
    assert smp.denoiser.shift_logits
    out = smp(input_ids=[[5, 6, 7]], seed=0)
    ids = out.token_ids[0]
    assert 1 <= len(ids) <= 10 and all(0 <= t < 36 for t in ids)
    assert out.stats[0]["ar_forwards"] >= out.stats[0]["windows"] >= 1


def test_speculative_verify_eos_ends_block():
    from zoo.methods.poe_bridge.core import speculative_verify

    V = 5
    q = torch.full((1, 4, V), 1.0 / V, dtype=torch.float64)
    drafts = torch.tensor([[1, 2, 3, 4]])
    res = speculative_verify(drafts, q, q.clone(), torch.Generator().manual_seed(0), eos_id=2)
    assert res.n_emitted.tolist() == [2] and res.eos_hit.tolist() == [True] and res.tokens[0, 2:].tolist() == [-1, -1]


@pytest.mark.slow
def test_real_sampler_lane_resampling_moves_law_toward_ar():
    """On the enumerable target, the real sampler loop with K lanes: the paper's exact lane resampling
    moves the output law toward the AR target (TV 0.08 at K = 1 -> ~0.02 at K = 4, the MC floor at 4000
    draws), while the repository's argmax lane choice is mode-seeking and lands far from it (~0.32)."""
    from zoo.methods.poe_bridge.enumerable import make_toy, sampler_samples, tv

    toy = make_toy()
    ar = toy.ar_joint()
    t = {}
    for K, mode in [(1, "multinomial_exact"), (4, "multinomial_exact"), (4, "argmax_logit_diff")]:
        t[(K, mode)] = tv(toy.empirical(sampler_samples(toy, 0.3, 4000, 3, n_lanes=K, lane_choice=mode, seed=1)), ar)
    assert t[(1, "multinomial_exact")] > 0.06
    assert t[(4, "multinomial_exact")] < 0.035
    assert t[(4, "argmax_logit_diff")] > 0.2


def test_top_p_filter_keeps_the_smallest_nucleus():
    from zoo.methods.poe_bridge.core import top_p_filter

    lg = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]], dtype=torch.float64))
    kept = torch.isfinite(top_p_filter(lg, 0.79))[0].tolist()
    assert kept == [True, True, False, False]  # 0.5 + 0.3 reaches 0.79
    assert torch.isfinite(top_p_filter(lg, 0.81))[0].tolist() == [True, True, True, False]
    assert torch.isfinite(top_p_filter(lg, 0.1))[0].tolist() == [True, False, False, False]
    assert torch.equal(top_p_filter(lg, 1.0), lg)


def test_toy_equal_dlm_is_a_bidirectional_qwen2_of_the_ar_targets_size():
    """The toy-equal proposal: same architecture and parameter count as the AR target (equal cost per
    forward), attention bidirectional (position 0 sees later tokens), read without Dream's shift."""
    from zoo.common.masked_dlm import MaskedDenoiser
    from zoo.methods.poe_bridge.toy import build_ar, build_dlm_qwen2

    dlm, ar = build_dlm_qwen2(), build_ar()
    assert type(dlm) is type(ar)
    assert [p.shape for p in dlm.parameters()] == [p.shape for p in ar.parameters()]
    a = torch.tensor([[1, 4, 5, 6, 7, 8]])
    b = a.clone()
    b[0, -1] = 9
    with torch.no_grad():
        assert (dlm(a).logits[0, 0] - dlm(b).logits[0, 0]).abs().max() > 1e-4  # sees the future
        assert torch.equal(ar(a).logits[0, 0], ar(b).logits[0, 0])  # the AR does not
    den = MaskedDenoiser.wrap(dlm)
    assert den.mask_token_id == 3 and not den.shift_logits


def test_toy_equal_variant_answers_additions():
    import zoo

    pipe = zoo.load("poe-bridge", variant="toy-equal", device="cpu")
    out = pipe(["347+285=", "999+1"], seed=0)
    assert [t.split(">")[-1] for t in out.texts] == ["0632", "1000"]
    assert out.stats[0]["ar_forwards"] < out.stats[0]["new_tokens"]


# ----------------------------------------------------------------------------- speed measurement (thread-CPU cost per forward)
class _AnswerKey:
    """The addition task's answer key: the full answer region (answer, EOS, EOS padding) of a prompt row."""

    def __init__(self, task: str, digits: int, region: int):
        from zoo.methods.poe_bridge.toy import toy_tokenizer

        self.tok, self.region = toy_tokenizer(task, digits), region
        self.P = len(self.tok.encode("1+1"))
        self.memo: dict[tuple[int, ...], list[int]] = {}

    def register(self, a: int, b: int) -> None:
        """Make the answer of ``a + b`` known to the key (looked up by the prompt's ids)."""
        ans = self.tok.encode_raw(self.tok.solution(a, b)) + [self.tok.eos_token_id]
        self.memo[tuple(self.tok.encode(f"{a}+{b}"))] = ans + [self.tok.eos_token_id] * (self.region - len(ans))

    def answer(self, row: list[int]) -> list[int]:
        return self.memo[tuple(row[: self.P])]

    def one_hot(self, ids: list[int]) -> torch.Tensor:
        out = torch.full((len(ids), self.tok.vocab_size), -1e9)
        out[torch.arange(len(ids)), torch.tensor(ids)] = 0.0
        return out


class AnswerKeyDLM(torch.nn.Module):
    """A perfect mean-field proposal: every answer position gets the true token with probability 1."""

    shift_logits = False

    def __init__(self, key: _AnswerKey):
        super().__init__()
        self.key, self.mask_token_id = key, key.tok.mask_token_id
        self.zoo_tokenizer, self.zoo_max_new_tokens = key.tok, key.region

    def forward(self, input_ids):
        rows = [torch.cat([self.key.one_hot(r[: self.key.P]), self.key.one_hot(self.key.answer(r))])[: len(r)]
                for r in input_ids.tolist()]
        return torch.stack(rows)


class AnswerKeyAR(torch.nn.Module):
    """A perfect causal target over a token-id cache (the enumerable module's ``TableCache``)."""

    def __init__(self, key: _AnswerKey):
        from zoo.methods.poe_bridge.enumerable import TableCache

        super().__init__()
        self.key = key
        self.zoo_tokenizer, self.zoo_new_cache = key.tok, TableCache

    def forward(self, input_ids, cache=None, use_cache=True):
        from zoo.methods.poe_bridge.enumerable import _Out

        full = input_ids if cache is None or cache.ids is None else torch.cat([cache.ids, input_ids], 1)
        if cache is not None:
            cache.ids = full
        start = full.shape[1] - input_ids.shape[1]
        rows = []
        for r in full.tolist():
            nxt = self.key.answer(r) + [self.key.tok.eos_token_id]
            rows.append(self.key.one_hot([nxt[min(max(t + 1 - self.key.P, 0), len(nxt) - 1)] for t in range(start, len(r))]))
        return _Out(torch.stack(rows))


@pytest.mark.parametrize("task,digits,region,window", [("steps", 3, 40, 32), ("columns", 31, 64, 32), ("columns", 31, 64, 8)])
def test_forward_count_bound_is_what_a_perfect_dlm_reaches(task, digits, region, window):
    """The bound the card states before any training, F / (1 + ceil(N / V)), is the real sampler's forward
    count with an answer-key DLM and target: one DLM forward, ceil(N / V) verify forwards (elastic windows
    reuse the one lookahead). toy (33-token answers, F = 20): 20 / 3 = 6.67; toy-long (63 tokens, F = 32):
    32 / 3 = 10.67."""
    from zoo.methods.poe_bridge import PoEBridgeSampler
    from zoo.methods.poe_bridge.speed import forward_count_bound

    key = _AnswerKey(task, digits, region)
    a, b = (347, 285) if digits == 3 else (3 * 10**30 + 4712345, 9 * 10**30 + 285)
    key.register(a, b)
    N = key.tok.answer_length()
    for K in (1, 4):
        smp = PoEBridgeSampler(models={"target": AnswerKeyAR(key), "proposal": AnswerKeyDLM(key)},
                               params=PoEBridgeSampler.Params(n_lanes=K, verify_window=window))
        out = smp(f"{a}+{b}", seed=0)
        st = out.stats[0]
        assert key.tok.is_correct(f"{a}+{b}", out.texts[0])
        assert st["new_tokens"] == N and st["corrections"] == 0
        assert (st["dlm_forwards"], st["ar_forwards"]) == (1, -(-N // window))
        assert forward_count_bound(region / 2, N, window) == pytest.approx(region / 2 / (st["dlm_forwards"] + st["ar_forwards"]))
    assert forward_count_bound(20, 33, 32) == pytest.approx(20 / 3)
    with pytest.raises(ValueError, match="answer_tokens and window"):
        forward_count_bound(20, 0, 32)


def test_forward_costs_count_cpu_time_not_time_off_the_cpu(toy_pipe):
    """The benchmark's cost per forward is thread-CPU time: a DLM whose forward also waits 30 ms off the CPU
    (what a loaded machine does to wall clock) keeps its cost, while its wall clock shows the wait. With wall
    medians (the earlier cost line) the waiting DLM would cost > 30 ms."""
    import time

    from zoo.methods.poe_bridge.speed import Stopwatch, forward_costs

    dlm = toy_pipe.models["proposal"]
    plain = forward_costs(toy_pipe.models, (1, 4), reps=3)
    assert plain["clock"] == "thread-cpu" and plain["answer_region"] == 40
    assert set(plain) >= {"dlm_forward_ms", "verify_k1_ms", "verify_k4_ms", "ar_step_ms"}
    orig = dlm.forward
    try:
        dlm.forward = lambda *a, **k: (time.sleep(0.03), orig(*a, **k))[1]
        waiting = forward_costs(toy_pipe.models, (1,), reps=3)
        with Stopwatch() as sw:
            dlm(torch.tensor([[1, 4, 5]]))
    finally:
        del dlm.forward
    assert waiting["dlm_forward_ms"] < 15 and sw.wall >= 0.03 > sw.cpu


def test_cost_model_and_speed_summary_arithmetic():
    """cost_model_s charges DLM forwards at the DLM cost and AR forwards at the row's own kind (a K-lane
    verify or a decode step); speed_summary reports K = 1 and K = 4 against 2-token/step DLM decoding."""
    from zoo.methods.poe_bridge.benchmark import speed_summary
    from zoo.methods.poe_bridge.speed import cost_model_s, verify_key

    costs = {"dlm_forward_ms": 2.0, "verify_k1_ms": 1.0, "verify_k4_ms": 3.0, "ar_step_ms": 0.5}
    assert verify_key(4) == "verify_k4_ms"
    assert cost_model_s({"dlm_forwards": 2.0, "ar_forwards": 3.0}, costs, "verify_k4_ms", 10) == pytest.approx(0.13)
    assert cost_model_s({"dlm_forwards": 20.0, "ar_forwards": 0.0}, costs, None, 10) == pytest.approx(0.4)

    def row(method, dlm, ar, key, cpu):
        r = {"method": method, "dlm_forwards": dlm, "ar_forwards": ar, "tokens": 33.0, "cpu_s": cpu}
        r["model_s"] = cost_model_s(r, costs, key, 10)
        r.update(tokens_per_s=330 / cpu, tokens_per_cpu_s=330 / cpu, tokens_per_model_s=330 / r["model_s"])
        return r

    rows = [row("DLM decoding (entropy, 2 tok/step)", 20, 0, None, 0.8),
            row("PoE-Bridge K=1 (no IS)", 2, 2, "verify_k1_ms", 0.1),
            row("PoE-Bridge K=4 multinomial_exact (paper)", 2, 2, "verify_k4_ms", 0.2)]
    k1, k4 = speed_summary(rows, costs, 32)
    assert k1["row"].startswith("K=1") and k4["row"].startswith("K=4")
    assert k1["fwd"] == k4["fwd"] == pytest.approx(5.0) and k1["bound"] == pytest.approx(20 / 3)
    assert k1["model"] == pytest.approx(0.4 / 0.06) and k4["model"] == pytest.approx(0.4 / 0.10)
    assert k1["cpu"] == pytest.approx(8.0) and k4["cpu_over_model"] == pytest.approx(2.0)


def test_column_task_answers_sit_at_fixed_offsets_from_their_digits():
    """toy-long's task: prompt and answer both take two tokens per column (least significant first), so answer
    token 2i (the sum digit) reads prompt tokens 1 + 2i and 2 + 2i and the carry token just before it; the
    pairs spell a + b; a wrong, short or malformed answer is not correct."""
    import random

    from zoo.methods.poe_bridge.columns import ColumnTokenizer, column_value

    tok = ColumnTokenizer(31)
    rng = random.Random(0)
    for _ in range(50):
        a, b = rng.randrange(10**31), rng.randrange(10**31)
        prompt, ans = tok.encode(f"{a}+{b}"), tok.encode_raw(tok.solution(a, b))
        assert len(prompt) == 64 and len(ans) + 1 == tok.answer_length() == 63
        val = lambda t: int(tok.vocab[t])  # noqa: E731
        for i in range(31):
            carry_in = val(ans[2 * i - 1]) if i else 0
            s = val(prompt[1 + 2 * i]) + val(prompt[2 + 2 * i]) + carry_in
            assert (val(ans[2 * i]), val(ans[2 * i + 1])) == (s % 10, s // 10)
        text = tok.decode(ans)
        assert column_value(text) == a + b and tok.is_correct(f"{a}+{b}=", text)
        assert not tok.is_correct(f"{a}+{b}=", text[:-2]) and not tok.is_correct(f"{a + 1}+{b}=", text)
    assert column_value("1203") is None and column_value("123") is None  # carry 2; odd length
    assert [len(e.answer) for e in tok.eval_problems(3)] == [62] * 3
    with pytest.raises(ValueError, match="below 10\\*\\*31"):
        tok.encode(f"{10**31}+1")


def test_column_training_is_byte_reproducible_and_seeded():
    """The toy-long loops (columns task) give the same weights for the same seed and different ones for another
    seed (a loop that ignored its seed would pass the first half only); a few steps stand in for the shipped
    run, whose bytes ``zoo train poe-bridge --check --only toy-long`` compares."""
    from zoo.methods.poe_bridge.toy import toy_tokenizer
    from zoo.methods.poe_bridge.training import train_ar_qwen2, train_dlm_qwen2

    arch = {"task": "columns", "max_new_tokens": 64, "max_position_embeddings": 128}

    def run(fn, seed):
        return fn(2, 2, 3e-3, 31, seed, init_seed=seed, **arch).state_dict()

    for fn in (train_ar_qwen2, train_dlm_qwen2):
        a, b, c = run(fn, 0), run(fn, 0), run(fn, 1)
        assert all(torch.equal(a[k], b[k]) for k in a)
        assert not all(torch.equal(a[k], c[k]) for k in a)
    with pytest.raises(ValueError, match="toy task must be one of"):
        toy_tokenizer("rows", 3)


def test_length_curriculum_is_shorter_additions_in_the_same_layout():
    """toy-long's length curriculum: with ``active_digits = k`` the operand digits above the first k are 0 (the same
    randint draw, so the low digits equal the unrestricted batch's), the layout and prompt length are unchanged and
    the answers stay correct; ``curriculum_digits`` ramps from the start to all digits over its fraction of the
    steps, then stops; a curriculum changes the trained weights (a loop ignoring it would not) and is refused on
    the 3-digit step task."""
    from zoo.methods.poe_bridge.columns import ColumnTokenizer
    from zoo.methods.poe_bridge.training import curriculum_digits, train_ar_qwen2

    tok = ColumnTokenizer(31)
    full, P = tok.training_batch(16, torch.Generator().manual_seed(3), set(), 64)
    short, P2 = tok.training_batch(16, torch.Generator().manual_seed(3), set(), 64, active_digits=5)
    assert P == P2 == 64 and short.shape == full.shape
    zero = tok.stoi["0"]
    assert torch.equal(short[:, 1:11], full[:, 1:11])  # columns 0..4: the same digits
    assert (short[:, 11:P - 1] == zero).all() and not (full[:, 11:P - 1] == zero).all()
    for row in short:
        prompt = tok.decode(row[1:P - 1].tolist())
        a, b = int(prompt[0::2][::-1]), int(prompt[1::2][::-1])
        assert a < 10**5 and b < 10**5
        assert tok.decode(row[P:P + 62].tolist()) == tok.solution(a, b)
    with pytest.raises(ValueError, match="active_digits"):
        tok.training_batch(2, torch.Generator(), set(), 64, active_digits=0)
    ramp = [curriculum_digits(s, 100, 31, 0.4, 3) for s in range(100)]
    assert ramp[0] == 3 and ramp[39] == 30 and ramp[40:] == [None] * 60
    assert all(x <= y for x, y in zip(ramp[:40], ramp[1:40]))
    assert curriculum_digits(0, 100, 31, 0.0, 3) is None
    arch = {"task": "columns", "max_new_tokens": 64, "max_position_embeddings": 128}
    a = train_ar_qwen2(2, 2, 3e-3, 31, 0, **arch).state_dict()
    c = train_ar_qwen2(2, 2, 3e-3, 31, 0, curriculum=0.9, **arch).state_dict()
    assert not all(torch.equal(a[k], c[k]) for k in a)
    with pytest.raises(ValueError, match="columns task only"):
        train_ar_qwen2(1, 2, 3e-3, 3, 0, curriculum=0.5)


def test_seed_pairs_train_into_the_output_folder_once(tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]):
    """``train_long_seed``: another training seed's toy-long pair is written by the trainer (here a stand-in that
    records its seed) through the engine's ``ctx.path`` into ``toy-long-seed<N>/`` of the output folder, with the
    spec's recipe (or ``--train-recipe`` overrides); a second call reuses the files, a missing or different recipe
    record retrains. ``--train-seeds`` without
    toy-long in --variants is one error line naming it (exit 2)."""
    import zoo
    from registry.context import Context
    from registry.loader import find_spec_by_name
    from zoo.cli import main
    from zoo.methods.poe_bridge import train
    from zoo.methods.poe_bridge.benchmark import parse_recipe

    calls = []

    def fake(run, opts):
        calls.append((run.seed, opts.ar_steps))
        for name in train.LONG_FILES:
            run.path(name).write_bytes(f"{name} {run.seed}".encode())

    monkeypatch.setattr(train, "train_long", fake)
    spec, file = zoo.spec("poe-bridge"), find_spec_by_name("poe-bridge")
    ctx = Context(spec, file, out_dir=tmp_path)
    r = train.train_long_seed(ctx, 3)
    assert calls == [(3, spec.training["toy-long"].params["ar_steps"])] and r["trained"]
    assert r["paths"]["target"] == tmp_path / "toy-long-seed3" / "poe-bridge-long-ar.safetensors"
    assert r["recipe"]["seed"] == 3 and r["recipe"]["ar_curriculum"] == 0.0
    again = train.train_long_seed(ctx, 3)
    assert not again["trained"] and len(calls) == 1 and again["sha256"] == r["sha256"]
    (tmp_path / "toy-long-seed3" / "recipe.json").unlink()
    assert train.train_long_seed(ctx, 3)["trained"] and len(calls) == 2
    recipe = parse_recipe(["ar_steps=7", "ar_curriculum=0.4"])
    assert recipe == {"ar_steps": 7, "ar_curriculum": 0.4}
    other = train.train_long_seed(ctx, 3, recipe)  # another recipe: retrained, recorded
    assert other["trained"] and calls[-1] == (3, 7) and other["recipe"]["ar_curriculum"] == 0.4
    with pytest.raises(Exception, match="KEY=VALUE"):
        parse_recipe(["ar_steps"])
    assert main(["bench", "poe-bridge", "--variants", "toy", "--train-seeds", "1", "--out-dir", str(tmp_path / "b")]) == 2
    assert "--train-seeds" in capsys.readouterr().err


def test_bench_quick_writes_table_png_and_json(tmp_path, capsys: pytest.CaptureFixture[str]):
    """``zoo bench poe-bridge --quick`` (2 problems here): the engine's flags, the toy pair's table in the report
    (every row, the speed summary), the PNG and ``poe-bridge-bench.json`` (the rows, speedup rows after them) in
    --out-dir; the PoE-weight ablation without the toy pair is one line naming --sweep-w (exit 2)."""
    import json

    from zoo.cli import main

    assert main(["bench", "poe-bridge", "--quick", "--problems", "2", "--out-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    methods = ["AR decoding (target)", "DLM decoding (entropy, 2 tok/step)", "DLM decoding (entropy, 1 tok/step)",
               "direct D->A IS, no bridge (K=4)", "speculative D->A, w=0 (K=4)", "PoE-Bridge K=1 (no IS)",
               "PoE-Bridge K=4 multinomial_exact (paper)", "PoE-Bridge K=4 argmax_logit_diff (repo)"]
    assert "[toy] Toy 3-digit addition" in text and "2 held-out problems" in text and "K=4, the paper's row" in text
    assert all(f"| {m:<42} |" in text for m in methods)
    doc = json.loads((tmp_path / "poe-bridge-bench.json").read_text())
    assert doc["quick"] and doc["options"]["variants"] == ["toy"] and doc["options"]["problems"] == 2
    rows = doc["result"]["rows"]
    assert [r["method"] for r in rows] == methods + ["speedup K=1, the CPU row", "speedup K=4, the paper's row"]
    assert rows[0]["ar_forwards"] == 33.0 and rows[1]["dlm_forwards"] == 20.0  # AR: one forward per token; DLM: 2 tok/step
    assert (tmp_path / "poe-bridge-bench.png").stat().st_size > 1000
    assert (tmp_path / "poe-bridge-bench.md").read_text().lstrip().startswith("[toy]")
    assert main(["bench", "poe-bridge", "--variants", "toy-equal", "--sweep-w", "--out-dir", str(tmp_path / "x")]) == 2
    assert "--sweep-w" in capsys.readouterr().err
    # two pairs, then the w sweep on the toy pair's models (a later pair must not replace them)
    assert main(["bench", "poe-bridge", "--quick", "--problems", "1", "--variants", "toy", "toy-equal", "--sweep-w",
                 "--out-dir", str(tmp_path / "y")]) == 0
    rows = json.loads((tmp_path / "y" / "poe-bridge-bench.json").read_text())["result"]["rows"]
    assert [r["method"] for r in rows if r["method"].startswith("sweep")] == [f"sweep w={w}" for w in (0.0, 0.3, 0.5, 0.7, 0.9, 1.0)]
    assert {r["variant"] for r in rows} == {"toy", "toy-equal"}


def test_trainers_write_the_declared_files_reproducibly(tmp_path):
    """The three ``training:`` entries name registered trainers that write exactly the files they declare (shortened to
    2 optimiser steps here; ``zoo train poe-bridge --check`` runs the full recipes against the shipped sha256), the
    same bytes twice; the baseline specs reuse poe-bridge's toy files instead of declaring them again."""
    import zoo
    from registry.context import Context
    from registry.loader import find_spec_by_name
    from zoo.common.training import sha256_file
    from zoo.methods.poe_bridge import train

    spec, file = zoo.spec("poe-bridge"), find_spec_by_name("poe-bridge")
    short = {"toy": (train.train_toy, train.PairOptions(ar_steps=2, dlm_steps=2, batch_size=4)),
             "toy-equal": (train.train_equal, train.EqualOptions(steps=2, batch_size=4)),
             "toy-long": (train.train_long, train.LongOptions(ar_steps=2, dlm_steps=2, batch_size=2, digits=31))}
    assert set(spec.training) == set(short)
    for name, (fn, opts) in short.items():
        assert spec.training[name].trainer == f"zoo.methods.poe_bridge.train:{fn.__name__}"
        digests = []
        for rep in range(2):
            out = tmp_path / f"{name}-{rep}"
            fn(Context(spec, file, out_dir=out, use_cache=False), opts)
            digests.append({p.name: sha256_file(p) for p in sorted(out.iterdir())})
        assert set(digests[0]) == {p.rsplit("/", 1)[-1] for p in spec.training[name].produces}
        assert digests[0] == digests[1]
    for baseline, role in (("ar-decoding", "target"), ("dlm-confidence-decoding", "proposal")):
        src = zoo.spec(baseline).models[role].variants["toy"]
        assert (src.source, src.from_spec, src.from_role) == ("role", "poe-bridge", role)
