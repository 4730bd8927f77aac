"""The note's shapes-and-captions world (``/work/shared/methods/unidflow.md`` section 6), rule-checkable.

* An *image* is a 4x4 grid over 4 colour tokens: a filled square of one colour (size 1-3, top-left cell
  ``(r, c)``) on a background of another colour.
* A *caption* is 3 text tokens: the square's colour word, its size, and the quadrant bucket of its top-left
  cell (``tl tr bl br``: row < 2 is top, column < 2 is left). Captions do not name the background, so one
  caption has several valid images (what the diversity metric counts).
* An *edit* is ``recolour <colour word>``: the same scene with the square recoloured (never to the background).

Every image parses back to exactly one scene (:func:`parse`): the square's cells form a full square and the
rest is one other colour (the complement of a square of size <= 3 in a 4x4 grid is never a square), so
understanding, generation faithfulness and editing correctness are exact rules.

One sequence layout (length :data:`SEQ_LEN`) for every task over a joint vocabulary of text and image tokens::

    [task] [text x3] [instr] [source image x16] [image x16]

understanding: image given, text masked; generation: text given, image masked; editing: instruction and
source image given, image masked. Unused slots hold ``<pad>``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

from zoo.common.toy_text import SymbolTokenizer

from .params import BUCKETS, COLOURS, SIZES

__all__ = [
    "COLOURS", "TASKS", "SIZE", "SEQ_LEN", "Scene", "all_scenes", "all_captions", "caption_of", "parse", "render", "tokenizer",
    "Layout", "LAYOUT", "encode", "target_slice", "faithful", "edit_target", "preference_pair",
]

TASKS = ("und", "gen", "edit")
SIZE = 4  # grid side


class Layout:
    """Slot positions of the shared sequence layout."""

    task = 0
    text = slice(1, 4)
    instr = 4
    source = slice(5, 21)
    image = slice(21, 37)


LAYOUT = Layout()
SEQ_LEN = 37


def tokenizer() -> SymbolTokenizer:
    """``<pad> <bos> <eos> <mask>``, image tokens ``#red #green #blue #yellow``, colour words, sizes, buckets,
    ``<und> <gen> <edit> <txt> <img>`` (the last two: the unimodal pre-training formats)."""
    symbols = [f"#{c}" for c in COLOURS] + list(COLOURS) + [f"s{s}" for s in SIZES] + list(BUCKETS)
    symbols += [f"<{t}>" for t in TASKS] + ["<txt>", "<img>"]
    tok = SymbolTokenizer(symbols)
    tok.image_ids = tuple(tok.stoi[f"#{c}"] for c in COLOURS)
    tok.colour_ids = tuple(tok.stoi[c] for c in COLOURS)
    tok.size_ids = tuple(tok.stoi[f"s{s}"] for s in SIZES)
    tok.bucket_ids = tuple(tok.stoi[b] for b in BUCKETS)
    tok.task_ids = {t: tok.stoi[f"<{t}>"] for t in (*TASKS, "txt", "img")}
    return tok


TOK = tokenizer()


@dataclass(frozen=True, order=True)
class Scene:
    """A square of colour ``fg`` and side ``size`` at top-left ``(r, c)`` on background ``bg`` (colour indices)."""

    fg: int
    bg: int
    size: int
    r: int
    c: int

    @property
    def caption(self) -> tuple[int, int, int]:
        """(colour index, size index, bucket index)."""
        return (self.fg, self.size - 1, 2 * (self.r >= 2) + (self.c >= 2))


def all_scenes() -> list[Scene]:
    """Every valid scene (4 x 3 colours x (16 + 9 + 4) positions = 348)."""
    out = []
    for fg, bg in itertools.permutations(range(4), 2):
        for size in (1, 2, 3):
            for r in range(SIZE - size + 1):
                for c in range(SIZE - size + 1):
                    out.append(Scene(fg, bg, size, r, c))
    return out


def all_captions() -> list[tuple[int, int, int]]:
    """The captions some scene has (4 colours x 9 (size, bucket) pairs = 36)."""
    return sorted({s.caption for s in all_scenes()})


def render(scene: Scene) -> list[int]:
    """The 16 image tokens (row-major) of a scene."""
    grid = [scene.bg] * (SIZE * SIZE)
    for i in range(scene.r, scene.r + scene.size):
        for j in range(scene.c, scene.c + scene.size):
            grid[i * SIZE + j] = scene.fg
    return [TOK.image_ids[k] for k in grid]


_BY_IMAGE = None


def parse(image: Sequence[int]) -> Scene | None:
    """The unique scene whose rendering is ``image`` (16 token ids), or None if it is not a valid scene."""
    global _BY_IMAGE
    if _BY_IMAGE is None:
        _BY_IMAGE = {tuple(render(s)): s for s in all_scenes()}
    return _BY_IMAGE.get(tuple(int(x) for x in image))


def caption_of(scene: Scene) -> list[int]:
    """The 3 caption token ids of a scene."""
    f, s, b = scene.caption
    return [TOK.colour_ids[f], TOK.size_ids[s], TOK.bucket_ids[b]]


def caption_tuple(ids: Sequence[int]) -> tuple[int, int, int] | None:
    """(colour, size, bucket) indices of 3 caption token ids, None if any token is out of its slot's set."""
    try:
        return (TOK.colour_ids.index(int(ids[0])), TOK.size_ids.index(int(ids[1])), TOK.bucket_ids.index(int(ids[2])))
    except ValueError:
        return None


def faithful(caption: Sequence[int], image: Sequence[int]) -> bool:
    """Generation rule: ``image`` is a valid scene whose caption is ``caption``."""
    s = parse(image)
    return s is not None and caption_of(s) == [int(x) for x in caption]


def edit_target(scene: Scene, colour: int) -> Scene | None:
    """The scene after ``recolour colour`` (None when it is the background colour: not a valid instruction)."""
    if colour == scene.bg:
        return None
    return Scene(colour, scene.bg, scene.size, scene.r, scene.c)


def encode(task: str, *, text: Sequence[int] | None = None, image: Sequence[int] | None = None,
           source: Sequence[int] | None = None, instr: int | None = None) -> list[int]:
    """One sequence of :data:`SEQ_LEN` ids in the shared layout (missing slots are ``<pad>``)."""
    seq = [TOK.pad_token_id] * SEQ_LEN
    seq[LAYOUT.task] = TOK.task_ids[task]
    if text is not None:
        seq[LAYOUT.text] = list(text)
    if instr is not None:
        seq[LAYOUT.instr] = instr
    if source is not None:
        seq[LAYOUT.source] = list(source)
    if image is not None:
        seq[LAYOUT.image] = list(image)
    return seq


def target_slice(task: str) -> slice:
    """The positions a task generates: the text for understanding, the image otherwise."""
    return LAYOUT.text if task in ("und", "txt") else LAYOUT.image


def example(task: str, scene: Scene, colour: int | None = None) -> list[int]:
    """The full (unmasked) training sequence of one example."""
    if task == "und":
        return encode("und", text=caption_of(scene), image=render(scene))
    if task == "gen":
        return encode("gen", text=caption_of(scene), image=render(scene))
    if task == "edit":
        tgt = edit_target(scene, colour)
        if tgt is None:
            raise ValueError("recolour to the background colour is not an edit")
        return encode("edit", instr=TOK.colour_ids[colour], source=render(scene), image=render(tgt))
    if task == "txt":
        return encode("txt", text=caption_of(scene))
    if task == "img":
        return encode("img", image=render(scene))
    if task == "pair":
        return encode("img", text=caption_of(scene), image=render(scene))
    raise ValueError(f"unknown task {task!r}; one of {TASKS + ('txt', 'img')}")


def random_examples(task: str, n: int, g: torch.Generator, scenes: Sequence[Scene] | None = None) -> torch.Tensor:
    """``n`` random training sequences of ``task`` (scenes uniform over ``scenes``; edit colours uniform over
    the non-background colours), ``[n, SEQ_LEN]`` long."""
    scenes = list(scenes or all_scenes())
    idx = torch.randint(0, len(scenes), (n,), generator=g).tolist()
    cols = torch.randint(0, 3, (n,), generator=g).tolist()
    rows = []
    for i, k in zip(idx, cols):
        s = scenes[i]
        colour = [c for c in range(4) if c != s.bg][k]
        rows.append(example(task, s, colour))
    return torch.tensor(rows, dtype=torch.long)


def violate_one(scene: Scene, g: torch.Generator) -> Scene:
    """A scene whose caption differs from ``scene``'s in exactly one attribute (colour, size or bucket),
    with the same background: the automatic loser of a preference pair."""
    cands = [s for s in all_scenes() if s.bg == scene.bg and sum(a != b for a, b in zip(s.caption, scene.caption)) == 1]
    return cands[int(torch.randint(0, len(cands), (1,), generator=g))]


def preference_pair(scene: Scene, g: torch.Generator, task: str = "gen") -> tuple[list[int], list[int]]:
    """(winner, loser) sequences under a byte-identical condition.

    ``gen``: condition = the caption of ``scene``; the winner's image satisfies it, the loser's violates exactly
    one attribute. ``edit``: condition = ``scene`` as the reference (source) image + a recolour instruction
    (uniform over the non-background colours); the winner is the exact edit, the loser the edit of a scene that
    differs from it in exactly one caption attribute (same background)."""
    loser = violate_one(scene, g)
    if task == "gen":
        cap = caption_of(scene)
        return encode("gen", text=cap, image=render(scene)), encode("gen", text=cap, image=render(loser))
    if task != "edit":
        raise ValueError(f"preference pairs are 'gen' or 'edit', got {task!r}")
    colour = [c for c in range(4) if c != scene.bg][int(torch.randint(0, 3, (1,), generator=g))]
    win = edit_target(scene, colour)
    lose = violate_one(win, g)
    cond = dict(instr=TOK.colour_ids[colour], source=render(scene))
    return encode("edit", image=render(win), **cond), encode("edit", image=render(lose), **cond)


def shared_condition(w: Iterable[int], l: Iterable[int], task: str = "gen") -> bool:
    """Whether two sequences of a pair carry a byte-identical condition (every position outside the target)."""
    w, l = list(w), list(l)
    tgt = set(range(SEQ_LEN)[target_slice(task)])
    return all(a == b for i, (a, b) in enumerate(zip(w, l)) if i not in tgt)
