"""How the ``sae-tm`` toy variant's SAE is made (``zoo train sae-tm [--check]``): stage 1 of SAE-TM.

TopK SAE (F = 256, k = 8) on all-MiniLM-L6-v2 sentence embeddings (the spec's toy ``encoder`` role) of
lee_background.cor 2-sentence passages; the reference trainer's recipe (github.com/ExplainableML/SAE-TM, a copy of
dictionary_learning): b_dec = geometric median, AuxK 1/32, Adam, grad-clip 1, decoder renorm, embeddings
round-tripped through float8_e4m3fn like the reference data loader (``float8: false`` skips it). Written with
:func:`zoo.common.sae.save_sae` as ``sae-tm-minilm-topk256.safetensors``; byte-for-byte deterministic on one thread.
"""
from __future__ import annotations

from typing import Any

from registry.contract import trainer

from .params import SAEOptions

FILE_NAME = "sae-tm-minilm-topk256.safetensors"


@trainer(options=SAEOptions)
def train_sae_toy(ctx: Any, opts: SAEOptions) -> None:
    """Train the toy TopK SAE on the toy encoder's passage embeddings and write it into ``ctx.out_dir``."""
    import torch

    from zoo.common.sae import SparseAutoencoder, TrainConfig, fraction_variance_unexplained, save_sae, train_sae
    from zoo.common.training import sha256_file

    from .pipeline import cached_embeddings, default_corpus

    torch.set_num_threads(1)
    texts = default_corpus()
    enc = ctx.models("toy", roles=["encoder"])["encoder"]  # the packaged MiniLM (not the SAE this rewrites)
    emb = cached_embeddings(enc, texts, progress=True, use_cache=ctx.use_cache)
    x = emb.to(torch.float8_e4m3fn).float() if opts.float8 else emb
    sae = SparseAutoencoder(x.shape[1], opts.features, "topk", opts.k, seed=opts.sae_seed, dec_init="gaussian")
    hist = train_sae(sae, x, TrainConfig(steps=opts.steps, batch_size=opts.batch_size, b_dec_init="geometric_median",
                                         auxk_alpha=1 / 32, dead_tokens=20 * len(x), seed=opts.sae_seed, progress=True,
                                         log_every=500))
    sae.tokens_since_fired.zero_()
    fvu = fraction_variance_unexplained(sae, emb)
    alive = int((sae.encode(emb) > 0).any(0).sum())
    path = ctx.path(FILE_NAME)
    save_sae(sae, path)
    print(f"{len(texts)} passages, F={opts.features} k={opts.k}, {opts.steps} steps: FVU {fvu:.3f}, alive {alive}/{opts.features}")
    print(f"losses: {[round(v, 4) for v in hist.loss]}")
    print(f"wrote {path.name} ({path.stat().st_size} bytes) sha256 {sha256_file(path)}")
