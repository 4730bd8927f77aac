"""Train the SAE shipped with the ``sae-tm`` toy variant (stage 1 of SAE-TM).

TopK SAE (F = 256, k = 8) on all-MiniLM-L6-v2 sentence embeddings of lee_background.cor
2-sentence passages; reference-trainer recipe (github.com/ExplainableML/SAE-TM, a copy of
dictionary_learning): b_dec = geometric median, AuxK 1/32, Adam, grad-clip 1, decoder renorm,
embeddings round-tripped through float8_e4m3fn like the reference data loader (--no-float8 to skip).

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python tools/train_sae_tm_toy.py
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--features", type=int, default=256)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--seed", type=int, default=112233, help="the reference CLI's default seed")
    ap.add_argument("--no-float8", action="store_true", help="skip the float8_e4m3fn round-trip")
    ap.add_argument("--out", default=str(ROOT / "specs/weights/sae-tm-minilm-topk256.safetensors"))
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from zoo.common.sae import SparseAutoencoder, TrainConfig, fraction_variance_unexplained, save_sae, train_sae
    from zoo.methods.sae_tm.pipeline import cached_embeddings, default_corpus
    from zoo.methods.sae_tm.toy import build_minilm

    texts = default_corpus()
    emb = cached_embeddings(build_minilm(), texts, progress=True)
    x = emb if args.no_float8 else emb.to(torch.float8_e4m3fn).float()
    sae = SparseAutoencoder(x.shape[1], args.features, "topk", args.k, seed=args.seed, dec_init="gaussian")  # the shipped weights
    hist = train_sae(sae, x, TrainConfig(steps=args.steps, batch_size=args.batch_size, b_dec_init="geometric_median",
                                         auxk_alpha=1 / 32, dead_tokens=20 * len(x), seed=args.seed, progress=True,
                                         log_every=500))
    sae.tokens_since_fired.zero_()
    fvu = fraction_variance_unexplained(sae, emb)
    alive = int((sae.encode(emb) > 0).any(0).sum())
    save_sae(sae, args.out)
    sha = hashlib.sha256(Path(args.out).read_bytes()).hexdigest()
    print(f"{len(texts)} passages, F={args.features} k={args.k}, {args.steps} steps: FVU {fvu:.3f}, alive {alive}/{args.features}")
    print(f"losses: {[round(v, 4) for v in hist.loss]}")
    print(f"wrote {args.out} ({Path(args.out).stat().st_size} bytes) sha256 {sha}")


if __name__ == "__main__":
    main()
