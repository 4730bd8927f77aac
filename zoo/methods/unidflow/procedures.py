"""UniDFlow's samplers: ``understand`` (image -> caption), ``generate`` (caption -> image) and ``edit``
(instruction + source image -> image), all the same DFM sampler (:func:`~.dfm.dfm_sample`) on one model,
differing in which slots are condition and which are target; the router mixes the adapters per row and step."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Sequence

import torch
from pydantic import Field

from registry.contract import Procedure, seed_list, summarize
from registry.limits import Batch, Bound, Rows, Seeds
from registry.results import ProcedureOutput, per_call
from zoo.common.out_files import write_json

from .dfm import dfm_sample
from .params import UniDFlowSamplerCli, UniDFlowSamplerParams, caption_words
from .world import COLOURS, LAYOUT, TOK, all_captions, all_scenes, caption_of, caption_tuple, encode, parse, render

__all__ = ["UniDFlowSampler", "UniDFlowOutput", "caption_text", "parse_caption", "grid_text"]


def caption_text(ids: Sequence[int]) -> str:
    return " ".join(TOK.vocab[int(i)] for i in ids)


def parse_caption(text: str) -> list[int]:
    """``"red s2 tl"`` -> caption ids (ValueError naming the bad word: :func:`~.params.caption_words`)."""
    return [TOK.stoi[w] for w in caption_words(text)]


def grid_text(ids: Sequence[int]) -> str:
    """4 rows of colour initials (``r g b y``)."""
    letters = {tid: c[0] for tid, c in zip(TOK.image_ids, COLOURS)}
    cells = [letters.get(int(i), "?") for i in ids]
    return "/".join("".join(cells[4 * r: 4 * r + 4]) for r in range(4))


@dataclass
class UniDFlowOutput(ProcedureOutput):
    """``sequences`` ``[B, 37]``: the full generated layouts; ``captions`` (understanding: the generated caption
    text; generation/editing: the condition's); ``images`` ``[B, 16]``: image token ids of the generated (or given)
    image; ``grids`` as text; ``valid`` -- the rule check of each row (understanding: the caption is the
    image's; generation: faithful to the caption; editing: the exact recoloured source); ``alphas`` -- the
    router's α per step (first row), or None for the shared adapter (one value per call: ``per_call``)."""

    sequences: torch.Tensor
    captions: list[str]
    images: torch.Tensor
    grids: list[str]
    valid: list[bool]
    alphas: list[float] | None = per_call()


class UniDFlowSampler(Procedure):
    """One of the three tasks with ``steps`` DFM steps at ``temperature`` (0: greedy).

    Inputs: ``understand`` -- ``images`` (``[B, 16]`` image token ids, or scene indices via ``scenes``);
    ``generate`` -- ``captions`` (texts ``"red s2 tl"``); ``edit`` -- ``images`` + ``colours`` (colour words).
    Without inputs, ``num_samples`` rows cycle through the world's scenes / captions.

    ``seed`` may be a list, one seed per row (``per_row_seeds``): row j is then drawn with its own generator
    seeded ``seed[j]``, exactly as the one-row call with that seed. ``population_inputs(a, b)`` (what
    ``zoo sample`` draws): row i is caption ``i % 36`` (generate) or scene ``7 i % 348`` (understand, edit)."""

    kind = "sampler"
    batch_independent = True
    per_row_seeds = True

    Params = UniDFlowSamplerParams

    def __init__(self, models, params, device="cpu", dtype=None):
        super().__init__(models, params, device, dtype)
        self.model = self.models[params.model_role]

    def _rows(self, captions=None, images=None, colours=None, scenes=None, num_samples: int | None = None) -> list[list[int]]:
        task = self.params.task
        if scenes is not None:
            images = [render(all_scenes()[int(i)]) for i in scenes]
        if task == "generate":
            if captions is None:
                caps = all_captions()
                captions = [caption_text(caption_of_tuple(caps[i % len(caps)])) for i in range(num_samples or 1)]
            return [encode("gen", text=parse_caption(c)) for c in captions]
        if images is None:
            sc = all_scenes()
            images = [render(sc[(7 * i) % len(sc)]) for i in range(num_samples or 1)]
        images = [list(map(int, im)) for im in images]
        if task == "understand":
            return [encode("und", image=im) for im in images]
        if colours is None:
            colours = []
            for im in images:
                s = parse(im)
                colours.append(COLOURS[next(c for c in range(4) if s is None or (c != s.bg and c != s.fg))])
        return [encode("edit", source=im, instr=TOK.stoi[c]) for im, c in zip(images, colours)]

    def __call__(self, *, seed: Seeds = 0, captions: Annotated[Sequence[str], Bound("rows"), Bound("length", "longest")] | None = None,
                 images: Batch = None, colours: Annotated[Sequence[str], Bound("rows")] | None = None,
                 scenes: Annotated[Sequence[Annotated[int, Field(ge=0, le=2**31 - 1)]], Bound("rows")] | None = None,
                 num_samples: Rows | None = None) -> UniDFlowOutput:
        p = self.params
        given = not (captions is None and images is None and scenes is None)
        if not given and num_samples is None and isinstance(seed, (list, tuple)):
            num_samples = len(seed)
        rows = self._rows(captions, images, colours, scenes, num_samples)
        seeds = seed_list(seed, len(rows))
        task = {"understand": "und", "generate": "gen", "edit": "edit"}[p.task]
        dev = next(self.model.parameters()).device
        cond = torch.tensor(rows, dtype=torch.long, device=dev)
        alpha = None if p.alpha is None else torch.full((cond.shape[0],), p.alpha, device=dev)
        if seeds is not None:
            # one seed per row: each row with its own generator (row j = the one-row call with seeds[j])
            outs = [dfm_sample(self.model, cond[i:i + 1], task, p.steps, p.temperature, torch.Generator().manual_seed(s),
                               alpha=None if alpha is None else alpha[i:i + 1]) for i, s in enumerate(seeds)]
        elif not given:
            g = torch.Generator().manual_seed(seed)
            # unconditional call: the rows are one batch drawn from one generator seeded by ``seed``
            outs = [dfm_sample(self.model, cond, task, p.steps, p.temperature, g, alpha=alpha)]
        else:
            # given inputs: each row with its own generator seeded by ``seed`` (row i of a batch = row i alone)
            outs = [dfm_sample(self.model, cond[i:i + 1], task, p.steps, p.temperature, torch.Generator().manual_seed(seed),
                               alpha=None if alpha is None else alpha[i:i + 1]) for i in range(cond.shape[0])]
        seq = torch.cat(outs).cpu()
        if task == "und":
            imgs = seq[:, LAYOUT.image]
            valid = [(s := parse(im)) is not None and caption_of(s) == seq[i, LAYOUT.text].tolist() for i, im in enumerate(imgs.tolist())]
        else:
            imgs = seq[:, LAYOUT.image]
            valid = []
            for i, im in enumerate(imgs.tolist()):
                if task == "gen":
                    s = parse(im)
                    valid.append(s is not None and caption_of(s) == seq[i, LAYOUT.text].tolist())
                else:
                    src = parse(seq[i, LAYOUT.source].tolist())
                    colour = TOK.colour_ids.index(int(seq[i, LAYOUT.instr]))
                    tgt = None if src is None else (None if colour == src.bg else render(type(src)(colour, src.bg, src.size, src.r, src.c)))
                    valid.append(tgt is not None and im == tgt)
        alphas = None
        if not getattr(self.model, "shared", False):
            with torch.no_grad():
                k = torch.tensor([("und", "gen", "edit").index(task)] * p.steps)
                alphas = self.model.alpha((torch.arange(p.steps) / p.steps).to(dev), k.to(dev)).tolist() if p.alpha is None else [p.alpha] * p.steps
        caps = [caption_text(s[LAYOUT.text].tolist()) if task != "edit" else f"recolour {TOK.vocab[int(s[LAYOUT.instr])]}" for s in seq]
        return UniDFlowOutput(sequences=seq, captions=caps, images=imgs, grids=[grid_text(im) for im in imgs.tolist()], valid=valid, alphas=alphas)

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        rows = self._rows(num_samples=batch_size)
        if self.params.task == "generate":
            return {"captions": [caption_text(r[LAYOUT.text]) for r in rows]}
        if self.params.task == "understand":
            return {"images": [r[LAYOUT.image] for r in rows]}
        return {"images": [r[LAYOUT.source] for r in rows], "colours": [TOK.vocab[r[LAYOUT.instr]] for r in rows]}

    def population_inputs(self, start: int, stop: int) -> dict[str, Any]:
        if self.params.task == "generate":
            caps = all_captions()
            return {"captions": [caption_text(caption_of_tuple(caps[i % len(caps)])) for i in range(start, stop)]}
        sc = all_scenes()
        return {"scenes": [(7 * i) % len(sc) for i in range(start, stop)]}

    CliInputs = UniDFlowSamplerCli

    def run_cli(self, inputs: Any, seed: int) -> str:
        """``zoo run unidflow --caption "red 2 tl" --n 4 --out rows.json``: one row per line (the condition, the
        4x4 grid as colour initials, whether it passes the world's rule), the pass rate and the router's alpha."""
        ci = inputs if inputs is not None else self.CliInputs()
        if ci.caption is not None and self.params.task != "generate":
            raise ValueError(f"--caption is for the generate task; this sampler runs {self.params.task}")
        out = self(seed=seed, captions=[ci.caption] * ci.n) if ci.caption is not None else self(seed=seed, num_samples=ci.n)
        task = self.params.task
        head = f"{task}: {len(out.valid)} rows, {self.params.steps} DFM steps at temperature {self.params.temperature:g} ({self.params.model_role})"
        rule = {"understand": "caption matches the image", "generate": "image faithful to the caption",
                "edit": "the exact recoloured source"}[task]
        lines = [head, summarize(out), f"  rows ({'condition' if task != 'understand' else 'caption'} -> grid, {rule}):"]
        lines += [f"    {c:<16} {g}  {'ok' if v else 'WRONG'}" for c, g, v in zip(out.captions, out.grids, out.valid)]
        lines.append(f"  passed: {sum(out.valid)} of {len(out.valid)}")
        if out.alphas:
            lines.append(f"  router alpha per step (1 = understanding adapter): {', '.join(f'{a:.2f}' for a in out.alphas)}")
        if ci.out:
            rows = [{"caption": c, "grid": g, "valid": v, "image": im} for c, g, v, im in zip(out.captions, out.grids, out.valid, out.images.tolist())]
            lines.append(f"  wrote {write_json(ci.out, {'task': task, 'seed': seed, 'rows': rows, 'alphas': out.alphas})}")
        return "\n".join(lines)

    def input_rows(self, inputs):
        n = len(inputs.get("captions") or inputs.get("images"))
        return [{k: v[i:i + 1] for k, v in inputs.items()} for i in range(n)]

    def output_rows(self, out: UniDFlowOutput) -> list[UniDFlowOutput]:
        return [UniDFlowOutput(sequences=out.sequences[i:i + 1], captions=out.captions[i:i + 1], images=out.images[i:i + 1],
                               grids=out.grids[i:i + 1], valid=out.valid[i:i + 1], alphas=out.alphas) for i in range(len(out.captions))]


def caption_of_tuple(c: tuple[int, int, int]) -> list[int]:
    return [TOK.colour_ids[c[0]], TOK.size_ids[c[1]], TOK.bucket_ids[c[2]]]
