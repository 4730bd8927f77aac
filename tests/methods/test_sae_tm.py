"""Behaviour tests for SAE-TM (zoo.methods.sae_tm) beyond the conformance suite."""
from __future__ import annotations

import math

import numpy as np
import torch

from zoo.methods.sae_tm import fit_interpretation, merge_atoms, normalise_theta, npmi_coherence, topic_diversity


def test_interpretation_recovers_planted_word_distributions():
    """Documents drawn from a known mixture (3 atoms with disjoint word sets + background):
    the fitted head puts each atom's mass on its own planted words."""
    rng = np.random.default_rng(0)
    V, K, N = 30, 3, 300
    true_B = np.zeros((K, V))
    for k in range(K):
        true_B[k, 8 * k : 8 * k + 8] = 1 / 8
    p0 = np.zeros(V)
    p0[24:] = 1 / 6
    theta = rng.dirichlet(np.full(K, 0.2), size=N)
    q = 0.7 * theta @ true_B + 0.3 * p0
    counts = np.stack([rng.multinomial(60, row) for row in q]).astype(np.float32)
    it = fit_interpretation(torch.from_numpy(theta).float(), counts, pi=0.3, idf=False, epochs=200, batch_size=64, seed=0)
    for k in range(K):
        assert it.B[k, 8 * k : 8 * k + 8].sum() > 0.8, it.B[k].round(2)
    assert it.p0[24:].sum() > 0.8


def test_interpretation_beats_shuffled_theta():
    """Negative control: the fitted loss is lower with the true theta than with theta rows shuffled
    across documents (the head uses the SAE activations)."""
    rng = np.random.default_rng(1)
    V, K, N = 20, 4, 200
    B = rng.dirichlet(np.full(V, 0.2), size=K)
    theta = rng.dirichlet(np.full(K, 0.2), size=N)
    counts = np.stack([rng.multinomial(40, 0.7 * t @ B + 0.3 / V) for t in theta]).astype(np.float32)
    good = fit_interpretation(torch.from_numpy(theta).float(), counts, epochs=100, batch_size=64, seed=0).losses[-1]
    bad = fit_interpretation(torch.from_numpy(theta[rng.permutation(N)]).float(), counts, epochs=100, batch_size=64, seed=0).losses[-1]
    assert good < 0.97 * bad


def test_normalise_theta_zero_rows():
    z = torch.tensor([[1.0, 3.0], [-1.0, -2.0]])
    assert torch.equal(normalise_theta(z), torch.tensor([[0.25, 0.75], [0.0, 0.0]]))


def test_npmi_and_diversity_hand_computed():
    """NPMI of a pair that always co-occurs is 1, of a never co-occurring pair -1; P(i)=P(j)=1/2,
    P(ij)=1/4 gives 0. Diversity counts unique words."""
    pres = np.array([[1, 1, 1, 0], [1, 1, 0, 1], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=bool)
    idx = {"a": 0, "b": 1, "c": 2, "d": 3}
    assert math.isclose(npmi_coherence([["a", "b"]], pres, idx), 1.0)
    assert math.isclose(npmi_coherence([["c", "d"]], pres, idx), -1.0)
    assert math.isclose(npmi_coherence([["a", "c"]], pres, idx), 0.0, abs_tol=1e-12)
    assert topic_diversity([["a", "b"], ["b", "c"]]) == 0.75


def test_merge_groups_atoms_by_word_vectors():
    """Atoms about the same words (near-identical embeddings) land in the same topic."""
    from zoo.methods.sae_tm.topics import Interpretation

    V = 12
    wv = np.eye(V)
    B = np.zeros((6, V))
    for a in range(6):
        grp = a // 3
        B[a, 6 * grp : 6 * grp + 6] = np.roll(np.array([0.5, 0.3, 0.1, 0.05, 0.03, 0.02]), a % 3)
    it = Interpretation(B=B, p0=np.full(V, 1 / V), theta_bar=np.full(6, 1 / 6), pi=0.3, losses=[])
    ts = merge_atoms(it, wv, 2)
    assert len(set(ts.atom_topic[:3])) == 1 and len(set(ts.atom_topic[3:])) == 1 and ts.atom_topic[0] != ts.atom_topic[3]
    assert np.allclose(ts.cluster_mass, 0.5)


def test_merge_flavours_paper_vs_repository():
    """"paper": a topic's word law is the theta_bar-weighted mean of its atoms' *sparsified* rows,
    k-means with 10 initialisations; "repository" (sae_to_topic.py): the same weighted mean of
    the *unsparsified* rows B, one k-means++ initialisation (scikit-learn's n_init="auto")."""
    from sklearn.cluster import KMeans

    from zoo.methods.sae_tm.topics import Interpretation, sparsify_top_mass

    rng = np.random.default_rng(3)
    K, V = 12, 40
    B = rng.dirichlet(np.full(V, 0.3), size=K)
    tb = rng.dirichlet(np.ones(K))
    wv = rng.normal(size=(V, 5))
    it = Interpretation(B=B, p0=np.full(V, 1 / V), theta_bar=tb, pi=0.3, losses=[])
    Bs = sparsify_top_mass(B, 0.9)
    for flavour, rows, n_init in (("paper", Bs, 10), ("repository", B, 1)):
        ts = merge_atoms(it, wv, 4, flavour=flavour)
        lab = KMeans(n_clusters=4, random_state=42, n_init=n_init).fit(Bs @ wv, sample_weight=tb).labels_
        assert np.array_equal(ts.atom_topic, lab), flavour
        for t in range(4):
            m = lab == t
            assert np.allclose(ts.topic_word[t], (tb[m, None] * rows[m]).sum(0) / tb[m].sum()), flavour
    # the two readings give different word laws: unsparsified rows keep the tails
    p, r = merge_atoms(it, wv, 4, flavour="paper"), merge_atoms(it, wv, 4, flavour="repository")
    assert (r.topic_word > 0).sum() > (p.topic_word > 0).sum()


def test_windowed_c_npmi_is_gensims_and_differs_from_document_npmi():
    """windowed_c_npmi is gensim's c_npmi (10-token sliding windows): on documents shorter than
    the window it equals document-level NPMI (up to gensim's 1e-12 epsilon), and two words that
    share every document but always sit 20 tokens apart score 1 at document level and clearly
    negative with windows (never in one window: -1 up to gensim's epsilon term)."""
    from zoo.methods.sae_tm import windowed_c_npmi

    short = [["a", "b", "c"], ["a", "b", "d"], ["c", "e"], ["d", "e"], ["a", "c"]]
    vocab = ["a", "b", "c", "d", "e"]
    idx = {w: i for i, w in enumerate(vocab)}
    pres = np.array([[w in d for w in vocab] for d in short])
    topics = [["a", "b", "c"], ["a", "b", "d"]]  # every pair co-occurs somewhere (the -1 conventions differ)
    assert math.isclose(windowed_c_npmi(topics, short), npmi_coherence(topics, pres, idx), abs_tol=1e-9)
    filler = [f"w{i}" for i in range(19)]
    far = [["x", *filler, "y"] for _ in range(6)] + [["z", *filler] for _ in range(6)]
    vocab2 = ["x", "y", "z", *filler]
    pres2 = np.array([[w in d for w in vocab2] for d in far])
    idx2 = {w: i for i, w in enumerate(vocab2)}
    assert npmi_coherence([["x", "y"]], pres2, idx2) > 0.99
    assert windowed_c_npmi([["x", "y"]], far) < -0.5  # never in one window: -1 up to gensim's epsilon term


def test_pipeline_small_corpus_and_cli():
    """The procedure runs end to end on real MiniLM embeddings of a few passages with the shipped
    SAE and prints topics; re-topicing changes only the merge."""
    from pathlib import Path

    from safetensors.torch import load_file

    from zoo.methods.sae_tm import SAETopicModel, default_corpus
    from zoo.methods.sae_tm.toy import build_minilm, build_sae

    sae = build_sae()
    root = Path(__file__).resolve().parents[2]
    sae.load_state_dict(load_file(str(root / "specs/weights/sae-tm-minilm-topk256.safetensors")), strict=True)
    proc = SAETopicModel(models={"encoder": build_minilm(), "sae": sae}, params=SAETopicModel.Params(epochs=5), device="cpu", dtype=None)
    texts = default_corpus(40)
    out = proc(seed=0, texts=texts, n_topics=4)
    assert len(out["topics"]) == 4 and all(len(t) == 10 for t in out["topics"])
    assert np.allclose(out["topic_word"].sum(1), 1) and math.isclose(out["cluster_mass"].sum(), 1.0)
    fit_before = proc._fit
    ts = proc.retopic(7)
    assert proc._fit is fit_before and ts.topic_word.shape[0] == 7


def test_mini_newsgroup_loader_is_restricted_and_strips_headers():
    """The bundled 20-Newsgroups sample loads through the restricted unpickler, with balanced
    labels and no header naming the newsgroup (which would leak the label)."""
    from zoo.common.corpus import mini_newsgroup

    texts, labels, names = mini_newsgroup()
    assert len(texts) == 200 and sum(labels) == 100 and names == ["alt.atheism", "sci.space"]
    assert not any(t.lstrip().startswith(("Newsgroups:", "From:", "Path:")) for t in texts)
    raw, _, _ = mini_newsgroup(strip_headers=False)
    assert sum("Newsgroups:" in t for t in raw) == 200


def test_document_topics_rows_are_distributions():
    """theta . M gives each document a distribution over topics (or all zeros)."""
    from zoo.methods.sae_tm import SAETopicModel
    from zoo.methods.sae_tm.topics import TopicSet

    proc = SAETopicModel.__new__(SAETopicModel)
    theta = normalise_theta(torch.tensor([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0], [0.0, 1.0, 3.0]])).double().numpy()
    proc._fit = {"theta": theta}
    ts = TopicSet(topic_word=np.full((2, 4), 0.25), cluster_mass=np.array([0.5, 0.5]),
                  atom_topic=np.array([0, 1, 1]), valid_atoms=np.arange(3))
    dt = proc.document_topics(ts)
    assert np.allclose(dt, [[1 / 3, 2 / 3], [0, 0], [0, 1]])


def test_train_steps_path_trains_a_fresh_batchtopk_sae():
    """The full variant has no shipped SAE: with train_steps > 0 the recipe trains stage 1 itself
    (BatchTopK, b_dec = geometric median, AuxK) before interpreting the atoms."""
    from zoo.methods.sae_tm import SAETopicModel, default_corpus
    from zoo.methods.sae_tm.toy import build_minilm, build_sae

    sae = build_sae(384, 32, "batchtopk", 4)
    before = sae.W_dec.detach().clone()
    proc = SAETopicModel(models={"encoder": build_minilm(), "sae": sae},
                         params=SAETopicModel.Params(train_steps=30, train_k=4, epochs=2), device="cpu", dtype=None)
    out = proc(seed=0, texts=default_corpus(40), n_topics=3)  # same texts as above: embeddings cache hit
    assert len(out["topics"]) == 3 and np.allclose(out["topic_word"].sum(1), 1)
    assert torch.equal(sae.W_dec.detach(), before)  # the model object given by the engine is not mutated


def test_kmeans_seed_follows_the_seed_and_the_param_fixes_it(monkeypatch):
    """Stage 3's k-means ``random_state`` is the call's seed (so a seed sweep measures the k-means
    spread too), ``retopic(kmeans_seed=...)`` overrides it, and the ``kmeans_seed`` param fixes it (42 = the reference
    code's). On main every merge used random_state 42 whatever the seed."""
    import sklearn.cluster

    from zoo.methods.sae_tm import SAETopicModel
    from zoo.methods.sae_tm.toy import build_sae

    seen: list[int] = []
    real = sklearn.cluster.KMeans

    class Spy(real):
        def fit(self, *a, **k):
            seen.append(self.random_state)
            return super().fit(*a, **k)

    monkeypatch.setattr(sklearn.cluster, "KMeans", Spy)

    class Encoder:  # deterministic "embeddings" (no MiniLM needed): cached_embeddings calls sentence_embeddings
        path = "test-encoder"

    monkeypatch.setattr("zoo.methods.sae_tm.pipeline.cached_embeddings",
                        lambda enc, texts, **kw: torch.randn(len(texts), 384, generator=torch.Generator().manual_seed(len(texts))))
    texts = [f"alpha beta gamma {i} delta epsilon {i % 3} zeta eta theta" for i in range(30)]
    proc = SAETopicModel(models={"encoder": Encoder(), "sae": build_sae()}, params=SAETopicModel.Params(epochs=1, min_df=1),
                         device="cpu", dtype=None)
    proc(seed=3, texts=texts, n_topics=2)
    proc.retopic(2)
    proc.retopic(2, kmeans_seed=7)
    fixed = proc.with_params(kmeans_seed=42)
    fixed(seed=3, texts=texts, n_topics=2)
    assert seen == [3, 3, 7, 42]


# ----------------------------------------------------------------------------- zoo train / zoo bench
def test_trainer_writes_the_file_its_spec_entry_produces_and_is_deterministic(tmp_path) -> None:
    """``zoo train sae-tm``'s recipe (a few steps on a small SAE here): the one file its ``training:`` entry declares,
    loadable as an SAE of the trained shape, and byte-identical across two runs (what ``--check`` relies on)."""
    import zoo
    from registry.context import Context
    from zoo.common.sae import load_sae
    from zoo.methods.sae_tm.train import SAEOptions, train_sae_toy

    spec = zoo.spec("sae-tm")
    produced = [p.rsplit("/", 1)[-1] for p in spec.training["sae"].produces]
    opts = SAEOptions(features=32, k=4, steps=3, batch_size=64)
    blobs = []
    for run in ("a", "b"):
        train_sae_toy(Context(spec, zoo.entry("sae-tm").path, out_dir=tmp_path / run), opts)  # embeddings from the cache
        assert sorted(p.name for p in (tmp_path / run).iterdir()) == produced
        blobs.append((tmp_path / run / produced[0]).read_bytes())
    assert blobs[0] == blobs[1]
    sae = load_sae(tmp_path / "a" / produced[0])
    assert (sae.d_in, sae.n_features, sae.k) == (384, 32, 4)


def test_bench_topic_count_below_two_is_a_one_line_error_naming_the_flag(capsys) -> None:
    """`zoo bench sae-tm --topics 1`: the options model refuses it before any model is built, in one line naming
    --topics (exit 2)."""
    from zoo.cli import main

    assert main(["bench", "sae-tm", "--topics", "1"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "--topics" in err[0], err


def test_save_sae_writes_the_same_bytes_every_time(tmp_path) -> None:
    """The shipped SAE's sha256 can only be re-made if saving is byte-deterministic: safetensors writes metadata from a
    hash map (a random key order per save), so ``save_sae`` sorts the metadata keys; twelve saves, one digest, and
    the file loads back to the same tensors."""
    import hashlib

    from zoo.common.sae import SparseAutoencoder, load_sae, save_sae

    sae = SparseAutoencoder(8, 16, "topk", 2, seed=0)
    digests = set()
    for i in range(12):
        save_sae(sae, tmp_path / f"{i}.safetensors")
        digests.add(hashlib.sha256((tmp_path / f"{i}.safetensors").read_bytes()).hexdigest())
    assert len(digests) == 1
    back = load_sae(tmp_path / "0.safetensors")
    assert all(torch.equal(a, b) for a, b in zip(sae.state_dict().values(), back.state_dict().values()))
