"""An enumerable target on which PoE-Bridge's laws are computable exactly (poe-bridge.md Sec. 6A).

* vocabulary ``V`` (4), block length ``n`` (3): all ``V**n`` sequences can be enumerated;
* target: an AR table ``p_A(x_i | x_<i)`` with rows drawn from Dirichlet(alpha=0.3) (peaked, context-dependent);
* proposal: prefix-independent mean-field marginals ``mu_i = (marginal_i of p_A)^(1/1.5)``, renormalised;
* with ``mu`` prefix-independent the bridge is the fixed AR law ``prod_i mu_i^w p_A^(1-w) / Z_i``.

``stage1_samples`` runs the real stage-1 code (:func:`~zoo.methods.poe_bridge.core.speculative_verify`)
round after round (draft the remaining positions, accept/correct, repeat) on ``N`` independent chains at
once; ``stage2_samples`` draws ``K`` stage-1 sequences per output and picks one with the paper's weights
(:func:`~zoo.methods.poe_bridge.core.exact_log_weights`) or the repository's argmax rule.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .core import categorical, exact_log_weights, normalized_weights, poe_logits, repo_energy, speculative_verify


@dataclass
class EnumerableToy:
    vocab: int
    length: int
    ar_tables: list[torch.Tensor]  # ar_tables[i]: shape [V]*i + [V], rows p_A(. | x_<i)
    mu: torch.Tensor  # [n, V] prefix-independent proposal marginals

    # -------------------------------------------------------------- exact laws
    def ar_joint(self) -> torch.Tensor:
        """Exact AR law over all sequences, shape ``[V]*n`` (float64)."""
        joint = self.ar_tables[0].clone()
        for i in range(1, self.length):
            joint = joint.unsqueeze(-1) * self.ar_tables[i]
        return joint

    def poe_tables(self, w: float) -> list[torch.Tensor]:
        """Bridge conditionals ``softmax(w log mu_i + (1-w) log p_A(.|x_<i))`` for every prefix."""
        out = []
        for i in range(self.length):
            lA = self.ar_tables[i].log()
            lD = self.mu[i].log().expand_as(lA)
            out.append(torch.softmax(poe_logits(lD, lA, w), -1))
        return out

    def poe_joint(self, w: float) -> torch.Tensor:
        tabs = self.poe_tables(w)
        joint = tabs[0].clone()
        for i in range(1, self.length):
            joint = joint.unsqueeze(-1) * tabs[i]
        return joint

    def cond(self, tables: list[torch.Tensor], i: int, prefix: torch.Tensor) -> torch.Tensor:
        """Rows ``tables[i][prefix]`` for a batch of prefixes ``[N, i]`` -> ``[N, V]``."""
        t = tables[i]
        if i == 0:
            return t.expand(prefix.shape[0], -1)
        return t[tuple(prefix[:, j] for j in range(i))]

    def index(self, seqs: torch.Tensor) -> torch.Tensor:
        """Flat index of each sequence ``[N, n]`` in the enumeration."""
        idx = torch.zeros(seqs.shape[0], dtype=torch.long)
        for j in range(self.length):
            idx = idx * self.vocab + seqs[:, j]
        return idx

    def empirical(self, seqs: torch.Tensor) -> torch.Tensor:
        counts = torch.bincount(self.index(seqs), minlength=self.vocab**self.length).double()
        return counts / counts.sum()


def make_toy(vocab: int = 4, length: int = 3, alpha: float = 0.3, mu_power: float = 1 / 1.5, seed: int = 0) -> EnumerableToy:
    g = torch.Generator().manual_seed(seed)
    tables = []
    for i in range(length):
        shape = [vocab] * i
        n_rows = vocab**i
        rows = _dirichlet(n_rows, vocab, alpha, g)
        rows = rows.clamp_min(1e-6)
        rows = rows / rows.sum(-1, keepdim=True)
        tables.append(rows.reshape(shape + [vocab]))
    toy = EnumerableToy(vocab, length, tables, torch.zeros(length, vocab, dtype=torch.float64))
    joint = toy.ar_joint()
    mus = []
    for i in range(length):
        dims = tuple(d for d in range(length) if d != i)
        m = joint.sum(dim=dims) if dims else joint
        m = m**mu_power
        mus.append(m / m.sum())
    toy.mu = torch.stack(mus)
    return toy


def _dirichlet(n: int, k: int, alpha: float, g: torch.Generator) -> torch.Tensor:
    """Dirichlet(alpha) rows from a seeded generator: Gamma(alpha) via Marsaglia-Tsang on alpha+1 and
    the boost U^(1/alpha) (valid for alpha < 1)."""
    a = alpha + 1.0
    d = a - 1.0 / 3.0
    c = 1.0 / (9.0 * d) ** 0.5
    out = torch.empty(n * k, dtype=torch.float64)
    filled = 0
    while filled < n * k:
        m = 4 * (n * k - filled) + 16
        z = torch.randn(m, generator=g, dtype=torch.float64)
        u = torch.rand(m, generator=g, dtype=torch.float64)
        v = (1 + c * z) ** 3
        ok = (v > 0) & (torch.log(u.clamp_min(1e-300)) < 0.5 * z**2 + d - d * v + d * torch.log(v.clamp_min(1e-300)))
        vals = (d * v)[ok]
        take = min(vals.numel(), n * k - filled)
        out[filled : filled + take] = vals[:take]
        filled += take
    boost = torch.rand(n * k, generator=g, dtype=torch.float64) ** (1.0 / alpha)
    gam = (out * boost).reshape(n, k)
    return gam / gam.sum(-1, keepdim=True)


@dataclass
class Stage1Stats:
    seqs: torch.Tensor  # [N, n]
    rounds: torch.Tensor  # [N] draft rounds per sequence
    accepted: torch.Tensor  # [N] accepted draft tokens per sequence


def stage1_samples(toy: EnumerableToy, w: float, n_samples: int, generator: torch.Generator, **verify_kwargs) -> Stage1Stats:
    """Stage 1 run to completion on ``N`` chains: each round drafts every remaining position from
    ``mu`` (one 'DLM forward'), the bridge is evaluated on the drafted prefix (one 'AR forward'), and
    :func:`speculative_verify` accepts/corrects. Returns sequences and counters."""
    n, V = toy.length, toy.vocab
    seqs = torch.zeros(n_samples, n, dtype=torch.long)
    c = torch.zeros(n_samples, dtype=torch.long)
    rounds = torch.zeros(n_samples, dtype=torch.long)
    accepted = torch.zeros(n_samples, dtype=torch.long)
    poe = toy.poe_tables(w)
    while bool((c < n).any()):
        for start in range(n):
            rows = (c == start).nonzero().squeeze(-1)
            if rows.numel() == 0:
                continue
            Wn = n - start
            q = toy.mu[start:].unsqueeze(0).expand(rows.numel(), Wn, V)
            drafts = categorical(q, generator)
            full = seqs[rows].clone()
            full[:, start:] = drafts
            p = torch.stack([toy.cond(poe, start + j, full[:, : start + j]) for j in range(Wn)], 1)
            res = speculative_verify(drafts, q, p, generator, **verify_kwargs)
            for j in range(Wn):
                m = res.n_emitted > j
                seqs[rows[m], start + j] = res.tokens[m, j]
            c[rows] = start + res.n_emitted
            rounds[rows] += 1
            accepted[rows] += res.n_accepted
    return Stage1Stats(seqs, rounds, accepted)


def stage2_samples(toy: EnumerableToy, w: float, n_lanes: int, n_samples: int, generator: torch.Generator,
                   mode: str = "multinomial_exact", **verify_kwargs) -> torch.Tensor:
    """Draw ``K`` stage-1 sequences per output and choose one: ``multinomial_exact`` resamples with the
    paper's weights p_A/p_PoE (through :func:`exact_log_weights`), ``argmax_logit_diff`` takes the best
    repository energy (log-probabilities stand in for raw logits here)."""
    n = toy.length
    st = stage1_samples(toy, w, n_samples * n_lanes, generator, **verify_kwargs).seqs
    poe = toy.poe_tables(w)
    la = torch.stack([toy.cond(toy.ar_tables, i, st[:, :i]).gather(-1, st[:, i : i + 1]).squeeze(-1) for i in range(n)], 1).log()
    lp = torch.stack([toy.cond(poe, i, st[:, :i]).gather(-1, st[:, i : i + 1]).squeeze(-1) for i in range(n)], 1).log()
    lengths = torch.full((st.shape[0],), n, dtype=torch.long)
    if mode == "multinomial_exact":
        logw = exact_log_weights(la, lp, lengths).reshape(n_samples, n_lanes)
        pick = categorical(normalized_weights(logw), generator)
    elif mode == "argmax_logit_diff":
        ld = toy.mu.log().unsqueeze(0).expand(st.shape[0], -1, -1).gather(-1, st.unsqueeze(-1)).squeeze(-1)
        e = repo_energy(la, ld, lengths).reshape(n_samples, n_lanes)
        pick = e.argmax(-1)
    else:
        raise ValueError(mode)
    st = st.reshape(n_samples, n_lanes, n)
    return st[torch.arange(n_samples), pick]


def tv(p: torch.Tensor, q: torch.Tensor) -> float:
    return 0.5 * float((p.reshape(-1) - q.reshape(-1)).abs().sum())


def chi2_pvalue(counts_law: torch.Tensor, n: int, empirical: torch.Tensor) -> float:
    """Pearson chi-square p-value of ``n`` samples with frequencies ``empirical`` against ``counts_law``
    (cells with expected count < 5 are pooled)."""
    from scipy.stats import chi2

    exp = counts_law.reshape(-1).double() * n
    obs = empirical.reshape(-1).double() * n
    small = exp < 5
    e = torch.cat([exp[~small], exp[small].sum().reshape(1)]) if small.any() else exp
    o = torch.cat([obs[~small], obs[small].sum().reshape(1)]) if small.any() else obs
    keep = e > 0
    e, o = e[keep], o[keep]
    stat = float(((o - e) ** 2 / e).sum())
    return float(chi2.sf(stat, df=max(int(e.numel()) - 1, 1)))


# ----------------------------------------------------------------------------- the real sampler on the table
class TableCache:
    """A stand-in for ``DynamicCache`` that stores token ids instead of keys/values, with the same
    methods the sampler uses (``get_seq_length``, ``batch_repeat_interleave``, ``batch_select_indices``,
    ``crop(-n)``): the sampler's cache bookkeeping runs unchanged on the table models below."""

    def __init__(self):
        self.ids = None

    def get_seq_length(self) -> int:
        return 0 if self.ids is None else int(self.ids.shape[1])

    def batch_repeat_interleave(self, k: int) -> None:
        if self.ids is not None:
            self.ids = self.ids.repeat_interleave(k, 0)

    def batch_select_indices(self, idx: torch.Tensor) -> None:
        if self.ids is not None:
            self.ids = self.ids[idx]

    def crop(self, n: int) -> None:
        assert n <= 0, "crop takes minus the number of tokens to remove"
        if n < 0 and self.ids is not None:
            self.ids = self.ids[:, :n]


class _Cfg:
    def __init__(self, vocab_size: int, mask_token_id: int | None = None):
        self.vocab_size = vocab_size
        self.mask_token_id = mask_token_id
        self.model_type = "table"


class _Out:
    def __init__(self, logits):
        self.logits = logits


class TableAR(torch.nn.Module):
    """The enumerable AR target as a causal LM: ``forward(input_ids, cache=..., use_cache=True)``; the
    first ``prompt_len`` ids are a prompt it ignores; logits = log p_A(. | generated prefix)."""

    def __init__(self, toy: EnumerableToy, prompt_len: int = 1):
        super().__init__()
        self.toy, self.prompt_len = toy, prompt_len
        self.config = _Cfg(toy.vocab)
        self.zoo_new_cache = TableCache

    def forward(self, input_ids, cache=None, use_cache=True):
        full = input_ids if cache is None or cache.ids is None else torch.cat([cache.ids, input_ids], 1)
        if cache is not None:
            cache.ids = full
        T = full.shape[1]
        start = T - input_ids.shape[1]
        rows = []
        for t in range(start, T):
            i = t + 1 - self.prompt_len  # the position this output predicts, in generated coordinates
            i = min(max(i, 0), self.toy.length - 1)
            gen = full[:, self.prompt_len : self.prompt_len + i]
            rows.append(self.toy.cond(self.toy.ar_tables, i, gen).log())
        return _Out(torch.stack(rows, 1))


class TableDLM(torch.nn.Module):
    """A prefix-dependent mean-field proposal: for every masked position j, given the committed prefix
    x_<c, ``mu_j^(c) = (marginal of p_A(x_j | x_<c))^power`` renormalised. Mask id = vocab."""

    def __init__(self, toy: EnumerableToy, prompt_len: int = 1, power: float = 1 / 1.5):
        super().__init__()
        self.toy, self.prompt_len, self.power = toy, prompt_len, power
        self.mask_token_id = toy.vocab
        self.config = _Cfg(toy.vocab + 1, toy.vocab)
        self.shift_logits = False
        self._memo: dict[tuple[int, ...], torch.Tensor] = {}

    def marginals(self, prefix: list[int]) -> torch.Tensor:
        """``[n - c, V]`` proposal marginals for positions c..n-1 given a generated prefix of length c."""
        key = tuple(prefix)
        if key not in self._memo:
            self._memo[key] = self._marginals(prefix)
        return self._memo[key]

    def _marginals(self, prefix: list[int]) -> torch.Tensor:
        joint = self.toy.ar_joint()
        for t in prefix:
            joint = joint[t]
        joint = joint / joint.sum()
        m = []
        for j in range(joint.dim()):
            dims = tuple(d for d in range(joint.dim()) if d != j)
            mj = (joint.sum(dim=dims) if dims else joint) ** self.power
            m.append(mj / mj.sum())
        return torch.stack(m) if m else torch.zeros(0, self.toy.vocab, dtype=torch.float64)

    def forward(self, input_ids):
        B, T = input_ids.shape
        out = torch.zeros(B, T, self.toy.vocab + 1, dtype=torch.float64)
        for b in range(B):
            ids = input_ids[b, self.prompt_len :].tolist()
            c = ids.index(self.mask_token_id) if self.mask_token_id in ids else len(ids)
            mu = self.marginals(ids[:c])
            out[b, self.prompt_len + c : self.prompt_len + c + mu.shape[0], : self.toy.vocab] = mu.log()
            out[b, :, self.toy.vocab] = -1e9
        return out


def sampler_exact_law(toy: EnumerableToy, w: float, dlm: "TableDLM | None" = None) -> torch.Tensor:
    """Exact output law of the PoE-Bridge sampler loop with K = 1, tau = 1, top_p = 1 on the table
    models, by dynamic programming over chunk starts (the bridge is re-anchored after each rejection):

    f(c, x) = sum_{e >= c} [prod_{c <= j < e} min(mu_j^(c), p_j)(x_j)] * (p_e - mu_e^(c))_+(x_e) * f(e+1, x)
              + prod_{c <= j < n} min(mu_j^(c), p_j)(x_j),

    with p_j = PoE(mu_j^(c), p_A(. | x_<j)). The verify window does not enter: a fully accepted window
    continues on the same DLM forward, so the law is the same for every V (elastic-window invariance).
    """
    dlm = dlm or TableDLM(toy)
    n, V = toy.length, toy.vocab
    law = torch.zeros([V] * n, dtype=torch.float64)
    for idx in range(V**n):
        x = [(idx // V ** (n - 1 - k)) % V for k in range(n)]
        memo: dict[int, float] = {}

        def f(c: int) -> float:
            if c == n:
                return 1.0
            if c in memo:
                return memo[c]
            mu = dlm.marginals(x[:c])
            total, run = 0.0, 1.0
            for j in range(c, n):
                pa = toy.cond(toy.ar_tables, j, torch.tensor([x[:j]], dtype=torch.long))[0]
                p = torch.softmax(poe_logits(mu[j - c].log(), pa.log(), w), -1)
                q = mu[j - c]
                total += run * float((p - q).clamp_min(0)[x[j]]) * f(j + 1)
                run *= float(torch.minimum(p, q)[x[j]])
            total += run
            memo[c] = total
            return total

        law[tuple(x)] = f(0)
    return law


def sampler_samples(toy: EnumerableToy, w: float, n_samples: int, verify_window: int, n_lanes: int = 1,
                    lane_choice: str = "multinomial_exact", seed: int = 0):
    """Run the real :class:`~zoo.methods.poe_bridge.sampler.PoEBridgeSampler` on the table models."""
    from .sampler import PoEBridgeSampler

    smp = PoEBridgeSampler(
        models={"target": TableAR(toy), "proposal": TableDLM(toy)},
        params=PoEBridgeSampler.Params(mixture_weight=w, n_lanes=n_lanes, n_low_temp=n_lanes, temp_low=1.0, temp_high=1.0,
                                       verify_window=verify_window, max_lookahead=toy.length, top_p=1.0,
                                       max_new_tokens=toy.length, lane_choice=lane_choice, chat_template=False),
    )
    g = torch.Generator().manual_seed(seed)
    seqs = torch.tensor([smp.generate_row([0], g, None)[0] for _ in range(n_samples)])
    return seqs
