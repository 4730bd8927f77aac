"""Named property checks for ``deep-forcing`` (run by the conformance harness under Hypothesis).

Each invariant calls a ``check_*`` function that takes the implementation under test as an argument, so
``tests/methods/test_deep_forcing.py`` feeds it a plausible wrong implementation (the negative control) and
sees it fail. All checks are exact: float64 identities at 1e-12, brute-force references, bitwise equalities.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from registry.contract import invariant

from .policy import CachePolicy, FifoReferenceCache, FrameKVCache, Rope3D, pc_scores, select_top_c, select_top_c_bruteforce

_FAST = settings(max_examples=12, deadline=None)
_SEEDS = st.integers(0, 2**31 - 1)
HEAD_DIM = 12  # 6 complex channels: 2 temporal, 2 height, 2 width


# ----------------------------------------------------------------------------- RoPE re-rotation
def check_rerotation(rope: Rope3D, rotate: Callable[[torch.Tensor, Any], torch.Tensor], seed: int) -> None:
    """``rotate(RoPE(k, t), D) == RoPE(k, t + D)`` (1e-12, float64); spatial channels bitwise unchanged;
    ``rot(D1) o rot(D2) == rot(D1 + D2)`` and ``rot(D) o rot(-D) == id``; the logit of a query at frame ``f``
    against a re-rotated key equals the logit against the key placed at the new frame."""
    g = torch.Generator().manual_seed(seed)
    L, H = 7, 3
    k = torch.randn(2, L, H, rope.head_dim, generator=g, dtype=torch.float64)
    q = torch.randn(2, 1, H, rope.head_dim, generator=g, dtype=torch.float64)
    t = torch.randint(0, 40, (L,), generator=g)
    hh, ww = torch.randint(0, 5, (L,), generator=g), torch.randint(0, 5, (L,), generator=g)
    d1, d2 = int(torch.randint(-30, 30, (1,), generator=g)), int(torch.randint(-30, 30, (1,), generator=g))
    kr = rope.apply(k, t, hh, ww)
    moved = rotate(kr, d1)
    assert (moved - rope.apply(k, t + d1, hh, ww)).abs().max() <= 1e-12, "rotate(RoPE(k, t), D) != RoPE(k, t + D)"
    n_t = rope.n_t
    pairs = lambda x: x.reshape(*x.shape[:-1], -1, 2)  # noqa: E731
    assert torch.equal(pairs(moved)[..., n_t:, :], pairs(kr)[..., n_t:, :]), "spatial channels changed"
    assert (pairs(moved).norm(dim=-1) - pairs(kr).norm(dim=-1)).abs().max() <= 1e-12, "rotation not unitary"
    assert (rotate(rotate(kr, d1), d2) - rotate(kr, d1 + d2)).abs().max() <= 1e-12, "rot(D1) o rot(D2) != rot(D1 + D2)"
    assert (rotate(rotate(kr, d1), -d1) - kr).abs().max() <= 1e-12, "rot(D) o rot(-D) != id"
    f = int(torch.randint(0, 80, (1,), generator=g))
    qr = rope.apply(q, torch.tensor([f]), torch.tensor([1]), torch.tensor([2]))
    logit = torch.einsum("bqhd,blhd->bhl", qr, moved)
    direct = torch.einsum("bqhd,blhd->bhl", qr, rope.apply(k, t + d1, hh, ww))
    assert (logit - direct).abs().max() <= 1e-11, "re-aligned logits differ from logits at the new frame"
    # RoPE is relative: the logit depends on (query frame - key frame) only
    qs = rope.apply(q, torch.tensor([f + d1]), torch.tensor([1]), torch.tensor([2]))
    rel = torch.einsum("bqhd,blhd->bhl", qs, moved)
    assert (rel - torch.einsum("bqhd,blhd->bhl", qr, kr)).abs().max() <= 1e-11, "logit is not a function of the relative offset"


@invariant("rope-temporal-rerotation-equals-shifted-positions")
@_FAST
@given(_SEEDS, st.sampled_from([6, 12, 16, 128]))
def rerotation(seed: int, head_dim: int) -> None:
    """Deep Sink's re-alignment (Eq. 6): rotating cached post-RoPE keys' temporal channels by D equals RoPE at
    frame + D, leaves spatial channels bitwise equal, and composes as a group."""
    rope = Rope3D(head_dim)
    check_rerotation(rope, rope.rotate_time, seed)


# ----------------------------------------------------------------------------- PC selection
def check_pc_selection(select: Callable[..., torch.Tensor], seed: int, fusion: str, ties: bool) -> None:
    """:func:`select_top_c` on :func:`pc_scores` picks exactly the brute-force set (Python loops, sort by
    ``(-score, position)``), never a non-candidate or ineligible token, ``min(c, #eligible)`` per row."""
    g = torch.Generator().manual_seed(seed)
    B, L, H, D, Q = 3, 17, 2, 4, 5
    keys = torch.randn(B, L, H, D, generator=g, dtype=torch.float64)
    queries = torch.randn(B, Q, H, D, generator=g, dtype=torch.float64)
    if ties:  # small integers (exact arithmetic in any summation order) and duplicated keys: the tie-break decides
        keys = torch.randint(-2, 3, (B, L, H, D), generator=g).double()
        keys[:, 9:] = keys[:, 1:9]
        queries = torch.randint(-2, 3, (B, Q, H, D), generator=g).double()
    candidate = torch.rand(B, L, generator=g) < 0.8
    candidate[:, :2] = False  # sinks
    eligible = torch.rand(B, L, generator=g) < 0.7
    c = int(torch.randint(1, 9, (1,), generator=g))
    got = select(pc_scores(keys, queries, fusion), candidate, eligible, c)
    ref = select_top_c_bruteforce(keys, queries, candidate, eligible, c, fusion)
    for b in range(B):
        sel = torch.nonzero(got[b]).flatten().tolist()
        assert sel == ref[b], f"row {b}: selected {sel}, brute force {ref[b]}"
        assert len(sel) == min(c, int((candidate[b] & eligible[b]).sum()))


@invariant("pc-top-c-equals-bruteforce")
@_FAST
@given(_SEEDS, st.sampled_from(["sum", "max"]), st.booleans())
def pc_bruteforce(seed: int, fusion: str, ties: bool) -> None:
    """Participative Compression's top-C (Eq. 7-8, sum or max fusion, re-use eligibility) equals a brute-force
    argsort with the earlier-position tie-break."""
    check_pc_selection(select_top_c, seed, fusion, ties)


# ----------------------------------------------------------------------------- the cache under random rollouts
@st.composite
def policies(draw: Any, pc: bool | None = None) -> CachePolicy:
    """Valid random policies, built constructively (PC on: ``S + R <= N <= M``, ``R >= chunk``, ``C <= M - N + 1``)."""
    F = draw(st.integers(1, 3))
    chunk = draw(st.integers(1, 3))
    M = draw(st.integers(chunk + 1, 12))
    on = draw(st.booleans()) if pc is None else pc
    common = dict(frame_tokens=F, chunk_frames=chunk, window_frames=M, rope_realign=draw(st.booleans()), pc_enabled=on)
    if not on:
        return CachePolicy(sink_frames=draw(st.integers(0, M - chunk)), **common)
    R = draw(st.integers(chunk, M))
    S = draw(st.integers(0, min(M - R, M - 1)))
    N = draw(st.integers(S + R, M))
    assume(N - S - R <= M - N + 1)
    return CachePolicy(sink_frames=S, recent_frames=R, budget_frames=N, fusion=draw(st.sampled_from(["sum", "max"])),
                       topc_max_reuse=draw(st.sampled_from([None, 1, 2, 3])), **common)


def drive(cache: Any, cfg: CachePolicy, rope: Rope3D, chunks: int, seed: int, calls: int = 2, batch: int = 2,
          observe: Callable[..., None] | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``chunks`` chunks of random float64 K/V/Q, ``calls`` calls each (the last one is the 'clean' write);
    ``observe(cache, written, start, call)`` after every call. Returns what each call returned."""
    g = torch.Generator().manual_seed(seed)
    F, n, H = cfg.frame_tokens, cfg.chunk_frames, 2
    written: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    outs = []
    for j in range(chunks):
        s = j * n
        t = torch.arange(n * F) // F + s
        hw = torch.arange(n * F) % F
        for call in range(calls):
            raw = torch.randn(3, batch, n * F, H, rope.head_dim, generator=g, dtype=torch.float64)
            k, q = rope.apply(raw[0], t, hw, hw), rope.apply(raw[2], t, hw, hw)
            outs.append(cache.update(k, raw[1], q, s))
            for i in range(n):
                written[s + i] = (k[:, i * F:(i + 1) * F], raw[1][:, i * F:(i + 1) * F])
            if observe is not None:
                observe(cache, written, s, call)
    return outs


def check_cache_invariants(make: Callable[[CachePolicy, Rope3D], Any], cfg: CachePolicy, seed: int, chunks: int) -> None:
    """After every call: at most ``M`` frames' tokens (the full cache: everything); right after a compression exactly
    ``N`` frames' tokens; all ``S`` sink frames present with values bitwise equal to what was written, keys equal up to
    a temporal rotation (spatial channels bitwise, pair norms 1e-12); the newest ``R`` (PC) / all in-window frames
    present; original frames non-decreasing in cache order; with re-alignment the sinks' effective frames are
    contiguous and end at the tail start, and in DS-only mode every ``query frame - key effective frame < M``."""
    rope = Rope3D(HEAD_DIM)
    cache = make(cfg, rope)
    F, S, M = cfg.frame_tokens, cfg.sink_frames, cfg.window_frames

    def observe(c: Any, written: dict, s: int, call: int) -> None:
        last = s + cfg.chunk_frames - 1
        if M is not None:
            assert c.tokens <= M * F, f"{c.tokens} tokens > M*F = {M * F}"
        else:
            assert c.tokens == (last + 1) * F, "the full cache dropped tokens"
        if c.events[-1].kind == "compress":
            assert c.tokens == cfg.budget_frames * F, f"after compression {c.tokens} tokens != N*F = {cfg.budget_frames * F}"
        fr = c.frame
        assert bool((fr[:, 1:] >= fr[:, :-1]).all()), "cache order is not the original temporal order"
        for f in range(min(S, last + 1)):
            pos = (fr[0] == f).nonzero().flatten()
            assert pos.numel() == F, f"sink frame {f} not fully present"
            k0, v0 = written[f]
            assert torch.equal(c.v[:, pos], v0), f"sink frame {f} values changed"
            keff, _ = c.read()
            pk, p0 = keff[:, pos].reshape(*k0.shape[:-1], -1, 2), k0.reshape(*k0.shape[:-1], -1, 2)
            assert torch.equal(pk[..., rope.n_t:, :], p0[..., rope.n_t:, :]), f"sink frame {f} spatial key channels changed"
            assert (pk.norm(dim=-1) - p0.norm(dim=-1)).abs().max() <= 1e-12, f"sink frame {f} key not a rotation of the original"
        must = cfg.recent_frames if cfg.pc_enabled else (M - S if M is not None else last + 1)
        for f in range(max(0, last - must + 1), last + 1):
            assert int((fr[0] == f).sum()) == F, f"recent frame {f} missing"
        if cfg.rope_realign and M is not None and S and last + 1 > S:
            sink = fr < S
            tail = ~sink & ~c.top
            first = int(fr[0][tail[0]].min())
            n_top = int(c.top[0].sum())
            start = first - (n_top + F - 1) // F
            assert torch.equal(c.eff[sink].reshape(fr.shape[0], -1), (fr[sink] + start - S).reshape(fr.shape[0], -1)), "sinks not contiguous before the tail"
            if not cfg.pc_enabled:
                assert int((last - c.eff).max()) < M, f"relative offset {int((last - c.eff).max())} >= M = {M} after re-alignment"

    drive(cache, cfg, rope, chunks, seed, observe=observe)


@invariant("cache-within-budget-sinks-kept-order-preserved")
@_FAST
@given(policies(), _SEEDS, st.integers(1, 14))
def cache_invariants(cfg: CachePolicy, seed: int, chunks: int) -> None:
    """Capacity (<= M, exactly N after PC), sinks always kept (values bitwise, keys rotated only), recent frames
    kept, original order, contiguous re-aligned sinks and the DS relative-offset bound, on random policies."""
    check_cache_invariants(FrameKVCache, cfg, seed, chunks)


# ----------------------------------------------------------------------------- degeneracy: FIFO
def check_fifo_degeneracy(make: Callable[[CachePolicy, Rope3D], Any], cfg: CachePolicy, seed: int, chunks: int) -> None:
    """With ``S = 0`` and PC off the policy's returned K/V equal Self-Forcing's rolling window
    (:class:`FifoReferenceCache`) bit for bit, call by call."""
    rope = Rope3D(HEAD_DIM)
    a = drive(make(cfg, rope), cfg, rope, chunks, seed)
    b = drive(FifoReferenceCache(cfg.window_frames, cfg.frame_tokens), cfg, rope, chunks, seed)
    for i, ((ka, va), (kb, vb)) in enumerate(zip(a, b)):
        assert torch.equal(ka, kb) and torch.equal(va, vb), f"call {i}: differs from the FIFO rolling cache"


@invariant("no-sinks-no-pc-equals-fifo-bit-for-bit")
@_FAST
@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 9), st.booleans(), _SEEDS, st.integers(1, 12))
def fifo_degeneracy(F: int, chunk: int, extra: int, realign: bool, seed: int, chunks: int) -> None:
    """S = 0 and PC off (re-alignment on or off) is Self-Forcing's FIFO window, bitwise."""
    cfg = CachePolicy(frame_tokens=F, chunk_frames=chunk, window_frames=chunk + extra, sink_frames=0, pc_enabled=False, rope_realign=realign)
    check_fifo_degeneracy(FrameKVCache, cfg, seed, chunks)


# ----------------------------------------------------------------------------- trigger rule and re-use cap
def check_trigger_and_reuse(make: Callable[[CachePolicy, Rope3D], Any], cfg: CachePolicy, seed: int, chunks: int, calls: int) -> None:
    """Compression/eviction happen only on the first call of a new chunk and only when appending would exceed
    ``M``; repeated calls for the chunk (later steps, the clean re-run) keep size, frames, selection counts and
    effective frames unchanged; no token is selected more than ``topc_max_reuse`` times and a token at the cap is
    never selected again."""
    rope = Rope3D(HEAD_DIM)
    cache = make(cfg, rope)
    F, M = cfg.frame_tokens, cfg.window_frames
    state: dict[str, Any] = {}

    def observe(c: Any, written: dict, s: int, call: int) -> None:
        ev = c.events[-1]
        if call > 0:
            assert ev.kind == "overwrite", f"call {call} of chunk at {s} did {ev.kind}"
            for name in ("frame", "uses", "eff", "top", "tid"):
                assert torch.equal(getattr(c, name), state[name]), f"repeated call changed {name}"
        else:
            before = state.get("tokens", 0)
            overflow = M is not None and before + cfg.chunk_frames * F > M * F
            want = ("compress" if cfg.pc_enabled else "evict") if overflow else "append"
            assert ev.kind == want, f"first call at frame {s}: {ev.kind}, expected {want}"
            cap = cfg.topc_max_reuse
            if cfg.pc_enabled and cap is not None:
                assert int(c.uses.max()) <= cap, "a token exceeded the re-use cap"
                if ev.kind == "compress":
                    for b in range(c.frame.shape[0]):
                        capped = {int(t) for t, u in zip(state["tid"][b], state["uses"][b]) if int(u) >= cap}
                        chosen = {int(t) for t in c.tid[b][c.top[b]]}
                        assert not capped & chosen, f"row {b}: tokens {sorted(capped & chosen)} re-selected at the cap"
        state.update({name: getattr(c, name).clone() for name in ("frame", "uses", "eff", "top", "tid")}, tokens=c.tokens)

    drive(cache, cfg, rope, chunks, seed, calls=calls, observe=observe)


@invariant("pc-trigger-first-call-only-and-reuse-cap")
@_FAST
@given(policies(pc=True), _SEEDS, st.integers(1, 14), st.integers(1, 4))
def trigger_and_reuse(cfg: CachePolicy, seed: int, chunks: int, calls: int) -> None:
    """PC fires only on the first call of a new chunk when the window would overflow; later calls overwrite in
    place; the re-use cap holds."""
    check_trigger_and_reuse(FrameKVCache, cfg, seed, chunks, calls)


# ----------------------------------------------------------------------------- the toy model: cache == recomputation
def check_cached_equals_recompute(model: Any, make_caches: Callable[[Any], list], seed: int, frames: int) -> None:
    """Chunk-by-chunk generation through the cache (query call, then clean context) gives the same chunk means as
    the parallel causal recomputation ``model(clips)`` (5e-5), while nothing is evicted."""
    from .toy import make_clips, teacher_forced_means

    clips, _, _ = make_clips(2, frames, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        ref = model(clips)
    got = teacher_forced_means(model, make_caches(model), clips)
    err = float((got - ref).abs().max())
    assert err <= 5e-5, f"cached chunked generation differs from causal recomputation by {err:.3g}"


@invariant("chunked-cached-generation-equals-causal-recomputation")
@settings(max_examples=4, deadline=None)
@given(_SEEDS, st.sampled_from([6, 12, 21]), st.sampled_from(["full-cache", "fifo", "deep-sink", "deep-sink-pc"]))
def cached_equals_recompute(ctx: Any, seed: int, frames: int, name: str) -> None:
    """On the trained toy: within the 21-frame window every policy's cache reproduces the parallel teacher-forced
    pass (the training mask) chunk by chunk."""
    from .policy import policy

    check_cached_equals_recompute(ctx.models("toy")["video"], lambda m: m.new_caches(policy(name)), seed, frames)



# ----------------------------------------------------------------------------- transformers: the Deep Sink Cache layer
def tiny_qwen2(layers: int = 1, seed: int = 0) -> Any:
    """A random tiny Qwen2 (vocab 64, width 32, 4 heads, 2 KV heads), eval mode."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2)
    return Qwen2ForCausalLM(cfg).eval()


def check_llm_cache_equals_recompute(make_cache: Callable[..., Any], sink: int, window: int, length: int, realign: bool, seed: int) -> None:
    """One-layer Qwen2, token-by-token decoding through the cache: each step's logits equal a cache-free forward over
    the tokens the step attended, at the positions the layer claims (sinks re-aligned before the tail), 1e-5."""
    from .llm import DeepSinkLayer

    model = tiny_qwen2(1, seed)
    ids = torch.randint(0, 64, (1, length), generator=torch.Generator().manual_seed(seed))
    cache = make_cache(model, sink, window, realign)
    with torch.no_grad():
        model(ids[:, :2], cache=cache, use_cache=True)
        for t in range(2, length):
            layer = cache.layers[0]
            assert isinstance(layer, DeepSinkLayer)
            attended = torch.cat([layer.positions, torch.tensor([t])])
            assert attended.numel() <= window, f"step {t}: {attended.numel()} keys attended > window {window}"
            assert bool((attended[:min(sink, t)] == torch.arange(min(sink, t))).all()), "a sink token was evicted"
            out = model(ids[:, t:t + 1], cache=cache, use_cache=True).logits[:, -1]
            eff = DeepSinkLayer.effective_positions(layer, attended)
            if realign and sink and attended.numel() > sink and int(attended[sink]) > sink:
                assert int(eff[sink - 1]) == int(attended[sink]) - 1, "sinks do not end right before the tail"
            ref = model(ids[:, attended], position_ids=eff[None], attention_mask=torch.ones(1, attended.numel(), dtype=torch.long),
                        use_cache=False).logits[:, -1]
            err = float((out - ref).abs().max())
            assert err <= 1e-5, f"step {t}: cached logits differ from recomputation at the effective positions by {err:.3g}"


@invariant("llm-deep-sink-cache-equals-recompute-at-realigned-positions")
@settings(max_examples=3, deadline=None)
@given(st.integers(0, 3), st.integers(5, 9), st.booleans(), _SEEDS)
def llm_cache_recompute(sink: int, window: int, realign: bool, seed: int) -> None:
    """transformers: decoding a tiny Qwen2 through the Deep Sink cache layer equals recomputing over the kept tokens
    with the sinks at their re-aligned positions (the post-RoPE key re-rotation identity end to end); at most
    ``window`` keys per step; sinks never evicted."""
    from .llm import deep_sink_cache

    check_llm_cache_equals_recompute(deep_sink_cache, sink, window, 14, realign, seed)


# ----------------------------------------------------------------------------- diffusers: Wan processors with the frame-level cache
def check_wan_cache_equals_recompute(install: Callable[..., Any], seed: int, chunks: int, policy_name: str) -> None:
    """A tiny random ``WanTransformer3DModel`` with the processors installed: for each chunk, the noisy call's output
    (timestep ``t_j``, after the clean context of the previous chunks was written at ``t = 0``) equals the stock
    processors over ``[clean chunks < j | noisy chunk j]`` with a block-causal mask and per-frame timesteps (1e-4),
    while nothing is evicted."""
    from .policy import POLICIES
    from .wan import tiny_wan, wan_causal_reference, wan_chunk

    model = tiny_wan(seed % 1000)
    kw = {k: v for k, v in POLICIES[policy_name].items()}
    install(model, **kw)
    g = torch.Generator().manual_seed(seed)
    B, C, H, W, n = 2, 4, 4, 4, 3
    clean = torch.randn(B, C, n * chunks, H, W, generator=g)
    noisy = torch.randn(B, C, n * chunks, H, W, generator=g)
    t = torch.randint(1, 1000, (chunks,), generator=g)
    text = torch.randn(B, 5, 16, generator=g)
    with torch.no_grad():
        for j in range(chunks):
            s = n * j
            out = wan_chunk(model, noisy[:, :, s:s + n], t[j].repeat(B), text, s)
            wan_chunk(model, clean[:, :, s:s + n], torch.zeros(B, dtype=torch.long), text, s)
            seq = torch.cat([clean[:, :, :s], noisy[:, :, s:s + n]], 2)
            ts = torch.cat([torch.zeros(B, s, dtype=torch.long), t[j].repeat(B, n)], 1)
            ref = wan_causal_reference(model, seq, ts, text, n)[:, :, s:s + n]
            err = float((out - ref).abs().max())
            assert err <= 1e-4, f"chunk {j}: cached Wan output differs from causal recomputation by {err:.3g}"


@invariant("wan-chunked-cached-generation-equals-causal-recomputation")
@settings(max_examples=2, deadline=None)
@given(_SEEDS, st.integers(1, 4), st.sampled_from(["deep-sink-pc", "deep-sink", "fifo"]))
def wan_cache_recompute(seed: int, chunks: int, name: str) -> None:
    """diffusers: the Deep Forcing attention processors on a tiny random WanTransformer3DModel (absolute-frame 3-D
    RoPE, frame-level KV cache, clean re-run overwriting in place) reproduce block-causal recomputation with
    diffusers' own processors, chunk by chunk, within the window."""
    from .wan import install_deep_forcing

    check_wan_cache_equals_recompute(install_deep_forcing, seed, chunks, name)
