"""``zoo report --out site/``: a static HTML catalog of the specs, to browse rather than read.

* ``index.html``: one row per spec: title, task, the verdict (the README's "measured here" summary of what
  reproduced), the last ``zoo check`` of its reproduced metrics, and the variants that fit the machine
  that wrote the report;
* ``<spec>.html``: the spec's header (paper, task, tags, summary), its variants and where they fit, its
  models and procedures, the paper-vs-measured table (the paper's numbers, ours with tolerance and the
  command that reproduces them, the last value ``zoo check`` measured with its provenance: date, machine,
  package versions; PASS/FAIL recomputed from the value and the spec's tolerance, never read from the
  store), its card rendered from Markdown, and the benchmark figures (the card's PNGs, copied);
* ``style.css``; ``figures/<spec>/`` the copied images.

No server, no network, no JavaScript: the pages are files that open from disk, and nothing they load
lies outside the folder. It works from a wheel: the cards and figures ship in the data package
``zoo_docs`` (the checkout's ``docs/``); a plugin's cards are found through its spec's ``docs:`` path.

Spec text is untrusted: every value from a spec is HTML-escaped, and cards are rendered with raw HTML
disabled (``<script>`` in a card is shown as text; ``javascript:`` links are not links).
"""
from __future__ import annotations

import html
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from registry.catalog import Entry
from registry.errors import ZooError
from registry.files import folder_in_place

MARKER = ".zoo-report"
IMAGE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif")


def _checkout_root() -> Path | None:
    """The checkout the built-in specs come from, when it holds the README beside the shipped cards (an editable
    install: :func:`registry.cards.shipped_docs` is its ``docs/``); ``None`` from a wheel."""
    from registry.cards import shipped_docs

    docs = shipped_docs()
    return docs.parent if docs is not None and docs.name == "docs" and (docs.parent / "README.md").is_file() else None


CSS = """
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --bg-alt: #f6f8fa; --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; }
* { box-sizing: border-box; }
body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg); margin: 0; }
header.top { background: #24292f; color: #fff; padding: .6em 1.5em; }
header.top a { color: #fff; text-decoration: none; font-weight: 600; }
main { max-width: 1200px; margin: 0 auto; padding: 1em 1.5em 4em; }
h1 { font-size: 1.7em; margin: .4em 0 .2em; } h2 { border-bottom: 1px solid var(--line); padding-bottom: .2em; margin-top: 1.6em; }
.sub { color: var(--muted); margin: 0 0 1em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; display: block; overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid var(--line); padding: .3em .6em; vertical-align: top; text-align: left; }
th { background: var(--bg-alt); }
tbody tr:nth-child(even) td { background: #fbfcfd; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 90%; }
pre { background: var(--bg-alt); padding: .8em; overflow-x: auto; border-radius: 6px; }
.PASS { color: var(--ok); font-weight: 600; } .FAIL { color: var(--bad); font-weight: 600; } .never { color: var(--muted); }
.fits { color: var(--ok); } .nofit { color: var(--muted); } .warn { color: var(--warn); }
.prov { color: var(--muted); font-size: 85%; display: block; }
.card { border-top: 3px solid var(--line); margin-top: 2em; }
.card img, figure img { max-width: 100%; height: auto; }
figure { margin: 1em 0; } figcaption { color: var(--muted); font-size: 90%; }
.tag { display: inline-block; background: var(--bg-alt); border: 1px solid var(--line); border-radius: 1em; padding: 0 .6em; margin: 0 .2em .2em 0; font-size: 85%; }
"""


@dataclass
class SpecPage:
    """What the index needs from one spec's page."""

    name: str
    title: str
    task: str
    file: str
    checked: str
    checked_class: str
    fits: str


def esc(value: Any) -> str:
    """HTML-escaped text (quotes too): every value that comes from a spec goes through here."""
    return html.escape(str(value), quote=True)


def fit_here(spec: Any, entry: Entry, variant: str, machine: Any) -> tuple[str, str | None]:
    """A variant's fit on ``machine`` and its style (``ok``, ``dim``, ``warn``): what `zoo show` and the report
    print. ``machine=None``: no hardware verdict, only the variant's status and offline gaps."""
    from registry.build import offline_gaps
    from registry.hardware import fits

    hw = spec.hardware[variant]
    fit, style = "", None
    if machine is not None:
        ok, why = fits(hw, machine)
        fit, style = ("fits", "ok") if ok else (f"does not fit: {why}", "dim")
    if hw.status == "needs-training":
        fit, style = f"needs-training (recipe {hw.recipe})" + (f": {hw.reason}" if hw.reason else "") + (f"; {fit}" if fit else ""), "warn"
    elif hw.status == "declared-only":
        fit, style = f"declared-only: {hw.reason}", "dim"
    elif (gap := offline_gaps(spec, variant, entry.path.parent, str(entry.path))) is not None:
        fit, style = (f"{fit}; {gap}" if fit else gap), "warn"
    return fit, style


# ----------------------------------------------------------------------------- cards
def card_file(entry: Entry) -> Path | None:
    """The spec's card: its ``docs:`` path relative to the spec file (:func:`registry.files.card_path`: confined to
    the spec's folder tree and the shipped cards; ``zoo validate`` reports one that does not resolve)."""
    from registry.cards import card_path
    from registry.loader import origin_dir

    spec = entry.spec
    if spec is None or not spec.docs:
        return None
    return card_path(entry.path, spec.docs, origin_dir(str(entry.path), ("docs",), Path(entry.path).parent))[0]


def _slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


class CardRenderer:
    """Markdown to HTML with raw HTML off; images copied into the site, links to other cards pointed at
    their pages, relative links to files the site does not hold shown as text, headings given GitHub's anchors."""

    def __init__(self, out: Path, card_pages: dict[Path, str]) -> None:
        from markdown_it import MarkdownIt

        self.md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
        self.out, self.card_pages = out, card_pages
        self.copied: dict[Path, str] = {}
        self.missing: list[str] = []
        self.spec_name = ""

    def copy_image(self, src: Path, spec_name: str) -> str:
        """Copy an image into ``figures/<spec>/`` once; its URL relative to the site root."""
        if src not in self.copied:
            rel = f"figures/{spec_name}/{src.name}"
            (self.out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, self.out / rel)
            self.copied[src] = rel
        return self.copied[src]

    def render(self, text: str, base: Path, spec_name: str) -> str:
        self.spec_name = spec_name
        tokens = self.md.parse(text)
        for i, tok in enumerate(tokens):
            if tok.type == "heading_open" and i + 1 < len(tokens):
                tok.attrSet("id", _slug(tokens[i + 1].content))
            for child in tok.children or []:
                if child.type == "image":
                    self._image(child, base, spec_name)
                elif child.type == "link_open":
                    self._link(child, base)
        return self.md.renderer.render(tokens, self.md.options, {})

    def _image(self, tok: Any, base: Path, spec_name: str) -> None:
        src = str(tok.attrGet("src") or "")
        target = (base / src).resolve() if src and "://" not in src and not src.startswith(("/", "data:")) else None
        if target is not None and target.is_file() and target.suffix.lower() in IMAGE_SUFFIXES:
            tok.attrSet("src", self.copy_image(target, spec_name))
            tok.attrSet("loading", "lazy")
            return
        self.missing.append(f"{spec_name}: image {src!r} is not a file next to the card")
        tok.type, tok.tag, tok.attrs = "text", "", {}  # no broken image: its alt text stays
        tok.content = f"[figure not available: {src}]"
        tok.children = None

    def _link(self, tok: Any, base: Path) -> None:
        href = str(tok.attrGet("href") or "")
        if re.match(r"^(https?:|mailto:)", href):
            tok.attrSet("rel", "noopener noreferrer")
            return
        if href.startswith("#"):
            return
        path, _, frag = href.partition("#")
        target = (base / path).resolve() if path else None
        if target is not None and target in self.card_pages:
            tok.attrSet("href", self.card_pages[target] + (f"#{frag}" if frag else ""))
            return
        if target is not None and target.suffix.lower() in IMAGE_SUFFIXES and target.is_file():
            tok.attrSet("href", self.copy_image(target, self.spec_name))
            return
        tok.attrs.pop("href", None)  # a file of the checkout the site does not hold: the text stays, not a dead link
        tok.attrSet("title", f"{href} (in the source tree)")


# ----------------------------------------------------------------------------- verdicts
def readme_text() -> str:
    """The README: the checkout's, else the installed distribution's long description (a wheel)."""
    root = _checkout_root()
    if root is not None:
        return (root / "README.md").read_text()
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        return metadata("zoo-icml2026").get_payload() or ""  # type: ignore[attr-defined]
    except (PackageNotFoundError, AttributeError):
        return ""


def readme_verdicts(text: str) -> dict[str, str]:
    """Spec name -> the README methods table's last cell ("measured here"), markdown; rows naming several specs
    give each the same cell."""
    out: dict[str, str] = {}
    section = text.split("\n## Methods", 1)[1].split("\n## ", 1)[0] if "\n## Methods" in text else ""
    for line in section.splitlines():
        if not line.startswith("| [`"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        for name in re.findall(r"\[`([a-z0-9-]+)`\]", cells[0]):
            out[name] = cells[-1]
    return out


def status_of(m: Any, record: dict[str, Any]) -> str:
    """PASS/FAIL of a stored measurement against the spec's *current* value and tolerance (never the stored verdict)."""
    try:
        value = float(record["value"])
    except (KeyError, TypeError, ValueError):
        return "FAIL"
    return "PASS" if abs(value - m.value) <= (m.tolerance or 0.0) else "FAIL"


def provenance(record: dict[str, Any]) -> str:
    machine = record.get("machine") or {}
    versions = record.get("versions") or {}
    parts = [str(record.get("date", "?"))[:19].replace("T", " "),
             f"{machine.get('host', '?')} ({machine.get('platform', '?')}, {machine.get('cpus', '?')} CPUs, {machine.get('device', '?')})",
             ", ".join(f"{k} {v}" for k, v in versions.items() if k in ("zoo-icml2026", "torch", "python"))]
    return "; ".join(p for p in parts if p)


# ----------------------------------------------------------------------------- pages
def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{esc(title)}</title><link rel="stylesheet" href="style.css"></head>\n'
            f'<body><header class="top"><a href="index.html">Zoo: methods of ICML 2026</a></header>\n<main>\n{body}\n</main></body></html>\n')


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>\n" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>"


def stored_rows(spec: Any, spec_file: Path) -> list[Any]:
    """:func:`registry.metrics_store.rows` of ``spec`` with the measurements stored for this spec file (the store
    keys records by the file's path + sha256 of the resolved spec: a spec reusing a name never shows another's)."""
    from registry.metrics_store import rows

    return rows(spec, spec_file=spec_file)


def spec_page(entry: Entry, renderer: CardRenderer, machine: Any, verdict_md: str | None) -> tuple[str, SpecPage]:
    from zoo.metrics_report import setting_text, summary

    s = entry.spec
    assert s is not None
    parts = [f"<h1>{esc(s.name)}</h1>", f'<p class="sub">{esc(s.title)}</p>']
    meta = []
    if s.paper:
        paper = esc(s.paper.venue)
        if s.paper.arxiv:
            paper += f', <a href="https://arxiv.org/abs/{esc(s.paper.arxiv)}" rel="noopener noreferrer">arXiv {esc(s.paper.arxiv)}</a>'
        if s.paper.code and re.match(r"^https?://", s.paper.code):
            paper += f', <a href="{esc(s.paper.code)}" rel="noopener noreferrer">code</a>'
        meta.append(["paper", paper])
    meta.append(["task", esc(s.task)])
    meta.append(["tags", " ".join(f'<span class="tag">{esc(t)}</span>' for t in s.tags) or "-"])
    meta.append(["implementation", f"<code>{esc(s.implementation)}</code>"])
    meta.append(["spec file", f"<code>{esc(entry.path)}</code> ({esc(entry.origin)})"])
    if verdict_md:
        meta.append(["measured here", renderer.md.renderInline(verdict_md)])
    parts.append("<table><tbody>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in meta) + "</tbody></table>")
    if s.summary:
        parts.append(f"<p>{esc(' '.join(s.summary.split()))}</p>")

    where = "this machine" if machine is None else esc(machine.describe())
    parts.append(f"<h2 id=\"variants\">Variants and where they fit</h2><p class=\"sub\">In preference order; fit on the machine that wrote this report ({where}).</p>")
    vrows, fitting = [], []
    for v in s.variants:
        hw = s.hardware[v]
        fit, style = fit_here(s, entry, v, machine)
        if style == "ok":
            fitting.append(v)
        css = {"ok": "fits", "dim": "nofit", "warn": "warn"}.get(style or "", "")
        vrows.append([f"<b>{esc(v)}</b>", esc(hw.accelerator + (f" ≥{hw.min_memory_gb:g} GB" if hw.min_memory_gb else "")),
                      esc(", ".join(hw.dtypes)), esc(hw.status), f'<span class="{css}">{esc(fit)}</span>'])
    parts.append(_table(["variant", "accelerator", "dtypes", "status", "here"], vrows))

    spec_rows = stored_rows(s, entry.path)
    parts.append('<h2 id="metrics">Paper vs measured</h2><p class="sub">A reported and a reproduced number pair when name, '
                 "dataset and setting agree. The last measurement is what <code>zoo check</code> stored on the machine that "
                 "wrote this report; PASS/FAIL is recomputed from it and the spec's tolerance.</p>")
    trows, passed, failed, never, dates = [], 0, 0, 0, []
    for r in spec_rows:
        paper = "<br>".join(f"{m.value:.4g}{esc(' ' + m.unit) if m.unit else ''}" + (f'<span class="prov">{esc(m.source)} ({esc(m.variant)})</span>' if m.source else "")
                            for m in r.reported) or "-"
        ours = "<br>".join(f"{m.value:.4g} ± {m.tolerance:g} ({esc(m.variant)})" + (f'<span class="prov"><code>{esc(m.command)}</code></span>' if m.command else "")
                           for m in r.reproduced) or "-"
        last = []
        for m in r.reproduced:
            rec = next((x for x in r.measured if x.get("variant") == m.variant), None)
            if rec is None:
                never += 1
                last.append('<span class="never">never (zoo check)</span>')
                continue
            st = status_of(m, rec)
            passed, failed = passed + (st == "PASS"), failed + (st == "FAIL")
            dates.append(str(rec.get("date", ""))[:10])
            last.append(f'{float(rec["value"]):.4g} <span class="{st}">{st}</span><span class="prov">{esc(provenance(rec))}</span>')
        trows.append([esc(r.name), esc(r.dataset), esc(setting_text(r.setting)), paper, ours, "<br>".join(last) or "-"])
    if trows:
        parts.append(_table(["metric", "dataset", "setting", "paper", "ours (spec)", "last measured"], trows))
        parts.append(f'<p class="sub">{esc(summary(spec_rows))}</p>')
    else:
        parts.append("<p>No metrics declared.</p>")

    card = card_file(entry)
    if card is not None:
        parts.append(f'<section class="card" id="card">{renderer.render(card.read_text(), card.parent, s.name)}</section>')
        figures = sorted(p for p in card.parent.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.resolve() not in renderer.copied
                         and (p.stem == s.name or p.stem.startswith(s.name + "-")))
        if figures:
            parts.append('<h2 id="figures">Benchmark figures</h2>')
            parts += [f'<figure><img src="{esc(renderer.copy_image(p.resolve(), s.name))}" alt="{esc(p.name)}" loading="lazy">'
                      f"<figcaption>{esc(p.name)}</figcaption></figure>" for p in figures]
    else:
        parts.append(f"<p class=\"sub\">No card found ({esc(s.docs or 'no docs: field')}).</p>")

    parts.append('<h2 id="models">Models and procedures</h2><details><summary>roles per variant, samplers and recipes</summary>')
    mrows = [[esc(role), esc(v), esc(src.source), f"<code>{esc(getattr(src, 'id', None) or getattr(src, 'factory', None) or getattr(src, 'model_name', None) or getattr(src, 'from_role', ''))}</code>"]
             for role, m in s.models.items() for v, src in m.variants.items()]
    if mrows:
        parts.append(_table(["role", "variant", "source", "id / factory"], mrows))
    prows = [[esc(section[:-1]), f"<b>{esc(n)}</b>" + (" (default)" if n == s.default else ""), f"<code>{esc(p.target)}</code>",
              esc(p.description or "")] for section in ("samplers", "recipes") for n, p in getattr(s, section).items()]
    parts.append(_table(["kind", "name", "target", "what"], prows))
    parts.append("</details>")

    if failed:
        checked, css = f"{failed} FAIL, {passed} PASS" + (f", {never} never" if never else ""), "FAIL"
    elif passed:
        checked, css = f"{passed} PASS" + (f", {never} never checked" if never else "") + f" ({max(dates)})", "PASS"
    else:
        checked, css = ("never checked" if never else "no reproduced metrics"), "never"
    return _page(f"{s.name}: {s.title}", "\n".join(parts)), SpecPage(s.name, s.title, s.task, f"{s.name}.html", checked, css, ", ".join(fitting) or "none")


def index_page(pages: list[SpecPage], verdicts: dict[str, str], renderer: CardRenderer, machine: Any, broken: list[str]) -> str:
    import datetime as dt

    import zoo

    rows = [[f'<a href="{esc(p.file)}"><b>{esc(p.name)}</b></a><span class="prov">{esc(p.title)}</span>', esc(p.task),
             renderer.md.renderInline(verdicts[p.name]) if p.name in verdicts else '<span class="never">-</span>',
             f'<span class="{p.checked_class}">{esc(p.checked)}</span>', esc(p.fits)] for p in pages]
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<h1>Zoo: {len(pages)} specs</h1>",
            f'<p class="sub">Written by <code>zoo report</code> {esc(getattr(zoo, "__version__", ""))} on {esc(when)}; "fits here" is '
            f"{esc(machine.describe() if machine is not None else 'not probed')}. The verdict is the README's summary of what "
            "reproduced on the toy variants; the last check is what <code>zoo check</code> stored on this machine.</p>",
            _table(["method", "task", "verdict (measured here)", "last zoo check", "fits here"], rows)]
    if broken:
        body.append("<h2>Broken specs</h2><ul>" + "".join(f"<li><code>{esc(b)}</code></li>" for b in broken) + "</ul>")
    return _page("Zoo: methods of ICML 2026", "\n".join(body))


def build(out: str | os.PathLike[str], names: list[str] | None = None, *, machine: Any = "probe") -> list[Path]:
    """Write the site into ``out`` (see the module docstring); returns the pages written. An existing ``out``
    must be empty or an earlier report (it is replaced whole, through a temporary sibling)."""
    import zoo

    target = Path(out).expanduser().absolute()
    if target.exists() and not (target.is_dir() and (not any(target.iterdir()) or (target / MARKER).is_file())):
        raise ZooError(f"--out {target} exists and is neither empty nor an earlier zoo report; refusing to overwrite it")
    target.parent.mkdir(parents=True, exist_ok=True)
    if machine == "probe":
        from registry.hardware import probe

        machine = probe()
    cat = zoo.catalog()
    entries = [zoo.entry(n) for n in names] if names else cat.entries()
    card_pages = {c: f"{e.name}.html" for e in entries if (c := card_file(e)) is not None}
    with folder_in_place(target) as tmp:
        (tmp / MARKER).write_text("written by zoo report\n")
        (tmp / "style.css").write_text(CSS.lstrip())
        renderer = CardRenderer(tmp, card_pages)
        verdicts = readme_verdicts(readme_text())
        pages, written = [], []
        from tqdm import tqdm

        unreadable = []
        for e in tqdm(entries, desc="zoo report", unit="spec", file=sys.stderr, disable=not sys.stderr.isatty()):
            if e.spec is None:  # changed on disk since it was indexed: listed with its error, no page
                unreadable.append(str(e.error))
                continue
            text, page = spec_page(e, renderer, machine, verdicts.get(e.name))
            (tmp / page.file).write_text(text)
            pages.append(page)
            written.append(target / page.file)
        broken = ([str(b.error) for b in cat.broken()] if not names else []) + unreadable
        (tmp / "index.html").write_text(index_page(pages, verdicts, renderer, machine, broken))
        for problem in renderer.missing:
            print(f"warning: {problem}", file=sys.stderr)
    return [target / "index.html", *written]
