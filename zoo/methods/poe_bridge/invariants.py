"""Named property checks of PoE-Bridge (poe-bridge.md Sec. 7), run by the conformance harness.

Three kinds: pure-math Hypothesis properties of the bridge, stage 1 and stage 2; statistical
exactness checks on the enumerable target of :mod:`.enumerable` (fixed seeds, chi-square with a
p > 1e-3 acceptance region, so a correct sampler fails with probability 1e-3 per law tested when the
seed is changed; each carries a negative control); and sampler-level properties on tiny random models
(committed prefix, window progress, KV-cache hygiene, EOS).
"""
from __future__ import annotations

import functools

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant

from zoo.common.discrete import gumbel_max

from .core import (
    acceptance_prob,
    exact_log_weights,
    normalized_weights,
    poe_logits,
    residual,
    speculative_verify,
    temperature_ladder,
)

seeds = st.integers(0, 2**31 - 1)


def _logits(seed: int, *shape: int, scale: float = 3.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


# ----------------------------------------------------------------------------- stage 1 math
@invariant("w-one-accepts-all")
@settings(deadline=None)
@given(st.integers(2, 16), st.integers(1, 8), st.integers(1, 4), seeds)
def w_one_accepts_all(vocab, window, lanes, seed):
    """With w = 1 the bridge equals the draft law q, so every ratio is exactly 1 and every draft token
    is accepted (no residual draw), for any AR logits and lane temperatures."""
    g = torch.Generator().manual_seed(seed)
    ld, la = _logits(seed, lanes, window, vocab), _logits(seed + 1, lanes, window, vocab)
    taus = torch.rand(lanes, generator=g, dtype=torch.float64) + 0.1
    q = torch.softmax(ld / taus.view(-1, 1, 1), -1)
    p = torch.softmax(poe_logits(ld, la, 1.0, taus), -1)
    drafts = gumbel_max(torch.log(q), g)
    assert torch.equal(acceptance_prob(p, q, drafts), torch.ones(lanes, window, dtype=torch.float64))
    res = speculative_verify(drafts, q, p, g)
    assert res.n_accepted.tolist() == [window] * lanes and not res.corrected.any()


@invariant("q-equals-target-accepts-all")
@settings(deadline=None)
@given(st.integers(2, 16), st.integers(1, 8), st.floats(0.0, 1.0), seeds)
def q_equals_target_accepts_all(vocab, window, w, seed):
    """If the DLM equals the AR (l_D = l_A) the bridge equals q for every w: all drafts are accepted."""
    g = torch.Generator().manual_seed(seed)
    lg = _logits(seed, 1, window, vocab)
    q = torch.softmax(lg, -1)
    p = torch.softmax(poe_logits(lg, lg.clone(), w), -1)
    drafts = gumbel_max(lg, g)
    res = speculative_verify(drafts, q, p, g)
    assert int(res.n_accepted[0]) == window


@invariant("acceptance-in-unit-interval")
@settings(deadline=None)
@given(st.integers(2, 32), st.floats(0.0, 1.0), st.floats(0.05, 3.0), seeds)
def acceptance_in_unit_interval(vocab, w, tau, seed):
    """Acceptance probabilities min(1, p/q) lie in [0, 1], and their mean under q equals
    sum_v min(q(v), p(v)) = 1 - TV(q, p) (the expected acceptance of speculative sampling)."""
    ld, la = _logits(seed, vocab), _logits(seed + 7, vocab)
    q = torch.softmax(ld / tau, -1)
    p = torch.softmax(poe_logits(ld, la, w, tau), -1)
    a = acceptance_prob(p.expand(vocab, -1), q.expand(vocab, -1), torch.arange(vocab))
    assert bool((a >= 0).all()) and bool((a <= 1).all())
    expected = float((q * a).sum())
    assert abs(expected - float(torch.minimum(p, q).sum())) < 1e-9
    assert abs(expected - (1 - 0.5 * float((p - q).abs().sum()))) < 1e-9


@invariant("residual-is-a-distribution")
@settings(deadline=None)
@given(st.integers(2, 32), st.floats(0.0, 1.0), seeds, st.booleans())
def residual_is_a_distribution(vocab, w, seed, equal):
    """norm(max(0, p - q)) is non-negative, sums to 1 and is supported on {p > q}; it falls back to p
    exactly when p == q (no mass), and then it is p. Mixing: q-accept + residual-correct = p exactly."""
    ld, la = _logits(seed, vocab), _logits(seed + 3, vocab)
    q = torch.softmax(ld, -1)
    p = q.clone() if equal else torch.softmax(poe_logits(ld, la, w), -1)
    r = residual(p, q)
    assert bool((r >= 0).all()) and abs(float(r.sum()) - 1) < 1e-9
    if equal or torch.equal(p, q):
        assert torch.allclose(r, p)
    else:
        assert bool((r[p <= q] == 0).all())
        # speculative identity: q(x) min(1,p/q) + (1 - sum min(p,q)) r(x) = p(x)
        acc = torch.minimum(p, q)
        assert torch.allclose(acc + (1 - acc.sum()) * r, p, atol=1e-12)


@invariant("poe-is-normalised-geometric-mixture")
@settings(deadline=None)
@given(st.integers(2, 32), st.floats(0.0, 1.0), st.floats(0.1, 2.0), seeds)
def poe_is_normalised_geometric_mixture(vocab, w, tau, seed):
    """softmax((w l_D + (1-w) l_A)/tau) = (mu^w p_A^(1-w))^(1/tau) / Z for mu = softmax(l_D),
    p_A = softmax(l_A): mixing raw logits is exact. w = 0 gives the AR, w = 1 the DLM."""
    ld, la = _logits(seed, vocab), _logits(seed + 5, vocab)
    mu, pa = torch.softmax(ld, -1), torch.softmax(la, -1)
    ref = (mu**w * pa ** (1 - w)) ** (1 / tau)
    ref = ref / ref.sum()
    assert torch.allclose(torch.softmax(poe_logits(ld, la, w, tau), -1), ref, atol=1e-10)
    assert torch.allclose(torch.softmax(poe_logits(ld, la, 0.0), -1), pa)
    assert torch.allclose(torch.softmax(poe_logits(ld, la, 1.0), -1), mu)


# ----------------------------------------------------------------------------- stage 2 math
@invariant("importance-weights-normalise")
@settings(deadline=None)
@given(st.integers(1, 8), st.integers(1, 6), seeds)
def importance_weights_normalise(lanes, window, seed):
    """Exact IS weights are non-negative and sum to 1; with w = 0 (bridge = AR) they are uniform;
    permuting the lanes permutes the weights (selection commutes with lane order)."""
    g = torch.Generator().manual_seed(seed)
    la = torch.log_softmax(_logits(seed, lanes, window, 5), -1)
    lp = torch.log_softmax(_logits(seed + 1, lanes, window, 5), -1)
    x = torch.randint(0, 5, (lanes, window), generator=g)
    lengths = torch.randint(1, window + 1, (lanes,), generator=g)
    at = lambda t: t.gather(-1, x.unsqueeze(-1)).squeeze(-1)  # noqa: E731
    wts = normalized_weights(exact_log_weights(at(la), at(lp), lengths))
    assert bool((wts >= 0).all()) and abs(float(wts.sum()) - 1) < 1e-9
    uni = normalized_weights(exact_log_weights(at(la), at(la), lengths))
    assert torch.allclose(uni, torch.full_like(uni, 1 / lanes))
    perm = torch.randperm(lanes, generator=g)
    wp = normalized_weights(exact_log_weights(at(la)[perm], at(lp)[perm], lengths[perm]))
    assert torch.allclose(wp, wts[perm])


@invariant("temperature-ladder-rules")
@settings(deadline=None)
@given(st.integers(1, 12), st.data(), st.floats(0.05, 1.0), st.floats(0.0, 1.0), st.booleans())
def temperature_ladder_rules(lanes, data, tau_low, spread, anneal):
    """Ladder has K entries in [tau_low, tau_high], is non-decreasing and starts at tau_low; anneal
    ends at tau_high when K > n_low - 1 lanes ramp; without anneal exactly n_low lanes are at tau_low
    (when tau_low < tau_high). The defaults give [0.2, 0.3667, 0.5333, 0.7]."""
    n_low = data.draw(st.integers(1, lanes))
    tau_high = tau_low + spread
    lad = temperature_ladder(lanes, n_low, tau_low, tau_high, anneal)
    assert len(lad) == lanes and lad[0] == tau_low
    assert all(tau_low - 1e-12 <= t <= tau_high + 1e-12 for t in lad)
    assert all(a <= b + 1e-12 for a, b in zip(lad, lad[1:]))
    if not anneal and tau_high > tau_low:
        assert sum(t == tau_low for t in lad) == n_low
    if anneal and lanes - n_low + 1 > 1:
        assert abs(lad[-1] - tau_high) < 1e-12
    d = temperature_ladder(4, 1, 0.2, 0.7, True)
    assert all(abs(a - b) < 1e-9 for a, b in zip(d, [0.2, 0.2 + 0.5 / 3, 0.2 + 1.0 / 3, 0.7]))


@invariant("gumbel-max-matches-softmax")
def gumbel_max_matches_softmax():
    """Gumbel-max at temperature tau has the frequencies of softmax(l/tau) (chi-square, 20k draws,
    p > 1e-3: false-fail rate 1e-3 for a fresh seed); at tau -> 0 it returns the argmax. Negative
    control: the frequencies of softmax(l) are rejected when tau = 0.5."""
    from scipy.stats import chisquare

    lg = _logits(11, 6, scale=1.0)
    tau = 0.5
    g = torch.Generator().manual_seed(0)
    draws = gumbel_max((lg / tau).expand(20000, -1), g)
    obs = torch.bincount(draws, minlength=6).double().numpy()
    exp = (torch.softmax(lg / tau, -1) * 20000).numpy()
    assert chisquare(obs, exp).pvalue > 1e-3
    wrong = (torch.softmax(lg, -1) * 20000).numpy()
    assert chisquare(obs, wrong).pvalue < 1e-6
    cold = gumbel_max((lg / 1e-4).expand(100, -1), g)
    assert bool((cold == lg.argmax()).all())


# ----------------------------------------------------------------------------- exactness (enumerable target)
@invariant("stage1-exact-poe-law")
def stage1_exact_poe_law():
    """On the enumerable target (V=4, n=3, Dirichlet(0.3) AR table, prefix-independent mean-field
    proposal), stage 1 run to completion reproduces the exact PoE law for w in {0, 0.3, 1}
    (chi-square p > 1e-3 on 40k sequences; false-fail rate <= 3e-3 for fresh seeds); w = 0 is standard
    speculative sampling and reproduces the AR law; measured acceptance per drafted token matches
    theory within Monte-Carlo error."""
    from .enumerable import chi2_pvalue, make_toy, stage1_samples, tv

    toy = make_toy()
    n = 40000
    for w in (0.0, 0.3, 1.0):
        s = stage1_samples(toy, w, n, torch.Generator().manual_seed(123))
        law = toy.poe_joint(w)
        emp = toy.empirical(s.seqs)
        assert chi2_pvalue(law, n, emp) > 1e-3, f"w={w}: stage 1 does not reproduce the PoE law"
        assert tv(emp, law) < 0.02
    assert tv(toy.poe_joint(0.0), toy.ar_joint()) < 1e-12
    # first-token acceptance = 1 - TV(mu_0, p_PoE,0)
    w = 0.3
    p0 = toy.poe_tables(w)[0]
    theory = float(torch.minimum(p0, toy.mu[0]).sum())
    g = torch.Generator().manual_seed(5)
    q = toy.mu[0].expand(n, 1, -1)
    d = gumbel_max(torch.log(q), g)
    res = speculative_verify(d, q, p0.expand(n, 1, -1), g)
    rate = float(res.n_accepted.double().mean())
    assert abs(rate - theory) < 4 * (theory * (1 - theory) / n) ** 0.5 + 1e-9


@invariant("stage1-negative-control-detected")
def stage1_negative_control_detected():
    """The exactness test has power: deliberately wrong stage-1 rules are rejected by the same test
    (chi-square p < 1e-6): (a) correcting from p instead of the residual, (b) accepting every draft
    (output = mean-field proposal), (c) using p/q without the min (accept probability clipped by the
    uniform only: same as (a)-style bias) replaced by the ratio q/p."""
    from .enumerable import chi2_pvalue, make_toy, stage1_samples

    toy = make_toy()
    n, w = 40000, 0.3
    law = toy.poe_joint(w)
    wrong_rules = {
        "residual->p": dict(residual_fn=lambda p, q: p),
        "accept-all": dict(acceptance=lambda p, q, x: torch.ones(x.shape, dtype=p.dtype)),
        "ratio q/p": dict(acceptance=lambda p, q, x: acceptance_prob(q, p, x)),
    }
    for name, kw in wrong_rules.items():
        s = stage1_samples(toy, w, n, torch.Generator().manual_seed(123), **kw)
        pv = chi2_pvalue(law, n, toy.empirical(s.seqs))
        assert pv < 1e-6, f"negative control {name!r} was not detected (p={pv:.3g})"


@invariant("stage2-tv-decreases-with-lanes")
def stage2_tv_decreases_with_lanes():
    """Stage 2 with the paper's exact weights p_A/p_PoE moves the law toward the AR target: TV(selected,
    AR) at K=1 equals TV(PoE, AR) (within MC error), decreases from K=1 to 2 to 8, and at K=8 is
    within 0.03 of the AR law (40k draws; MC floor ~0.012). Negative control: uniform lane choice
    (no importance weights) stays at TV(PoE, AR) for K=8."""
    from .enumerable import make_toy, stage1_samples, stage2_samples, tv

    toy = make_toy()
    n, w = 40000, 0.3
    ar = toy.ar_joint()
    base = tv(toy.poe_joint(w), ar)
    tvs = {}
    for K in (1, 2, 8):
        s = stage2_samples(toy, w, K, n, torch.Generator().manual_seed(7))
        tvs[K] = tv(toy.empirical(s), ar)
    assert abs(tvs[1] - base) < 0.02, (tvs, base)
    assert tvs[1] > tvs[2] + 0.02 > tvs[8] + 0.02, tvs
    assert tvs[8] < 0.03, tvs
    # negative control: uniform choice among K=8 lanes is just a PoE sample
    s = stage1_samples(toy, w, n, torch.Generator().manual_seed(8)).seqs
    assert abs(tv(toy.empirical(s), ar) - base) < 0.02 and tv(toy.empirical(s), ar) > 0.05


@invariant("sampler-exact-law-any-window")
def sampler_exact_law_any_window():
    """The real sampler loop (PoEBridgeSampler.generate_row: DLM re-run after each rejection, elastic
    windows, AR cache crop) on table models of the enumerable target, K = 1, tau = 1, top_p = 1, has the
    exact path-dependent law computed by dynamic programming over chunk starts
    (:func:`.enumerable.sampler_exact_law`), for verify windows V = 1 and V = n (elastic-window
    invariance), and reproduces the AR law at w = 0. Chi-square p > 1e-3 on 1500 sequences per case
    (false-fail rate <= 3e-3 for fresh seeds). Negative control: the same loop with the residual
    replaced by p (a classic speculative-sampling bug, TV ~0.09 from the right law) is rejected with
    p < 1e-6 on 3000 sequences (seeds 3..12 all gave p < 1e-13)."""
    import zoo.methods.poe_bridge.sampler as smod

    from .enumerable import chi2_pvalue, make_toy, sampler_exact_law, sampler_samples

    toy = make_toy()
    n = 1500
    law = sampler_exact_law(toy, 0.3)
    assert abs(float(law.sum()) - 1) < 1e-9
    for V in (1, toy.length):
        emp = toy.empirical(sampler_samples(toy, 0.3, n, V, seed=V))
        assert chi2_pvalue(law, n, emp) > 1e-3, f"V={V}: sampler law differs from the exact DP law"
    emp = toy.empirical(sampler_samples(toy, 0.0, 1000, 2, seed=9))
    assert chi2_pvalue(toy.ar_joint(), 1000, emp) > 1e-3, "w=0 must reproduce the AR law"
    orig = smod.speculative_verify
    try:
        smod.speculative_verify = functools.partial(orig, residual_fn=lambda p, q: p)
        emp = toy.empirical(sampler_samples(toy, 0.3, 3000, toy.length, seed=3))
    finally:
        smod.speculative_verify = orig
    assert chi2_pvalue(law, 3000, emp) < 1e-6, "negative control (residual -> p) not detected"


# ----------------------------------------------------------------------------- the sampler on tiny models
def _tiny_sampler(**params):
    from .sampler import PoEBridgeSampler

    ar, dlm = _tiny_models()
    return PoEBridgeSampler(models={"target": ar, "proposal": dlm}, params=PoEBridgeSampler.Params(**params))


@functools.lru_cache(maxsize=1)
def _tiny_models():
    """Random tiny AR (Qwen2) and DLM over the toy tokenizer, weights scaled up so that they disagree."""
    from .toy import build_ar, build_dlm

    ar = build_ar(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    dlm = build_dlm(d_model=32, n_layers=1, n_heads=2, d_ff=64)
    with torch.no_grad():  # sharpen the random models so that rejections happen
        for m in (ar, dlm):
            for prm in m.parameters():
                prm.mul_(4.0 if prm.dim() > 1 else 1.0)
    return ar, dlm


@invariant("committed-prefix-never-changes")
@settings(deadline=None, max_examples=10)
@given(seeds, st.integers(1, 4), st.integers(1, 6), st.floats(0.0, 1.0))
def committed_prefix_never_changes(seed, lanes, window, w):
    """Across windows the committed sequence (prompt included) is only appended to; every window
    commits between 1 and V tokens; the loop ends within max_new_tokens windows; the AR cache holds
    exactly committed - 1 positions after every window."""
    smp = _tiny_sampler(n_lanes=lanes, verify_window=window, max_lookahead=12, mixture_weight=w, max_new_tokens=12)
    trace = []
    smp.trace_hook = lambda x, cache, stats: trace.append((x, int(cache.get_seq_length())))
    prompt = smp.tokenizer().encode("12+34")
    out = smp(seed=seed, input_ids=[prompt])
    prev = prompt
    for x, clen in trace:
        assert x[: len(prev)] == prev and 1 <= len(x) - len(prev) <= window
        assert clen == len(x) - 1
        prev = x
    assert len(trace) <= 12 and out.token_ids[0] == prev[len(prompt):][: len(out.token_ids[0])]


@invariant("kv-cache-crop-equals-fresh-forward")
@settings(deadline=None, max_examples=10)
@given(seeds, st.integers(2, 4), st.integers(2, 6))
def kv_cache_crop_equals_fresh_forward(seed, lanes, window):
    """After a window (lanes repeated, one lane selected, cache cropped to committed - 1) the AR's
    next-token logits from the cache equal those of a fresh forward on the committed sequence: no
    cached position holds KV computed from a rejected draft."""
    from zoo.common.ar_cache import ar_forward, new_cache

    smp = _tiny_sampler(n_lanes=lanes, verify_window=window, max_lookahead=12, mixture_weight=0.3, max_new_tokens=12)
    checks = []

    def hook(x, cache, stats):
        import copy

        c2 = copy.deepcopy(cache)
        last = torch.tensor([[x[-1]]])
        cached = ar_forward(smp.target, last, c2)[0, -1]
        fresh = ar_forward(smp.target, torch.tensor([x]), new_cache(smp.target))[0, -1]
        checks.append(float((cached - fresh).abs().max()))

    smp.trace_hook = hook
    smp(seed=seed, input_ids=[smp.tokenizer().encode("7+8")])
    assert checks and max(checks) < 1e-4, checks


@invariant("sampler-w-one-accepts-all")
@settings(deadline=None, max_examples=5)
@given(seeds, st.integers(1, 4))
def sampler_w_one_accepts_all(seed, lanes):
    """End to end with w = 1 and top_p = 1 every draft is accepted: no corrections, each window emits
    V tokens (or up to EOS / the end), and the DLM runs once per lookahead M."""
    smp = _tiny_sampler(n_lanes=lanes, verify_window=4, max_lookahead=8, mixture_weight=1.0, top_p=1.0, max_new_tokens=16)
    out = smp(seed=seed, input_ids=[smp.tokenizer().encode("5+5")])
    stt = out.stats[0]
    assert stt["corrections"] == 0
    assert stt["accepted_tokens"] == sum(stt["emitted_per_window"])
    if stt["new_tokens"] == 16 and smp.tokenizer().eos_token_id not in out.token_ids[0]:
        assert stt["dlm_forwards"] == 2 and stt["windows"] == 4


@invariant("eos-stops-generation")
@settings(deadline=None, max_examples=10)
@given(seeds)
def eos_stops_generation(seed):
    """Generation stops at the first committed EOS: the output ends with EOS or has max_new_tokens
    tokens, and contains no token after an EOS."""
    smp = _tiny_sampler(n_lanes=2, verify_window=4, max_lookahead=8, max_new_tokens=12)
    eos = smp.tokenizer().eos_token_id
    out = smp(seed=seed, input_ids=[smp.tokenizer().encode("1+1")]).token_ids[0]
    if eos in out:
        assert out.index(eos) == len(out) - 1
    else:
        assert len(out) == 12


# ----------------------------------------------------------------------------- baselines
@invariant("confidence-decoding-fills-all-masks")
@settings(deadline=None, max_examples=10)
@given(seeds, st.integers(1, 6), st.sampled_from(["low_confidence", "topk_margin", "entropy"]), st.booleans())
def confidence_decoding_fills_all_masks(seed, per_step, alg, blocks):
    """Standard DLM decoding leaves no mask behind and spends ceil(n / tokens_per_step) denoiser
    forwards per block when it runs to the end (no early EOS stop); committed tokens are never
    revised (the output of k tokens/step with one step equals the one-shot argmax)."""
    from zoo.common.masked_dlm import MaskedDenoiser, confidence_decode

    _, dlm = _tiny_models()
    den = MaskedDenoiser.wrap(dlm)
    prompt = dlm.zoo_tokenizer.encode("3+4")
    n = 12
    block = 4 if blocks else None
    new, stt = confidence_decode(den, prompt, n, per_step, block, alg, eos_id=None,
                                 generator=torch.Generator().manual_seed(seed), stop_at_eos=False)
    assert len(new) == n and den.mask_token_id not in new
    per_block = [4, 4, 4] if blocks else [n]
    assert stt["dlm_forwards"] == sum(-(-b // per_step) for b in per_block)
    one, _ = confidence_decode(den, prompt, n, n, None, alg, eos_id=None, stop_at_eos=False)
    lg = den(torch.tensor([prompt + [den.mask_token_id] * n]))[0, len(prompt):]
    lg[:, den.mask_token_id] = float("-inf")
    assert one == lg.argmax(-1).tolist()


@invariant("dream-shift-by-one")
def dream_shift_by_one():
    """Dream convention: with shift_logits the prediction for position i is the model's output i-1 and
    position 0 repeats output 0; without it outputs are used as they are."""
    from zoo.common.masked_dlm import MaskedDenoiser

    class Echo(torch.nn.Module):
        def forward(self, ids):
            return torch.nn.functional.one_hot(ids, 8).float()

    ids = torch.tensor([[1, 2, 3, 4]])
    shifted = MaskedDenoiser(Echo(), 7, shift_logits=True)(ids).argmax(-1)
    plain = MaskedDenoiser(Echo(), 7, shift_logits=False)(ids).argmax(-1)
    assert shifted.tolist() == [[1, 1, 2, 3]] and plain.tolist() == [[1, 2, 3, 4]]

    class Cfg:
        model_type = "Dream"
        mask_token_id = 151666

    m = Echo()
    m.config = Cfg()
    d = MaskedDenoiser.wrap(m)
    assert d.shift_logits and d.mask_token_id == 151666


@invariant("ar-greedy-cache-matches-recompute")
@settings(deadline=None, max_examples=5)
@given(st.sampled_from(["1+2", "99+1", "500+500"]))
def ar_greedy_cache_matches_recompute(text):
    """Greedy AR decoding with the KV cache emits exactly the tokens of greedy decoding that recomputes
    the whole prefix at every step (no cache)."""
    from .baselines import ARDecoding

    ar, _ = _tiny_models()
    smp = ARDecoding(models={"target": ar}, params=ARDecoding.Params(max_new_tokens=10))
    prompt = ar.zoo_tokenizer.encode(text)
    out = smp(input_ids=[prompt]).token_ids[0]
    ids = list(prompt)
    ref = []
    with torch.no_grad():
        for _ in range(10):
            t = int(ar(input_ids=torch.tensor([ids])).logits[0, -1].argmax())
            ref.append(t)
            ids.append(t)
            if t == ar.zoo_tokenizer.eos_token_id:
                break
    assert out == ref
