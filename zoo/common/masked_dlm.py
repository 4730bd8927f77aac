"""Masked-diffusion-LM toolkit shared by the discrete methods (PoE-Bridge, CoDiLA, LoFlexMDM, DPLM-Evo).

* :class:`MaskedDenoiser`: one interface over any bidirectional mask predictor, ``logits(ids) ->
  [B, L, V]`` with the prediction for position ``i`` at index ``i``. It handles Dream's shift-by-one
  (Dream reads position ``i`` from output ``i-1`` and duplicates the first output; Ye et al. 2025,
  https://github.com/HKUNLP/Dream), the mask id and a vocabulary limit.
* :func:`confidence_decode`: the standard DLM decoding baseline. Each step runs the denoiser once,
  proposes a token for every masked position of the current semi-autoregressive block, and unmasks the
  ``tokens_per_step`` most confident ones. Confidence rules: LLaDA ``low_confidence`` (= Dream
  ``maskgit_plus``: probability of the proposed token; Nie et al. 2025, arXiv 2502.09992, Alg. 5),
  Dream ``topk_margin`` (top-1 minus top-2 probability) and Dream ``entropy`` (negative entropy).
* :class:`ConfidenceDecoding`: that baseline as a zoo sampler (spec ``dlm-confidence-decoding``); its
  :class:`DenoiserDecodingParams` are shared with the other masked-DLM decoders (CoDiLA).
* :class:`TinyMaskedLM`: a small bidirectional Transformer mask predictor (optional time input) for
  CPU toys, and the training losses: :func:`masked_diffusion_loss` (MDLM/LLaDA, 1/t weighting) and
  :func:`dfm_masked_loss` (the same objective in discrete-flow-matching time, with a kappa schedule).
* :class:`TextSampler`: prompt/tokenizer plumbing shared by the text samplers (prompted or unconditional
  generation, model roles named by parameters) and :class:`GenerationOutput`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field, model_validator

from registry.contract import CliInputs, Procedure, ProcedureParams, seed_list
from registry.limits import Rows, Seeds, Sequences
from registry.results import ProcedureOutput
from zoo.common.params import ConfidenceDecodingParams, DenoiserDecodingParams, TextSamplerCli  # noqa: F401 - the torch-free models (registry.declare)
from zoo.common.discrete import gumbel_max, top_p_filter

ALGS = ("low_confidence", "maskgit_plus", "topk_margin", "entropy")


# ----------------------------------------------------------------------------- the interface
class MaskedDenoiser:
    """Logits for every position of a partially masked sequence.

    ``model`` is any module returning logits ``[B, L, V]`` (a tensor or an object with ``.logits``).
    ``shift_logits=True`` for Dream-style models (AR-initialised: output ``i-1`` predicts token ``i``).
    """

    def __init__(self, model: Any, mask_token_id: int, shift_logits: bool = False, vocab_limit: int | None = None):
        self.model = model
        self.mask_token_id = int(mask_token_id)
        self.shift_logits = bool(shift_logits)
        self.vocab_limit = vocab_limit

    @classmethod
    def wrap(cls, model: Any, mask_token_id: int | None = None, shift_logits: bool | None = None,
             vocab_limit: int | None = None) -> "MaskedDenoiser":
        """Infer the mask id (``model.mask_token_id`` or ``model.config.mask_token_id``) and the shift
        (``model.shift_logits``, or ``True`` for ``config.model_type == "Dream"``) when not given."""
        if isinstance(model, MaskedDenoiser):
            return model
        cfg = getattr(model, "config", None)
        if mask_token_id is None:
            mask_token_id = getattr(model, "mask_token_id", None)
            if mask_token_id is None and cfg is not None:
                mask_token_id = getattr(cfg, "mask_token_id", None)
        if mask_token_id is None:
            raise ValueError("masked denoiser: no mask_token_id on the model or its config; pass it explicitly")
        if shift_logits is None:
            shift_logits = getattr(model, "shift_logits", None)
            if shift_logits is None:
                shift_logits = str(getattr(cfg, "model_type", "")).lower() == "dream"
        return cls(model, mask_token_id, shift_logits, vocab_limit)

    @torch.no_grad()
    def __call__(self, input_ids: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids)
        logits = out if isinstance(out, torch.Tensor) else out.logits
        if self.shift_logits:
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
        if self.vocab_limit is not None:
            logits = logits[..., : self.vocab_limit]
        return logits.float()


def shift_by_one(logits: torch.Tensor) -> torch.Tensor:
    """Dream's convention: prediction for position i read from output i-1, first output duplicated."""
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


# ----------------------------------------------------------------------------- text helpers
#: files one of which a local model folder must have for its tokenizer to be loaded from it
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")


def find_tokenizer(*models: Any) -> Any:
    """The tokenizer attached by a zoo factory (``model.zoo_tokenizer``), else ``AutoTokenizer`` from the
    first model's ``name_or_path`` (:func:`registry.hub.load_pretrained`: local files only, never remote code;
    a tokenizer that needs code is declared as a role with the spec's and the caller's consent)."""
    for m in models:
        tok = getattr(m, "zoo_tokenizer", None)
        if tok is not None:
            return tok
    for m in models:
        path = getattr(getattr(m, "config", None), "_name_or_path", None) or getattr(m, "name_or_path", None)
        if path and Path(path).is_dir() and not any((Path(path) / f).exists() for f in TOKENIZER_FILES):
            continue  # a local model folder without tokenizer files: AutoTokenizer would invent an empty one
        if path:
            from transformers import AutoTokenizer

            from registry.hub import load_pretrained

            return load_pretrained(AutoTokenizer, path)  # no remote code: a tokenizer needing it is declared as a role
    raise ValueError("no tokenizer: pass input_ids, or use models that carry one")


def encode_prompt(tok: Any, text: str, chat_template: bool = True) -> list[int]:
    """Token ids of one prompt; instruct tokenizers get their chat template with a generation prompt."""
    if chat_template and getattr(tok, "chat_template", None):
        rendered = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False)
        return list(tok(rendered, add_special_tokens=False)["input_ids"])
    ids = tok.encode(text)
    return list(ids)


def eos_of(tok: Any, *models: Any) -> int | None:
    if tok is not None and getattr(tok, "eos_token_id", None) is not None:
        return int(tok.eos_token_id)
    for m in models:
        e = getattr(getattr(m, "generation_config", None), "eos_token_id", None) or getattr(getattr(m, "config", None), "eos_token_id", None)
        if isinstance(e, (list, tuple)):
            e = e[0] if e else None
        if e is not None:
            return int(e)
    return None


def resolve_max_new_tokens(value: int | None, *models: Any, fallback: int = 256) -> int:
    """Explicit value, else the first model's ``generation_config.max_new_tokens``, else ``fallback``."""
    if value is not None:
        return value
    for m in models:
        v = getattr(getattr(m, "generation_config", None), "max_new_tokens", None) or getattr(m, "zoo_max_new_tokens", None)
        if v:
            return int(v)
    return fallback


@dataclass
class GenerationOutput(ProcedureOutput):
    """What every text sampler returns (a :class:`registry.results.ProcedureOutput`: ``out.texts``,
    ``out["texts"]`` and ``out[1]`` are the same list; ``token_ids, texts, stats = out.to_tuple()``).

    Fields, one entry per row:

    * ``token_ids`` -- the new token ids (ending at EOS if one was produced; the prompt excluded);
    * ``texts`` -- the decoded new text, or ``None`` (not a key) when no tokenizer is known;
    * ``stats`` -- deterministic counters of the row (``new_tokens``, forward counts, ...).
    """

    token_ids: list[list[int]]
    texts: list[str] | None = None
    stats: list[dict[str, Any]] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.texts) if self.texts is not None else repr(self.token_ids)


def split_rows(out: GenerationOutput) -> list[GenerationOutput]:
    return [
        GenerationOutput([ids], None if out.texts is None else [out.texts[i]], [out.stats[i]] if out.stats else [])
        for i, ids in enumerate(out.token_ids)
    ]


def prompt_rows(prompt: Any = None, input_ids: Any = None) -> list[dict[str, Any]]:
    if input_ids is not None:
        rows = input_ids.tolist() if isinstance(input_ids, torch.Tensor) else input_ids
        if rows and isinstance(rows[0], int):
            rows = [rows]
        return [{"input_ids": [list(r)]} for r in rows]
    prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    return [{"prompt": [p]} for p in prompts]


class TextSampler(Procedure):
    """Shared plumbing of the text samplers: prompt handling, batch rows, model roles, CLI.

    * Prompted generation: ``sampler(prompt)`` / ``sampler(input_ids=...)``; each row is decoded with its
      own generator seeded by ``seed`` (row i of a batch equals row i alone).
    * Unconditional generation: ``sampler(num_samples=n)`` with neither prompt nor ids; every row starts
      from BOS only and the ``n`` rows are drawn one after the other from one generator seeded by ``seed``.
    * Per-row seeds (``per_row_seeds``): ``seed`` may be a list with one seed per row (per prompt, or ``n``
      unconditional rows); row j is then decoded with its own generator seeded ``seed[j]``, exactly as the
      one-row call with ``seed=seed[j]``. ``population_inputs(a, b)`` (what ``zoo sample`` draws): row i is
      the tokenizer's example prompt ``i % P`` when it has ``P`` of them, else an unconditional (BOS) row.
    * Model roles: a subclass names the roles it reads (``roles``); each role's model is looked up under
      the parameter ``<role>_role`` when the subclass's Params has it (so a spec may call its models
      anything), else under the role name itself.
    * Example inputs (conformance checks): the tokenizer's ``example_prompts`` if it has them, else
      BOS-only rows; the shared base has no task-specific default prompt.
    """

    batch_independent = True
    per_row_seeds = True
    roles: tuple[str, ...] = ()

    Cli = TextSamplerCli

    CliInputs = Cli

    def role(self, name: str) -> Any:
        """The model playing role ``name`` (key: ``params.<name>_role`` if that parameter exists)."""
        key = getattr(self.params, f"{name}_role", name)
        if key not in self.models:
            raise ValueError(f"{type(self).__name__}: no model for role {name!r} (looked up as {key!r}; "
                             f"models: {sorted(self.models)}); set the parameter {name}_role")
        return self.models[key]

    def _models_for_tokenizer(self) -> list[Any]:
        return list(self.models.values())

    def __call__(self, prompt: Sequences = None, *, seed: Seeds = 0, input_ids: Sequences = None,
                 num_samples: Rows = 1) -> GenerationOutput:
        """Decode each prompt row independently with its own generator seeded by ``seed``; without a prompt,
        draw ``num_samples`` unconditional rows (BOS only) from one generator seeded by ``seed``. A list
        ``seed`` gives row j its own generator seeded ``seed[j]`` (unconditional: ``len(seed)`` rows)."""
        eos = eos_of(self.tokenizer(), *self._models_for_tokenizer())
        outs, stats = [], []
        if prompt is None and input_ids is None:
            if isinstance(seed, (list, tuple)) and num_samples in (1, len(seed)):
                num_samples = len(seed)
            seeds = seed_list(seed, num_samples)
            if num_samples < 1:
                raise ValueError(f"num_samples must be >= 1, got {num_samples}")
            bos = self.bos_token_id()
            g = torch.Generator().manual_seed(seed) if seeds is None else None
            for j in range(num_samples):
                new, st = self.generate_row([bos], g if seeds is None else torch.Generator().manual_seed(seeds[j]), eos)
                outs.append(new)
                stats.append(st)
            return GenerationOutput(outs, self.decode(outs), stats)
        rows = self.prompts_to_ids(prompt, input_ids, getattr(self.params, "chat_template", True))
        seeds = seed_list(seed, len(rows)) or [seed] * len(rows)
        for ids, s in zip(rows, seeds):
            new, st = self.generate_row(ids, torch.Generator().manual_seed(s), eos)
            outs.append(new)
            stats.append(st)
        return GenerationOutput(outs, self.decode(outs), stats)

    def generate_row(self, prompt_ids: list[int], g: torch.Generator, eos: int | None) -> tuple[list[int], dict[str, Any]]:
        """New token ids for one prompt, and its counters."""
        raise NotImplementedError

    def tokenizer(self):
        if not hasattr(self, "_tok"):
            try:
                self._tok = find_tokenizer(*self._models_for_tokenizer())
            except (ValueError, OSError):
                self._tok = None
        return self._tok

    def bos_token_id(self) -> int:
        """BOS id for unconditional generation: the tokenizer's, else the models' config/generation config."""
        tok = self.tokenizer()
        if tok is not None and getattr(tok, "bos_token_id", None) is not None:
            return int(tok.bos_token_id)
        for m in self._models_for_tokenizer():
            for holder in (getattr(m, "generation_config", None), getattr(m, "config", None)):
                b = getattr(holder, "bos_token_id", None)
                if isinstance(b, int):
                    return b
        raise ValueError(f"{type(self).__name__}: unconditional generation needs a BOS token id (tokenizer or model "
                         "config); pass prompt= or input_ids=")

    def prompts_to_ids(self, prompt: Any = None, input_ids: Any = None, chat_template: bool = True) -> list[list[int]]:
        if input_ids is not None:
            rows = input_ids.tolist() if isinstance(input_ids, torch.Tensor) else input_ids
            if rows and isinstance(rows[0], int):
                rows = [rows]
            return [list(map(int, r)) for r in rows]
        if prompt is None:
            raise ValueError("give prompt= (str or list of str) or input_ids=")
        tok = self.tokenizer()
        if tok is None:
            raise ValueError("no tokenizer available; pass input_ids=")
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        return [encode_prompt(tok, p, chat_template) for p in prompts]

    def decode(self, rows: list[list[int]]) -> list[str] | None:
        tok = self.tokenizer()
        if tok is None:
            return None
        return [tok.decode(r, skip_special_tokens=True) for r in rows]

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        """The tokenizer's ``example_prompts`` (cycled), else ``batch_size`` BOS-only rows as ``input_ids``."""
        prompts = list(getattr(self.tokenizer(), "example_prompts", None) or [])
        if prompts:
            return {"prompt": [prompts[i % len(prompts)] for i in range(batch_size)]}
        return {"input_ids": [[self.bos_token_id()] for _ in range(batch_size)]}

    def population_inputs(self, start: int, stop: int) -> dict[str, Any]:
        """Row i: the tokenizer's example prompt ``i % P`` (``P`` of them), else an unconditional BOS row."""
        prompts = list(getattr(self.tokenizer(), "example_prompts", None) or [])
        if prompts:
            return {"prompt": [prompts[i % len(prompts)] for i in range(start, stop)]}
        return {"num_samples": stop - start}

    def input_rows(self, inputs):
        return prompt_rows(inputs.get("prompt"), inputs.get("input_ids"))

    def output_rows(self, outputs):
        return split_rows(outputs)

    def run_cli(self, inputs, seed: int) -> str:
        inputs = inputs if inputs is not None else self.Cli()
        prompt = inputs.prompt
        if prompt is None and not inputs.unconditional:
            prompt = next(iter(getattr(self.tokenizer(), "example_prompts", None) or []), None)
        if inputs.unconditional or prompt is None:
            out = self(seed=seed, num_samples=inputs.num_samples)
        else:
            out = self(seed=seed, prompt=prompt)
        lines = []
        for i, st in enumerate(out.stats):
            text = out.texts[i] if out.texts else repr(out.token_ids[i])
            lines += [text, summarize_stats(st)]
        return "\n".join(lines)


def summarize_stats(s: dict[str, Any]) -> str:
    parts = [f"new_tokens={s.get('new_tokens')}"]
    for k in ("dlm_forwards", "ar_forwards", "windows"):
        if k in s:
            parts.append(f"{k}={s[k]}")
    if s.get("windows"):
        parts.append(f"accepted/window={s['accepted_tokens'] / s['windows']:.2f}")
        parts.append(f"tokens/AR-forward={s['new_tokens'] / max(s['ar_forwards'], 1):.2f}")
    return " ".join(parts)


# ----------------------------------------------------------------------------- confidence decoding
def _confidence(probs: torch.Tensor, chosen: torch.Tensor, alg: str) -> torch.Tensor:
    if alg in ("low_confidence", "maskgit_plus"):
        return probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
    if alg == "topk_margin":
        top2 = probs.topk(2, dim=-1).values
        return top2[..., 0] - top2[..., 1]
    if alg == "entropy":
        return (probs * probs.clamp_min(1e-30).log()).sum(-1)  # = -H, higher is more confident
    raise ValueError(f"unknown confidence rule {alg!r}; one of {ALGS}")


def eos_finished(gen: torch.Tensor, eos_id: int | None, mask_id: int) -> bool:
    """Whether a generated region ``gen [L]`` is finished: an EOS is committed with no mask before it."""
    if eos_id is None:
        return False
    eos_pos = (gen == eos_id).nonzero()
    return bool(eos_pos.numel()) and not bool((gen[: int(eos_pos[0])] == mask_id).any())


def final_tokens(gen: list[int], eos_id: int | None, mask_id: int) -> list[int]:
    """The new tokens of a decoded region: cut after the first EOS, else with any leftover masks dropped."""
    if eos_id is not None and eos_id in gen:
        return gen[: gen.index(eos_id) + 1]
    return [t for t in gen if t != mask_id] if mask_id in gen else gen


@torch.no_grad()
def confidence_decode(
    denoiser: MaskedDenoiser,
    prompt_ids: list[int],
    gen_length: int,
    tokens_per_step: int = 2,
    block_length: int | None = None,
    alg: str = "entropy",
    temperature: float = 0.0,
    top_p: float = 1.0,
    eos_id: int | None = None,
    generator: torch.Generator | None = None,
    device: Any = "cpu",
    stop_at_eos: bool = True,
) -> tuple[list[int], dict[str, Any]]:
    """Standard DLM decoding of one prompt: ``gen_length`` masks after the prompt; semi-AR blocks of
    ``block_length`` (default: one block); in each step one denoiser forward, a proposal for every
    masked position of the block (argmax at ``temperature == 0``, else Gumbel-max on the tempered,
    top-p-truncated logits), and the ``tokens_per_step`` most confident proposals are committed.
    With ``stop_at_eos`` decoding ends early once an EOS is committed with no mask before it.
    Returns the new tokens (cut after the first EOS) and ``{"dlm_forwards": ..., "new_tokens": ...}``.
    """
    P = len(prompt_ids)
    mask = denoiser.mask_token_id
    x = torch.tensor([list(prompt_ids) + [mask] * gen_length], dtype=torch.long, device=device)
    block = block_length or gen_length
    n_blocks = -(-gen_length // block)
    forwards = 0
    for b in range(n_blocks):
        lo, hi = P + b * block, min(P + (b + 1) * block, P + gen_length)
        while True:
            masked = (x[0, lo:hi] == mask).nonzero().squeeze(-1) + lo
            if masked.numel() == 0:
                break
            logits = denoiser(x)[0, masked].float()
            forwards += 1
            if mask < logits.shape[-1]:
                logits[..., mask] = float("-inf")  # never propose the mask token itself
            if temperature > 0:
                lg = top_p_filter(logits / temperature, top_p)
                chosen = gumbel_max(lg, generator)
                probs = torch.softmax(lg, -1)
            else:
                probs = torch.softmax(logits, -1)
                chosen = probs.argmax(-1)
            conf = _confidence(probs, chosen, alg)
            k = min(tokens_per_step, masked.numel())
            pick = conf.topk(k).indices
            x[0, masked[pick]] = chosen[pick]
            if stop_at_eos and eos_finished(x[0, P:], eos_id, mask):
                break
        if stop_at_eos and eos_finished(x[0, P:], eos_id, mask):
            break
    new = final_tokens(x[0, P:].tolist(), eos_id, mask)
    return new, {"dlm_forwards": forwards, "new_tokens": len(new)}


class ConfidenceDecoding(TextSampler):
    """The standard masked-DLM decoding baseline (LLaDA low-confidence / Dream entropy & margin),
    ``tokens_per_step`` tokens per denoiser forward, optional semi-AR blocks. Model role: ``proposal``
    (its name in the spec: parameter ``proposal_role``)."""

    roles = ("proposal",)

    Params = ConfidenceDecodingParams

    def __init__(self, models, params, device="cpu", dtype=None):
        super().__init__(models, params, device, dtype)
        self.proposal = self.role("proposal")
        self.denoiser = MaskedDenoiser.wrap(self.proposal, params.mask_token_id, params.shift_logits)

    def _models_for_tokenizer(self) -> list[Any]:
        return [self.proposal]

    def generate_row(self, prompt_ids: list[int], g: torch.Generator, eos: int | None) -> tuple[list[int], dict[str, Any]]:
        p = self.params
        n_max = resolve_max_new_tokens(p.max_new_tokens, self.proposal)
        return confidence_decode(self.denoiser, prompt_ids, n_max, p.tokens_per_step, p.block_length,
                                 p.alg, p.temperature, p.top_p, eos, g, self.device, p.stop_at_eos)


# ----------------------------------------------------------------------------- a tiny denoiser and its losses
class TinyMaskedLM(torch.nn.Module):
    """A bidirectional Transformer encoder that predicts every position's token: the MDLM/LLaDA mask
    predictor for CPU toys. ``forward(ids, t=None) -> logits [B, L, V]``.

    Without ``time_conditioning`` it has no time input, as LLaDA (Nie et al. 2025, arXiv 2502.09992:
    the masked fraction is readable from the input itself). With it, a sinusoidal embedding of
    ``t in [0, 1]`` (one value per row) goes through a linear layer and is added at every position
    (MDLM's optional time conditioning, Sahoo et al. 2024, arXiv 2406.07524); ``t=None`` then means t = 0.
    """

    shift_logits = False

    def __init__(self, vocab_size: int, mask_token_id: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                 d_ff: int = 192, max_len: int = 64, time_conditioning: bool = False):
        super().__init__()
        from torch import nn

        self.mask_token_id = mask_token_id
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True,
                                           activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        # created last, and only when asked: a model without time input keeps its parameters and init
        self.time_proj = nn.Linear(d_model, d_model) if time_conditioning else None

    def time_embedding(self, t: torch.Tensor) -> torch.Tensor:
        """Sinusoidal features ``[B, d_model]`` of ``t [B]`` (frequencies 1 .. 1e4, as the Transformer's)."""
        d = self.tok.embedding_dim
        half = d // 2
        freqs = torch.exp(-torch.arange(half, dtype=torch.float32, device=t.device) * (torch.log(torch.tensor(1e4)) / max(half - 1, 1)))
        ang = t.float().reshape(-1, 1) * 1000.0 * freqs
        emb = torch.cat([ang.sin(), ang.cos()], -1)
        return torch.nn.functional.pad(emb, (0, d - emb.shape[-1]))

    def forward(self, input_ids: torch.Tensor, t: torch.Tensor | float | None = None) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.tok(input_ids) + self.pos(pos)[None]
        if self.time_proj is not None:
            tt = torch.zeros(input_ids.shape[0], device=input_ids.device) if t is None else torch.as_tensor(
                t, dtype=torch.float32, device=input_ids.device).reshape(-1).expand(input_ids.shape[0])
            h = h + self.time_proj(self.time_embedding(tt))[:, None]
        return self.head(self.norm(self.encoder(h)))


def mask_tokens(x0: torch.Tensor, t: torch.Tensor, mask_token_id: int, generator: torch.Generator | None = None,
                keep_prefix: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The absorbing forward process: each token of ``x0 [B, L]`` becomes ``mask_token_id`` independently
    with probability ``t [B, 1]`` (the first ``keep_prefix`` positions, e.g. a prompt, never). Returns
    ``(x_t, masked)``. One ``torch.rand(x0.shape)`` draw from ``generator``."""
    masked = torch.rand(x0.shape, generator=generator) < t
    if keep_prefix:
        masked[:, :keep_prefix] = False
    return torch.where(masked, torch.full_like(x0, mask_token_id), x0), masked


def masked_diffusion_loss(logits: torch.Tensor, x0: torch.Tensor, masked: torch.Tensor, t: torch.Tensor,
                          weighting: Literal["elbo", "none"] = "elbo", normalizer: float | None = None) -> torch.Tensor:
    """The MDLM/LLaDA objective: ``sum_{b,i} w(t_b) 1[masked_bi] (-log p(x0_bi | x_t)) / normalizer``.

    ``weighting="elbo"``: ``w(t) = 1/t``, the continuous-time ELBO of the linear masking schedule
    ``alpha_t = 1 - t`` (Sahoo et al. 2024, arXiv 2406.07524, eq. 10; LLaDA, arXiv 2502.09992, eq. 3);
    ``"none"``: plain cross-entropy on the masked positions. ``normalizer`` defaults to ``B * L`` (LLaDA
    divides by the sequence length, then averages over the batch). ``t`` is ``[B]`` or ``[B, 1]``.
    """
    if weighting not in ("elbo", "none"):
        raise ValueError(f"unknown weighting {weighting!r}; 'elbo' or 'none'")
    B, L = x0.shape
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x0, reduction="none")
    per_token = ce * masked
    if weighting == "elbo":
        # only masked positions are divided by t: an unmasked one (all of them at t = 0) stays 0, not 0/0 = NaN
        # (the divisor is made 1 there, not the quotient replaced, so the gradient stays finite too)
        per_token = per_token / torch.where(masked != 0, t.reshape(B, 1), torch.ones((), dtype=t.dtype))
    return per_token.sum() / (normalizer if normalizer is not None else B * L)


def kappa_schedule(s: torch.Tensor, power: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Discrete-flow-matching mixture schedule ``kappa(s) = s**power`` and its derivative (Gat et al. 2024,
    arXiv 2407.15595, polynomial schedulers): at time ``s`` a token is the data token with probability
    ``kappa(s)`` and the mask (source) otherwise, so ``s = 0`` is all masks and ``s = 1`` the data."""
    return s**power, power * s ** (power - 1)


def dfm_masked_loss(logits: torch.Tensor, x1: torch.Tensor, masked: torch.Tensor, s: torch.Tensor,
                    power: float = 1.0, weighting: Literal["elbo", "cross_entropy"] = "elbo",
                    normalizer: float | None = None) -> torch.Tensor:
    """The masked objective in discrete-flow-matching time (data at ``s = 1``): masked positions at time
    ``s`` have probability ``1 - kappa(s)``.

    ``weighting="elbo"``: ``kappa'(s) / (1 - kappa(s))`` per masked token, the generalized-KL / ELBO weight
    of mixture paths (Shaul et al. 2024, arXiv 2412.03487, eq. for the mixture path; for ``power = 1`` it
    is ``1 / (1 - s) = 1 / t`` with ``t = 1 - s``, i.e. exactly :func:`masked_diffusion_loss`);
    ``"cross_entropy"``: Gat et al.'s unweighted cross-entropy on masked tokens.
    """
    B = x1.shape[0]
    if weighting == "cross_entropy":
        return masked_diffusion_loss(logits, x1, masked, s, "none", normalizer)
    if weighting != "elbo":
        raise ValueError(f"unknown weighting {weighting!r}; 'elbo' or 'cross_entropy'")
    k, dk = kappa_schedule(s.reshape(B, 1).double(), power)
    w = (dk / (1.0 - k)).to(logits.dtype)
    # only masked positions carry the weight: at s = 1 (kappa = 1) it is infinite, and an unmasked position
    # (all of them at s = 1) must contribute 0, not 0 * inf = NaN (value and gradient)
    w = torch.where(masked != 0, w, torch.zeros((), dtype=w.dtype))
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x1, reduction="none")
    return ((ce * masked) * w).sum() / (normalizer if normalizer is not None else B * x1.shape[1])
