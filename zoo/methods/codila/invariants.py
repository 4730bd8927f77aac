"""Named property checks of CoDiLA (codila.md Sec. 7), run by the conformance harness.

Exact properties of the task laws, the soft-conditioning interface, the entropies and the schedules; each
carries a negative control that a plausible wrong implementation fails. The one statistical check
(``xor-parallel-validity-exact``, Monte Carlo part) uses a fixed seed and a binomial z-test at |z| < 3.29
(false-fail rate 1e-3 for a fresh seed).
"""
from __future__ import annotations

import math

import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from registry.contract import invariant
from zoo.common.masked_dlm import MaskedDenoiser, TinyMaskedLM, confidence_decode

from .core import (
    block_entropy,
    block_logits,
    block_nll,
    conditioning_probs,
    entropy,
    restrict_marginals,
    soft_embeddings,
    total_correlation,
    truncate_topk,
    verify_penalise,
)
from .sampler import DecodeConfig, DecodeTrace, codila_decode
from .tasks import TRAP_JOINTS, Task, independent_validity, pair_table, top1_indistinguishable_bound

seeds = st.integers(0, 2**31 - 1)


def _probs(seed: int, *shape: int, scale: float = 3.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=g, dtype=torch.float64) * scale, -1)


# ----------------------------------------------------------------------------- the task laws
@invariant("xor-parallel-validity-exact")
def xor_parallel_validity_exact():
    """XOR-words: every position's exact marginal is uniform, a fully masked word drawn from independent
    marginals is valid with probability exactly 0.25 and a 4-letter block with 0.0625; the joint itself is
    valid with probability 1. Monte Carlo (fixed seed, 40k words) agrees with 0.25 at |z| < 3.29
    (false-fail rate 1e-3). Negative control: drawing the word from the joint (what CoDiLA's AR should do)
    is rejected as 0.25 at |z| > 30."""
    task = Task("xor")
    word = task.joint_table((0, 1))
    assert torch.allclose(word.sum(1), torch.full((4,), 0.25, dtype=torch.float64))
    assert torch.allclose(word.sum(0), torch.full((4,), 0.25, dtype=torch.float64))
    assert abs(independent_validity(word) - 0.25) < 1e-12
    assert abs(independent_validity(task.joint_table((0, 1, 2, 3))) - 0.0625) < 1e-12
    # conditioning on a decoded letter determines its partner: the sequential DLM is exact
    given_a = task.joint_table((1,), {0: "a"})
    assert float(given_a[1]) == 1.0  # a -> b
    # Monte Carlo: independent draws vs the joint
    g = torch.Generator().manual_seed(0)
    n = 40000
    first = torch.randint(0, 4, (n,), generator=g)
    second = torch.randint(0, 4, (n,), generator=g)
    valid = word[first, second] > 0
    z = (float(valid.double().mean()) - 0.25) / math.sqrt(0.25 * 0.75 / n)
    assert abs(z) < 3.29, z
    joint_draw = torch.multinomial(word.reshape(-1), n, replacement=True, generator=g)
    valid_joint = word.reshape(-1)[joint_draw] > 0
    z_wrong = (float(valid_joint.double().mean()) - 0.25) / math.sqrt(0.25 * 0.75 / n)
    assert abs(z_wrong) > 30, z_wrong


@invariant("total-correlation-identity")
@settings(deadline=None, max_examples=30)
@given(st.integers(2, 5), st.integers(1, 3), seeds)
def total_correlation_identity(vocab, block, seed):
    """sum_j H[x_j] - H[b] >= 0 for any joint; = 0 for a product law; = log 4 for an XOR word (Theorem 3.2's
    per-block NELBO gain). Negative control: the XOR word's value is not 0 (independence) nor 2 log 4."""
    joint = _probs(seed, vocab**block, scale=2.0).reshape((vocab,) * block)
    assert total_correlation(joint) >= -1e-12
    marg = [_probs(seed + j + 1, vocab) for j in range(block)]
    prod = marg[0]
    for m in marg[1:]:
        prod = prod.unsqueeze(-1) * m.reshape((1,) * prod.dim() + (-1,))
    assert abs(total_correlation(prod)) < 1e-10
    tc = total_correlation(Task("xor").joint_table((0, 1)))
    assert abs(tc - math.log(4)) < 1e-12
    assert abs(tc) > 1.0 and abs(tc - 2 * math.log(4)) > 1.0


@invariant("top1-counterexample-exact")
def top1_counterexample_exact():
    """Theorem 3.3 as an exact construction: the trap toy's two target joints J_ab, J_cd have the same
    per-position modes (a, c), the mode pair ac is invalid under both, and their supports are disjoint. So the
    top-1 (one-hot) inputs of the AR are identical in both contexts and any top-1-conditioned AR is valid with
    probability at most 0.5, while the soft embeddings of the two marginals differ (for the shipped toy AR's
    table and a random one) and a soft-conditioned AR (the lookup marginals -> joint) is valid with probability 1.
    Negative control: for two joints with different modes the bound function refuses, and top-1 then separates."""
    j1, j2 = pair_table(TRAP_JOINTS["ab"]), pair_table(TRAP_JOINTS["cd"])
    m1 = [j1.sum(1), j1.sum(0)]
    m2 = [j2.sum(1), j2.sum(0)]
    assert [int(m.argmax()) for m in m1] == [int(m.argmax()) for m in m2] == [0, 2]  # (a, c)
    assert float(j1[0, 2]) == 0.0 and float(j2[0, 2]) == 0.0  # mode pair invalid under both
    assert not bool(((j1 > 0) & (j2 > 0)).any())  # disjoint supports
    pi1, pi2 = torch.stack(m1), torch.stack(m2)
    assert torch.equal(truncate_topk(pi1, 1), truncate_topk(pi2, 1))
    table = torch.randn(4, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert torch.equal(soft_embeddings(truncate_topk(pi1, 1), table), soft_embeddings(truncate_topk(pi2, 1), table))
    assert not torch.allclose(soft_embeddings(pi1, table), soft_embeddings(pi2, table))
    bound = top1_indistinguishable_bound([j1, j2], [0.5, 0.5])
    assert abs(bound - 0.5) < 1e-12
    # the soft-conditioned lookup: marginals identify the context, output the right joint -> validity 1
    lookup = {tuple(pi1.reshape(-1).tolist()): j1, tuple(pi2.reshape(-1).tolist()): j2}
    soft_valid = 0.5 * float(lookup[tuple(pi1.reshape(-1).tolist())][j1 > 0].sum()) + \
        0.5 * float(lookup[tuple(pi2.reshape(-1).tolist())][j2 > 0].sum())
    assert abs(soft_valid - 1.0) < 1e-12
    # independent parallel decoding of the target from exact marginals
    assert 0.45 < 0.5 * independent_validity(j1) + 0.5 * independent_validity(j2) < 0.55
    # negative control: different modes -> top-1 can tell the contexts apart
    j3 = pair_table({"bd": 0.6, "ca": 0.4})
    try:
        top1_indistinguishable_bound([j1, j3], [0.5, 0.5])
    except ValueError:
        pass
    else:
        raise AssertionError("joints with different modes were treated as indistinguishable")
    assert not torch.equal(truncate_topk(pi1, 1), truncate_topk(torch.stack([j3.sum(1), j3.sum(0)]), 1))


# ----------------------------------------------------------------------------- soft conditioning interface
@invariant("soft-embedding-identities")
@settings(deadline=None, max_examples=40)
@given(st.integers(2, 12), st.integers(1, 16), st.floats(0.0, 1.0), seeds)
def soft_embedding_identities(vocab, dim, lam, seed):
    """e(onehot_v) = E[v] exactly; e(pi) = pi @ E is a convex combination of the rows (coefficients pi >= 0,
    sum 1, recovered by least squares when E has full row rank); linearity e(l p1 + (1-l) p2) = l e(p1) +
    (1-l) e(p2); a larger AR table uses only its first V rows. Negative control: weighting the rows by the
    logits (not the probabilities) breaks linearity in pi."""
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(vocab + 3, dim, generator=g, dtype=torch.float64)
    for v in range(vocab):
        onehot = torch.zeros(vocab, dtype=torch.float64)
        onehot[v] = 1
        assert torch.equal(soft_embeddings(onehot, E), E[v])
    p1, p2 = _probs(seed, vocab), _probs(seed + 1, vocab)
    mix = lam * p1 + (1 - lam) * p2
    assert torch.allclose(soft_embeddings(mix, E), lam * soft_embeddings(p1, E) + (1 - lam) * soft_embeddings(p2, E),
                          atol=1e-10)
    if dim >= vocab:  # full row rank a.s.: the coefficients of the combination are the probabilities
        coef = torch.linalg.lstsq(E[:vocab].T, soft_embeddings(p1, E).unsqueeze(-1)).solution.squeeze(-1)
        assert torch.allclose(coef, p1, atol=1e-6) and bool((coef > -1e-6).all()) and abs(float(coef.sum()) - 1) < 1e-6
    # negative control: logits as weights are not linear in the probabilities
    wrong = lambda p: p.log() @ E[:vocab]  # noqa: E731
    assert not torch.allclose(wrong(0.5 * p1 + 0.5 * p2), 0.5 * wrong(p1) + 0.5 * wrong(p2), atol=1e-6)


@invariant("marginals-on-shared-vocabulary")
@settings(deadline=None, max_examples=30)
@given(st.integers(6, 20), st.integers(1, 4), seeds)
def marginals_on_shared_vocabulary(vocab, rows, seed):
    """The marginals handed to the AR are distributions (>= 0, rows sum to 1) with exactly zero mass on the
    excluded ids (MASK, specials, boundary) and on ids beyond the shared vocabulary; top-k truncation keeps k
    entries and stays a distribution. Negative control: a plain softmax puts mass on the mask id."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab + 2, generator=g) * 3
    excluded = (0, 3, vocab - 1)
    p = restrict_marginals(logits, excluded, vocab)
    assert p.shape == (rows, vocab)
    assert bool((p >= 0).all()) and torch.allclose(p.sum(-1), torch.ones(rows), atol=1e-6)
    assert bool((p[:, list(excluded)] == 0).all())
    k = int(torch.randint(1, vocab - 3, (1,), generator=g))
    t = conditioning_probs(p, "topk", k)
    assert bool(((t > 0).sum(-1) <= k).all()) and torch.allclose(t.sum(-1), torch.ones(rows), atol=1e-6)
    assert bool((torch.softmax(logits[:, :vocab], -1)[:, 3] > 0).all())


@invariant("block-entropy-bounds")
@settings(deadline=None, max_examples=40)
@given(st.integers(2, 16), st.integers(1, 6), seeds)
def block_entropy_bounds(vocab, block, seed):
    """h(k) = mean of the first k entropies lies in [0, log V]; one-hot marginals give h = 0 and uniform
    ones log V; h(1) is the first position's entropy. Negative control: the summed (not averaged) entropy
    exceeds log V for two uniform positions."""
    p = _probs(seed, block, vocab)
    h = block_entropy(p)
    assert bool((h >= -1e-12).all()) and bool((h <= math.log(vocab) + 1e-9).all())
    assert abs(float(h[0]) - float(entropy(p[0]))) < 1e-12
    onehot = torch.nn.functional.one_hot(torch.arange(block) % vocab, vocab).double()
    assert torch.equal(block_entropy(onehot), torch.zeros(block, dtype=torch.float64))
    uni = torch.full((block, vocab), 1 / vocab, dtype=torch.float64)
    assert torch.allclose(block_entropy(uni), torch.full((block,), math.log(vocab), dtype=torch.float64))
    assert float(entropy(torch.full((2, vocab), 1 / vocab, dtype=torch.float64)).sum()) > math.log(vocab)


@invariant("verify-never-raises-disagreeing-confidence")
@settings(deadline=None, max_examples=40)
@given(st.integers(1, 16), st.floats(0.0, 1.0), seeds)
def verify_never_raises_disagreeing_confidence(n, penalty, seed):
    """AR verification: a disagreeing position's confidence never increases, an agreeing one is unchanged.
    Negative control: a penalty above 1 is refused (it would raise disagreeing positions)."""
    g = torch.Generator().manual_seed(seed)
    conf = torch.rand(n, generator=g, dtype=torch.float64)
    agree = torch.rand(n, generator=g) < 0.5
    out = verify_penalise(conf, agree, penalty)
    assert torch.equal(out[agree], conf[agree])
    assert bool((out[~agree] <= conf[~agree]).all())
    try:
        verify_penalise(conf, agree, 1.5)
    except ValueError:
        pass
    else:
        raise AssertionError("a penalty > 1 was accepted")


# ----------------------------------------------------------------------------- the schedules on tiny models
def _tiny(seed: int, vocab: int = 10, mask: int = 3):
    """A random TinyMaskedLM drafter and a random tiny Qwen2 local AR over a 10-id vocabulary
    (ids 8, 9 are the boundary tokens, 3 the mask)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    dlm = TinyMaskedLM(vocab, mask, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32).eval()
    conf = Qwen2Config(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    ar = Qwen2ForCausalLM(conf).eval()
    return MaskedDenoiser(dlm, mask), ar


@invariant("dynamic-tau0-is-confidence-decoding")
def dynamic_tau0_is_confidence_decoding():
    """The dynamic schedule with tau = 0 (any B), or with B = 1 (any tau), reproduces plain confidence
    decoding (entropy rule, one token per forward) token for token with the same seed, at temperature 0 and 1,
    including the EOS stop, on 8 random tiny drafter/AR pairs (B 1..4, L 2..9). Negative control: tau = 50
    with B = 4 decodes several tokens in one step and leaves the confidence-decoding trajectory."""
    for case in range(8):
        den, ar = _tiny(case)
        block, length, temperature = 1 + case % 4, 2 + case, float(case % 2)
        ref, st_ref = confidence_decode(den, [1], length, 1, None, "entropy", temperature, 1.0, 2,
                                        torch.Generator().manual_seed(case))
        for tau, B in ((0.0, block), (50.0, 1)):
            cfg = DecodeConfig(schedule="dynamic", block_size=B, entropy_threshold=tau, candidate_window_blocks=64,
                               dlm_temperature=temperature, boundary=(8, 9), excluded=(0, 1, 3, 8, 9))
            got, st_got = codila_decode(den, ar, [1], length, cfg, 2, torch.Generator().manual_seed(case))
            assert got == ref, (case, tau, B, got, ref)
            assert st_got["dlm_forwards"] == st_ref["dlm_forwards"] and st_got["ar_forwards"] == 0
    den, ar = _tiny(0)
    ref, st_ref = confidence_decode(den, [1], 9, 1, None, "entropy", 1.0, 1.0, None, torch.Generator().manual_seed(0),
                                    stop_at_eos=False)
    cfg = DecodeConfig(schedule="dynamic", block_size=4, entropy_threshold=50.0, candidate_window_blocks=64,
                       dlm_temperature=1.0, boundary=(8, 9), excluded=(0, 1, 3, 8, 9), stop_at_eos=False)
    got, st_big = codila_decode(den, ar, [1], 9, cfg, None, torch.Generator().manual_seed(0))
    assert max(st_big["tokens_per_step"]) > 1 and st_big["dlm_forwards"] < st_ref["dlm_forwards"] and got != ref


@invariant("static-schedule-rules")
@settings(deadline=None, max_examples=8)
@given(seeds, st.integers(1, 4), st.integers(1, 11), st.integers(1, 3))
@example(0, 2, 8, 3)  # a window of 3 blocks with distinct h(B): the argmax-h mutant is always caught
def static_schedule_rules(seed, block, length, window):
    """Static schedule: every step decodes exactly B tokens (the last grid block may be shorter), a decoded
    token never changes, the window is the first ``window`` undecoded blocks, the h(B) the trace records for
    each of its blocks is the one recomputed from a fresh DLM forward on the state before the step, the chosen
    block's h is the window's minimum (ties: the leftmost such block, the sampler's strict ``<``), and there are
    exactly ceil(L / B) steps and DLM forwards (:func:`check_static_schedule_rules`). Negative controls: a trace
    edited to overwrite a decoded token is caught by the same check; a sampler whose selection picks the largest
    h(B) fails it (tests/methods/test_codila.py)."""
    check_static_schedule_rules(seed, block, length, window)


def check_static_schedule_rules(seed: int, block: int, length: int, window: int, decode=codila_decode) -> None:
    """The body of ``static-schedule-rules`` for one case; ``decode`` is the decoder under test (signature of
    :func:`~zoo.methods.codila.sampler.codila_decode`). Raises AssertionError on a broken rule."""
    den, ar = _tiny(seed % 1000)
    excluded = (0, 1, 2, 3, 8, 9)
    cfg = DecodeConfig(schedule="static", block_size=block, candidate_window_blocks=window, boundary=(8, 9),
                       excluded=excluded, stop_at_eos=False)
    tr = DecodeTrace()
    new, stats = decode(den, ar, [1], length, cfg, None, torch.Generator().manual_seed(seed), trace=tr)
    n_blocks = -(-length // block)
    assert stats["steps"] == stats["dlm_forwards"] == n_blocks and len(new) == length
    assert len(tr.window_h) == len(tr.window) == len(tr.chosen_block) == n_blocks
    V = ar.get_input_embeddings().weight.shape[0]
    before = [3] * length
    for step, (pos, b, win, hs) in enumerate(zip(tr.decoded, tr.chosen_block, tr.window, tr.window_h)):
        assert pos == list(range(b * block, min((b + 1) * block, length)))
        open_blocks = [c for c in range(n_blocks) if 3 in before[c * block: (c + 1) * block]]
        assert win == open_blocks[:window] and b in win, (step, win, open_blocks, b)
        with torch.no_grad():
            logits = den(torch.tensor([[1] + before]))[0, 1:]
        ref = [float(block_entropy(restrict_marginals(
            logits[[p for p in range(c * block, min((c + 1) * block, length)) if before[p] == 3]], excluded, V))[-1])
            for c in win]
        assert len(hs) == len(win) and all(abs(h - r) < 1e-6 for h, r in zip(hs, ref)), (step, hs, ref)
        first_min = win[hs.index(min(hs))]
        assert b == first_min, (f"step {step}: chosen block {b} has h(B) = {hs[win.index(b)]:.6f}, not the window's "
                                f"minimum {min(hs):.6f} (block {first_min}); window {win}, h {hs}")
        before = tr.states[step]
    assert _never_changes(tr.states, 3)
    bad = [list(s) for s in tr.states]
    if len(bad) > 1:
        first = tr.decoded[0][0]
        bad[-1][first] = (bad[-1][first] + 1) % 10 if bad[-1][first] + 1 != 3 else 5
        assert not _never_changes(bad, 3)


def _never_changes(states: list[list[int]], mask: int) -> bool:
    for prev, cur in zip(states, states[1:]):
        if any(p != mask and p != c for p, c in zip(prev, cur)):
            return False
    return True


@invariant("block-nll-b1-is-token-nll")
@settings(deadline=None, max_examples=10)
@given(seeds, st.integers(1, 4))
def block_nll_b1_is_token_nll(seed, block):
    """B = 1 degeneracy of the NELBO: with the AR replaced by the DLM marginal (a model whose block law is
    the product of the marginals) the block NLL equals the token-level NLL sum_j -log pi_j(b_j); the block NLL
    of a real AR is the sum of its teacher-forced conditionals (one forward = token-by-token scoring).
    Negative control: the block NLL of the real (random) AR differs from the token NLL."""
    den, ar = _tiny(seed % 1000)
    g = torch.Generator().manual_seed(seed)
    probs = restrict_marginals(torch.randn(2, block, 10, generator=g) * 2, (0, 1, 2, 3, 8, 9), 10)
    toks = torch.multinomial(probs.reshape(-1, 10), 1, generator=g).reshape(2, block)
    token = -probs.log().gather(-1, toks.unsqueeze(-1)).squeeze(-1).sum(-1)

    class ProductOfMarginals:  # the "AR" that is the DLM marginal: p(b_j | ...) = pi_j(b_j)
        def __init__(self, pi):
            self.pi = pi

        def get_input_embeddings(self):
            return torch.nn.Embedding(10, 1)

        def __call__(self, inputs_embeds):
            n, T, _ = inputs_embeds.shape
            out = torch.full((n, T, 10), -1e30)
            B = self.pi.shape[1]
            out[:, T - B:] = self.pi.clamp_min(1e-30).log()
            return type("Out", (), {"logits": out})()

    got = block_nll(ProductOfMarginals(probs), probs, toks, (8, 9))
    assert torch.allclose(got, token.float(), atol=1e-5)
    with torch.no_grad():
        real = block_nll(ar, probs, toks, (8, 9))
        lg = block_logits(ar, probs, toks, (8, 9))
    step = -torch.log_softmax(lg, -1).gather(-1, toks.unsqueeze(-1)).squeeze(-1).sum(-1)
    assert torch.allclose(real, step)
    assert not torch.allclose(real, token.float(), atol=1e-3)


@invariant("decoded-tokens-never-change")
def decoded_tokens_never_change():
    """Every schedule (static, dynamic, verify) only ever writes masked positions: after each step the tokens
    decoded before are unchanged, the positions written that step were masked before it, their count is the
    step's ``tokens_per_step`` entry, and the final sequence has no mask (6 random drafter/AR pairs each).
    Negative control: a trace edited to overwrite an earlier token is caught by the same check."""
    for schedule in ("static", "dynamic", "verify"):
        for case in range(6):
            den, ar = _tiny(case)
            cfg = DecodeConfig(schedule=schedule, block_size=1 + case % 4, entropy_threshold=2.0 * (case % 2),
                               candidate_window_blocks=1 + case % 3, tokens_per_step=1 + case % 3,
                               boundary=(8, 9), excluded=(0, 1, 2, 3, 8, 9), stop_at_eos=False)
            tr = DecodeTrace()
            new, stats = codila_decode(den, ar, [1], 3 + case, cfg, None, torch.Generator().manual_seed(case), trace=tr)
            assert _never_changes(tr.states, 3) and 3 not in new and len(new) == 3 + case
            prev = [3] * (3 + case)
            for state, pos, k in zip(tr.states, tr.decoded, stats["tokens_per_step"]):
                assert len(pos) == k and all(prev[p] == 3 and state[p] != 3 for p in pos)
                assert [i for i in range(len(state)) if prev[i] != state[i]] == sorted(pos)
                prev = state
            if len(tr.states) > 1:
                bad = [list(s) for s in tr.states]
                p = tr.decoded[0][0]
                bad[-1][p] = 4 if bad[-1][p] != 4 else 5
                assert not _never_changes(bad, 3)
