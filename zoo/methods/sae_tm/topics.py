"""SAE-TM: sparse autoencoders as topic models (Girrbach & Akata, ICML 2026, arXiv 2511.16309;
code github.com/ExplainableML/SAE-TM). Implemented from the paper / repository description:

Stage 1 (``zoo.common.sae``): an SAE trained on document embeddings; its atoms are topic atoms.

Stage 2, interpretation (``interpret_sae.py``): theta_d = SAE activations of document d clipped
at 0 and normalised to sum 1 (all-zero rows stay 0). Topic-word logits beta (K x V, init
0.01 N(0,1)) and background logits b (V); a fixed mixing weight pi = 0.3 (a buffer, not trained).
Word law of document d: q_dw = (1 - pi) sum_k theta_dk softmax(beta_k)_w + pi softmax(b)_w.
Loss = sum_d sum_w c_dw idf_w (-log max(q_dw, 1e-8)) with idf_w = log(N / df_w) / max idf
(or 1 without idf weighting); AdamW, lr 1e-2, weight decay 0.
Outputs B = softmax(beta), p0 = softmax(b), and theta_bar = mean over documents of theta.

Stage 3, merging (``sae_to_topic.py``): keep atoms with theta_bar > 0; sparsify each B row to the
smallest descending prefix whose cumulative mass exceeds tau = 0.9 and renormalise; atom
embedding = sparsified row x word-vector matrix; weighted k-means (scikit-learn KMeans,
sample_weight = theta_bar; the reference fixes random_state 42, which stays this function's default,
while :class:`~zoo.methods.sae_tm.SAETopicModel` passes its seed) into n topics; topic word law = theta_bar-weighted
mean of its member rows; cluster mass = sum of member theta_bar (normalised). Changing n re-runs
only this stage. Two readings (``flavour``): ``"paper"`` averages the *sparsified* member rows
and runs k-means with 10 initialisations; ``"repository"`` (``sae_to_topic.py`` at commit
6c6a743) averages the *unsparsified* rows B and runs scikit-learn's default, one k-means++
initialisation (``n_init="auto"``).

Offline departure: word vectors are all-MiniLM-L6-v2 embeddings of each vocabulary word (the
paper uses word2vec-google-news-300, which needs the network).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

__all__ = [
    "MERGE_FLAVOURS",
    "Interpretation",
    "TopicSet",
    "fit_interpretation",
    "idf_weights",
    "merge_atoms",
    "mixture_word_probs",
    "normalise_theta",
    "sparsify_top_mass",
    "windowed_c_npmi",
]

#: Stage-3 readings: rows averaged into the topic word law, and k-means initialisations.
MERGE_FLAVOURS: dict[str, dict[str, Any]] = {
    "paper": {"topic_rows": "sparsified", "n_init": 10},
    "repository": {"topic_rows": "full", "n_init": 1},
}


def normalise_theta(z: torch.Tensor) -> torch.Tensor:
    """theta: SAE activations clipped at 0, rows normalised to sum 1 (all-zero rows stay 0)."""
    z = z.clamp_min(0)
    s = z.sum(-1, keepdim=True)
    return torch.where(s > 0, z / s.clamp_min(1e-30), torch.zeros_like(z))


def idf_weights(counts: np.ndarray | torch.Tensor) -> torch.Tensor:
    """idf_w = log(N / df_w) / max_w log(N / df_w), in [0, 1] (df_w >= 1 assumed; 0 -> weight 0)."""
    c = torch.as_tensor(np.asarray(counts) if not isinstance(counts, torch.Tensor) else counts)
    n = c.shape[0]
    df = (c > 0).sum(0).double()
    idf = torch.where(df > 0, torch.log(n / df.clamp_min(1)), torch.zeros_like(df))
    m = float(idf.max())
    return (idf / m if m > 0 else torch.ones_like(idf)).float()


def mixture_word_probs(theta: torch.Tensor, beta: torch.Tensor, bg: torch.Tensor, pi: float) -> torch.Tensor:
    """q_dw = (1 - pi) sum_k theta_dk softmax(beta_k)_w + pi softmax(bg)_w."""
    return (1 - pi) * theta @ torch.softmax(beta, -1) + pi * torch.softmax(bg, -1)[None, :]


@dataclass
class Interpretation:
    """Stage-2 output: B (K x V) topic-word laws, p0 (V) background law, theta_bar (K), pi."""

    B: np.ndarray
    p0: np.ndarray
    theta_bar: np.ndarray
    pi: float
    losses: list[float]


def fit_interpretation(
    theta: torch.Tensor,
    counts: np.ndarray | torch.Tensor,
    *,
    pi: float = 0.3,
    idf: bool = True,
    epochs: int = 50,
    lr: float = 1e-2,
    batch_size: int = 128,
    seed: int = 0,
    progress: bool = False,
) -> Interpretation:
    """Fit the mixture-of-unigrams head (see the module docstring) by AdamW on minibatches of
    documents; deterministic for a seed. ``theta`` must already be normalised (N x K)."""
    g = torch.Generator().manual_seed(int(seed))
    c = torch.as_tensor(np.asarray(counts, dtype=np.float32)) if not isinstance(counts, torch.Tensor) else counts.float()
    n, v = c.shape
    k = theta.shape[1]
    w = idf_weights(c) if idf else torch.ones(v)
    beta = torch.nn.Parameter(0.01 * torch.randn(k, v, generator=g))
    bg = torch.nn.Parameter(0.01 * torch.randn(v, generator=g))
    opt = torch.optim.AdamW([beta, bg], lr=lr, weight_decay=0.0)
    losses: list[float] = []
    it = range(epochs)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="interpret atoms", leave=False)
    for _ in it:
        perm = torch.randperm(n, generator=g)
        tot = 0.0
        for i in range(0, n, batch_size):
            idx = perm[i : i + batch_size]
            q = mixture_word_probs(theta[idx], beta, bg, pi)
            loss = (c[idx] * w[None, :] * -torch.log(q.clamp_min(1e-8))).sum() / len(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += float(loss.detach()) * len(idx)
        losses.append(tot / n)
    with torch.no_grad():
        B = torch.softmax(beta.double(), -1).numpy()
        p0 = torch.softmax(bg.double(), -1).numpy()
    theta_bar = theta.double().mean(0).numpy()
    return Interpretation(B=B, p0=p0, theta_bar=theta_bar, pi=pi, losses=losses)


def sparsify_top_mass(B: np.ndarray, tau: float = 0.9) -> np.ndarray:
    """Keep, per row, the smallest descending-order prefix whose cumulative mass exceeds ``tau``
    (at least one entry), zero the rest and renormalise to sum 1."""
    B = np.asarray(B, dtype=np.float64)
    out = np.zeros_like(B)
    order = np.argsort(-B, axis=1, kind="stable")
    srt = np.take_along_axis(B, order, 1)
    cum = np.cumsum(srt, 1)
    n_keep = np.minimum((cum <= tau * cum[:, -1:]).sum(1) + 1, B.shape[1])
    for r in range(B.shape[0]):
        keep = order[r, : n_keep[r]]
        out[r, keep] = B[r, keep]
        s = out[r].sum()
        if s > 0:
            out[r] /= s
    return out


@dataclass
class TopicSet:
    """Stage-3 output for one n: topic word laws (n x V), cluster masses (n, sum 1), the atom ->
    topic assignment (-1 for atoms with theta_bar = 0) and the valid atom indices."""

    topic_word: np.ndarray
    cluster_mass: np.ndarray
    atom_topic: np.ndarray
    valid_atoms: np.ndarray

    def top_words(self, vocab: list[str] | np.ndarray, n: int = 10) -> list[list[str]]:
        order = np.argsort(-self.topic_word, axis=1, kind="stable")[:, :n]
        return [[str(vocab[j]) for j in row] for row in order]


def merge_atoms(
    interp: Interpretation,
    word_vectors: np.ndarray,
    n_topics: int,
    *,
    tau: float = 0.9,
    random_state: int = 42,
    flavour: Literal["paper", "repository"] = "paper",
    topic_rows: Literal["sparsified", "full"] | None = None,
    n_init: int | None = None,
) -> TopicSet:
    """Weighted k-means of sparsified atom embeddings into ``n_topics`` topics (stage 3).

    ``flavour`` picks the defaults of ``topic_rows`` (which member rows are averaged into a
    topic's word law) and ``n_init`` (k-means initialisations) from :data:`MERGE_FLAVOURS`;
    explicit ``topic_rows`` / ``n_init`` override them. Atom embeddings always use the
    sparsified rows (paper and repository agree there)."""
    from sklearn.cluster import KMeans

    if flavour not in MERGE_FLAVOURS:
        raise ValueError(f"flavour must be paper or repository, not {flavour!r}")
    rows_kind = topic_rows or MERGE_FLAVOURS[flavour]["topic_rows"]
    inits = int(n_init or MERGE_FLAVOURS[flavour]["n_init"])
    if rows_kind not in ("sparsified", "full"):
        raise ValueError(f"topic_rows must be sparsified or full, not {rows_kind!r}")
    tb = np.asarray(interp.theta_bar, dtype=np.float64)
    valid = np.flatnonzero(tb > 0)
    if not 1 <= n_topics <= len(valid):
        raise ValueError(f"n_topics must be in [1, {len(valid)}] (atoms with theta_bar > 0), got {n_topics}")
    Bs = sparsify_top_mass(interp.B[valid], tau)
    emb = Bs @ np.asarray(word_vectors, dtype=np.float64)
    w = tb[valid]
    km = KMeans(n_clusters=n_topics, random_state=random_state, n_init=inits).fit(emb, sample_weight=w)
    lab = km.labels_
    rows = Bs if rows_kind == "sparsified" else np.asarray(interp.B[valid], dtype=np.float64)
    topic_word = np.zeros((n_topics, Bs.shape[1]))
    mass = np.zeros(n_topics)
    for t in range(n_topics):
        m = lab == t
        mass[t] = w[m].sum()
        if mass[t] > 0:
            topic_word[t] = (w[m, None] * rows[m]).sum(0) / mass[t]
    atom_topic = np.full(len(tb), -1, dtype=np.int64)
    atom_topic[valid] = lab
    return TopicSet(topic_word=topic_word, cluster_mass=mass / mass.sum(), atom_topic=atom_topic, valid_atoms=valid)


# ----------------------------------------------------------------------------- evaluation

def npmi_coherence(topics: list[list[str]], docs_binary: np.ndarray, vocab_index: dict[str, int]) -> float:
    """**Document-level** NPMI: mean over topics of the mean over each topic's word pairs of
    NPMI(i, j) = log(P(i, j) / (P(i) P(j))) / -log P(i, j), with P estimated from whole-document
    presence on a reference corpus (``docs_binary``: N x V presence); -1 for pairs that never
    co-occur, 1 for pairs in every document. This is *not* gensim's ``c_npmi``, which counts
    co-occurrence in 10-token sliding windows (see :func:`windowed_c_npmi`); whole documents
    make co-occurrence far likelier, so this score is much higher on long documents."""
    d = np.asarray(docs_binary, dtype=bool)
    n = d.shape[0]
    scores = []
    for words in topics:
        ids = [vocab_index[w] for w in words if w in vocab_index]
        vals = []
        for a in range(len(ids)):
            for b in range(a + 1, len(ids)):
                pi, pj = d[:, ids[a]].mean(), d[:, ids[b]].mean()
                pij = (d[:, ids[a]] & d[:, ids[b]]).sum() / n
                if pij <= 0:
                    vals.append(-1.0)
                elif pij >= 1:
                    vals.append(1.0)
                else:
                    vals.append(math.log(pij / (pi * pj)) / -math.log(pij))
        if vals:
            scores.append(float(np.mean(vals)))
    return float(np.mean(scores)) if scores else float("nan")


def windowed_c_npmi(topics: list[list[str]], tokenized_docs: list[list[str]], window_size: int = 10) -> float:
    """gensim's ``c_npmi`` coherence (Röder et al. 2015, "Exploring the space of topic coherence
    measures"): word and pair probabilities from boolean sliding windows of ``window_size``
    tokens over ``tokenized_docs``, NPMI with epsilon 1e-12, averaged over ordered word pairs and
    topics. Computed by ``gensim.models.CoherenceModel(coherence="c_npmi")`` itself."""
    from gensim.corpora import Dictionary
    from gensim.models import CoherenceModel

    dictionary = Dictionary(tokenized_docs)
    topics = [[w for w in t if w in dictionary.token2id] for t in topics]
    topics = [t for t in topics if len(t) >= 2]
    if not topics:
        return float("nan")
    cm = CoherenceModel(topics=topics, texts=tokenized_docs, dictionary=dictionary, coherence="c_npmi",
                        window_size=window_size, processes=1)
    return float(cm.get_coherence())


def topic_diversity(topics: list[list[str]]) -> float:
    """Unique words among all topics' top words / total top words (TopMost's TD), in (0, 1]."""
    allw = [w for t in topics for w in t]
    return len(set(allw)) / max(len(allw), 1)
