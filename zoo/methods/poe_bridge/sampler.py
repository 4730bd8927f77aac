"""The PoE-Bridge sampler over real models: a masked-diffusion LM (the proposal ``D``) drafts, an
autoregressive LM (the target ``A``) verifies.

Shi et al., "PoE-Bridge", ICML 2026, arXiv 2606.08048, Algorithm 1; repository
https://github.com/juntongshi48/poe-bridge (``poe_bridge_sample``, ``configs/base.yaml``,
``scripts/run_poe-bridge.sh``). Defaults are the paper's run script: w=0.3, K=4, n_low=1,
tau in [0.2, 0.7] annealed, V=32, M=256, top-p 0.95.

One *outer* iteration runs ``D`` once on ``[prefix || M masks]``. Verification then walks over that
lookahead in *elastic windows* of ``V`` positions: for each window, ``K`` lanes draft tokens by
Gumbel-max from ``q = softmax(l_D / tau_k)`` (top-p), ``A`` scores all lanes in one batched forward over
a shared KV cache, stage 1 accepts each lane's drafts with ``min(1, p_PoE/q)`` and corrects the first
rejection from the residual, stage 2 picks one lane (paper: multinomial on ``p_A/p_PoE``; repository:
argmax of the mean raw-logit difference), the lane's tokens are committed and the AR cache is reduced to
that lane and cropped to ``committed - 1`` positions (the KV of a correction token, computed from the
rejected draft, never stays). The next window reuses the same DLM forward only when the chosen lane
accepted the whole window with no EOS; otherwise the next outer iteration re-runs ``D``.

Departures (documented in docs/methods/poe-bridge.md):
* with ``accept_with_truncated_q`` (default) the acceptance ratio uses the top-p-truncated draft law
  that the drafts were actually drawn from, which keeps stage 1 exact for any top-p; ``False`` is the
  repository's behaviour (untruncated q);
* ``multinomial_exact`` weighs a lane by ``p_A / p_PoE^(tau_k)`` with the tempered bridge that
  actually proposed it (the paper's ``p_A / p_PoE`` when tau = 1);
* the repository force-accepts the first token when a draft contains EOS; here an accepted EOS simply
  ends the block (the rule stays exact);
* the AR cache always holds ``committed - 1`` positions (the last committed token is re-fed), so no
  "remembered bonus logit" is needed;
* ``top_p_order``: the nucleus is taken on the tempered draft law (default) or, as the repository's
  ``sample_with_gumbel`` does, on the untempered DLM logits before the lane temperature
  (``before_temperature``, used by the ``poe-bridge-repo`` sampler); see :func:`zoo.common.discrete.draft_logits`.

Discrete sampling comes from :mod:`zoo.common.discrete`, the AR cache helpers from :mod:`zoo.common.ar_cache`.
"""
from __future__ import annotations

from typing import Any

import torch

from zoo.common.ar_cache import (
    CacheFactory,
    ar_forward,
    cache_crop,
    cache_kwarg,
    cache_len,
    cache_repeat,
    cache_select,
    new_cache,
)
from zoo.common.discrete import categorical, draft_logits, gumbel_max, tempered
from zoo.common.masked_dlm import MaskedDenoiser, TextSampler, resolve_max_new_tokens

from .core import (
    exact_log_weights,
    normalized_weights,
    poe_logits,
    repo_energy,
    speculative_verify,
    temperature_ladder,
)
from .params import PoEBridgeSamplerParams


class PoEBridgeSampler(TextSampler):
    """PoE-Bridge decoding (paper Alg. 1). Model roles: ``proposal`` (masked-diffusion LM) and
    ``target`` (causal LM) sharing a tokenizer on the first ``vocab_limit`` ids; the role names are the
    parameters ``proposal_role`` / ``target_role``. ``cache_factory`` (a zero-argument callable returning
    a transformers ``Cache``) replaces the target's default ``DynamicCache``."""

    Params = PoEBridgeSamplerParams

    def __init__(self, models, params, device="cpu", dtype=None, cache_factory: CacheFactory | None = None):
        super().__init__(models, params, device, dtype)
        self.target = self.role("target")
        self.proposal = self.role("proposal")
        self.denoiser = MaskedDenoiser.wrap(self.proposal, params.mask_token_id, params.shift_logits)
        self.taus = temperature_ladder(params.n_lanes, params.n_low_temp, params.temp_low, params.temp_high, params.anneal_temp)
        self._cache_kw = cache_kwarg(self.target)
        self.cache_factory = cache_factory
        self.trace_hook = None  # tests: called after every window with (committed ids, cache, stats)

    def clone_kwargs(self) -> dict[str, Any]:
        return {"cache_factory": self.cache_factory}  # a per-call override keeps the caller's cache

    def _models_for_tokenizer(self) -> list[Any]:
        return [self.target, self.proposal]  # the AR target's tokenizer (Dream's is remote code)

    def native(self) -> Any:
        """None: ``generate()`` cannot run PoE-Bridge (its drafts come from the masked-diffusion proposal
        and are verified in lanes); the AR target alone decodes natively through ``ar-decoding``'s
        ``pipe.native`` (:class:`~zoo.methods.poe_bridge.native.ARGenerate`)."""
        raise ValueError("PoE-Bridge has no native transformers generate() (its drafts come from the masked-diffusion "
                         "proposal); the AR target alone: ar-decoding's pipe.native")

    def _vocab(self, dlm_vocab: int) -> int:
        """The shared vocabulary prefix: ``vocab_limit`` or the smaller of the two models' vocabularies."""
        ar_vocab = getattr(getattr(self.target, "config", None), "vocab_size", None) or dlm_vocab
        lim = min(dlm_vocab, int(ar_vocab))
        return min(lim, self.params.vocab_limit) if self.params.vocab_limit else lim

    @torch.no_grad()
    def generate_row(self, prompt_ids: list[int], g: torch.Generator, eos: int | None) -> tuple[list[int], dict[str, Any]]:
        p = self.params
        if not prompt_ids:
            raise ValueError("PoE-Bridge needs a non-empty prompt")
        dev = self.device
        K = p.n_lanes
        taus = torch.tensor(self.taus, dtype=torch.float32, device=dev)
        x = list(prompt_ids)
        P = len(x)
        L = P + resolve_max_new_tokens(p.max_new_tokens, self.target, self.proposal)
        mask_id = self.denoiser.mask_token_id
        cache = new_cache(self.target, self.cache_factory)
        st: dict[str, Any] = {"dlm_forwards": 0, "ar_forwards": 0, "windows": 0, "accepted_tokens": 0,
                              "corrections": 0, "accepted_per_window": [], "emitted_per_window": [], "lanes_chosen": []}
        done = False
        while len(x) < L and not done:
            c = len(x)
            M = min(p.max_lookahead, L - c)
            dl_all = self.denoiser(torch.tensor([x + [mask_id] * M], device=dev))[0, c : c + M].float()
            dl_all = dl_all[..., : self._vocab(dl_all.shape[-1])]
            st["dlm_forwards"] += 1
            off = 0
            while True:
                c = len(x)
                Wn = min(p.verify_window, M - off, L - c)
                ld = dl_all[off : off + Wn]
                # AR forward on all lanes (shared prefix cache repeated K times)
                m = cache_len(cache)
                feed = torch.tensor(x[m:c], dtype=torch.long, device=dev)
                # drafts: Gumbel-max per lane temperature with top-p on the draft logits (order: top_p_order)
                q_logits = draft_logits(ld.unsqueeze(0), taus, p.top_p, p.top_p_order)
                drafts = gumbel_max(q_logits, g)  # [K, Wn]
                inp = torch.cat([feed.unsqueeze(0).expand(K, -1), drafts], 1)
                cache_repeat(cache, K)
                logits = ar_forward(self.target, inp, cache, self._cache_kw)
                st["ar_forwards"] += 1
                f = feed.numel()
                la = logits[:, f - 1 : f - 1 + Wn].float()
                la, ldv = la[..., : ld.shape[-1]], ld
                # stage 1: D -> PoE at each lane's temperature
                plog = torch.log_softmax(poe_logits(ldv.unsqueeze(0).expand(K, -1, -1), la, p.mixture_weight, taus), -1)
                q_acc = torch.softmax(q_logits, -1) if p.accept_with_truncated_q else torch.softmax(
                    tempered(ldv.unsqueeze(0), taus), -1)
                if p.stage1 == "speculative":
                    res = speculative_verify(drafts, q_acc, plog.exp(), g, eos)
                else:  # direct D -> A importance sampling: keep every draft, weigh lanes by p_A / q
                    res = speculative_verify(drafts, q_acc, q_acc, g, eos)  # q/q = 1: accepts all, cuts at EOS
                    plog = torch.log(q_acc.clamp_min(1e-300))
                # stage 2: choose a lane
                tok = res.tokens.clamp_min(0)
                if K == 1:
                    k = 0
                elif p.lane_choice == "multinomial_exact":
                    lw = exact_log_weights(torch.log_softmax(la, -1).gather(-1, tok.unsqueeze(-1)).squeeze(-1),
                                           plog.gather(-1, tok.unsqueeze(-1)).squeeze(-1), res.n_emitted)
                    k = int(categorical(normalized_weights(lw).unsqueeze(0), g)[0])
                else:
                    e = repo_energy(la.gather(-1, tok.unsqueeze(-1)).squeeze(-1),
                                    ldv.unsqueeze(0).expand(K, -1, -1).gather(-1, tok.unsqueeze(-1)).squeeze(-1),
                                    res.n_emitted, p.length_normalize)
                    k = int(e.argmax())
                n = int(res.n_emitted[k])
                x.extend(res.tokens[k, :n].tolist())
                # AR KV-cache hygiene: keep the chosen lane, drop everything from the last committed token on
                cache_select(cache, k)
                cache_crop(cache, len(x) - 1)
                st["windows"] += 1
                st["accepted_tokens"] += int(res.n_accepted[k])
                st["corrections"] += int(res.corrected[k])
                st["accepted_per_window"].append(int(res.n_accepted[k]))
                st["emitted_per_window"].append(n)
                st["lanes_chosen"].append(k)
                if self.trace_hook is not None:
                    self.trace_hook(list(x), cache, st)
                if bool(res.eos_hit[k]):
                    done = True
                    break
                off += Wn
                full = (not bool(res.corrected[k])) and n == Wn
                if not (full and len(x) < L and off < M):
                    break
        new = x[P:L]
        if eos is not None and eos in new:
            new = new[: new.index(eos) + 1]
        st["new_tokens"] = len(new)
        return new, st
