"""`zoo report --out site/` writes a static HTML catalog (index with a verdict per method, one
page per spec with its card, variants and fit, paper vs measured with the last `zoo check` value and its
provenance, the cards' figures copied) that headless Chromium opens from disk with no console errors and
every image resolved. The Chromium test skips, saying why, where Debian's `chromium` is not installed
(`.ci/run` installs it)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import zoo
from registry import metrics_store
from zoo.cli import main

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Refs(HTMLParser):
    """Every resource a page loads (img src, stylesheet href, script) and every link."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.links: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.loads.append(a.get("src") or "")
        elif tag == "link":
            self.loads.append(a.get("href") or "")
        elif tag == "script":
            self.scripts += 1
        elif tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")


def _store(spec: Any, metric: Any, value: float) -> None:
    """Store a measurement through the store's own API (keyed by spec file + sha256 of the resolved spec)."""
    metrics_store.record(spec, metric, value, spec_file=zoo.entry(spec.name).path, device="cpu")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of every built-in spec, with two stored measurements of poe-bridge: one inside the spec's
    tolerance, one outside it but stored as "PASS" (the report recomputes the verdict)."""
    tmp = tmp_path_factory.mktemp("report")
    mp = pytest.MonkeyPatch()
    mp.setenv("ZOO_METRICS_DIR", str(tmp / "store"))
    spec = zoo.spec("poe-bridge")
    good, bad = [m for m in spec.metrics if m.kind == "reproduced" and m.check][:2]
    _store(spec, good, good.value)
    _store(spec, bad, bad.value + 10 * (bad.tolerance or 1) + 1)
    try:
        assert main(["report", "--out", str(tmp / "site")]) == 0
    finally:
        mp.undo()
    return tmp / "site"


def test_every_page_and_resource_is_local(site: Path) -> None:
    pages = sorted(site.glob("*.html"))
    assert {p.stem for p in pages} == {"index", *zoo.list()}
    for page in pages:
        refs = Refs()
        refs.feed(page.read_text())
        assert refs.scripts == 0, page.name  # static: no JavaScript
        for src in refs.loads:
            assert not re.match(r"^[a-z]+:", src), (page.name, src)  # nothing from the network
            assert (site / src).is_file(), (page.name, src)
        for href in refs.links:
            if not re.match(r"^(https?|mailto):", href) and not href.startswith("#"):
                assert (site / href.split("#")[0]).is_file(), (page.name, href)
    index = Refs()
    index.feed((site / "index.html").read_text())
    assert {h for h in index.links if h.endswith(".html")} - {"index.html"} == {f"{n}.html" for n in zoo.list()}


def test_spec_page_holds_card_variants_metrics_provenance_and_figures(site: Path) -> None:
    text = (site / "poe-bridge.html").read_text()
    assert "Variants and where they fit" in text and "Paper vs measured" in text and 'class="card"' in text
    assert "fits" in text and "toy-equal" in text  # every variant with its fit here
    spec = zoo.spec("poe-bridge")
    good, bad = [m for m in spec.metrics if m.kind == "reproduced" and m.check][:2]
    # the stored "PASS" of a value outside the tolerance is shown as FAIL; provenance: date, machine, versions
    assert text.count('class="PASS">PASS') == 1 and text.count('class="FAIL">FAIL') == 1
    assert "CPUs, cpu)" in text and "torch " in text
    figures = sorted((site / "figures" / "poe-bridge").iterdir())
    assert figures and all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in figures)
    assert (REPO / "docs" / "methods" / "poe-bridge-bench.png").read_bytes() == (site / "figures" / "poe-bridge" / "poe-bridge-bench.png").read_bytes()
    index = (site / "index.html").read_text()
    row = index[index.index('href="poe-bridge.html"'):].split("</tr>")[0]
    assert "1 FAIL, 1 PASS" in row and "tokens per AR forward" in row  # machine verdict + the README's summary
    assert "The RAMAC recipe" in (site / "ramac.html").read_text()  # procedures' descriptions


def test_untrusted_text_is_escaped_and_card_html_is_not_rendered(tmp_path: Path) -> None:
    spec = tmp_path / "evil.yaml"
    card = tmp_path / "evil.md"
    spec.write_text((REPO / "tests" / "fixtures" / "specs" / "demo-gaussian.yaml").read_text()
                    .replace('title: "Demo: a seeded Gaussian sampler"', 'title: "<script>alert(1)</script>"')
                    .replace("name: demo-gaussian", "name: evil") + "docs: evil.md\n")
    shutil.copyfile(REPO / "tests" / "fixtures" / "specs" / "demo-affine.safetensors", tmp_path / "demo-affine.safetensors")
    card.write_text("# Evil\n\n<img src=x onerror=alert(1)> [x](javascript:alert(1)) ![gone](missing.png) "
                    "[a tool](../tools/x.py) [ok](https://example.org)\n")
    from zoo.report import build

    build(tmp_path / "site", [str(spec)], machine=None)
    text = (tmp_path / "site" / "evil.html").read_text()
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<img src=x" not in text and "&lt;img src=x onerror" in text
    assert 'href="javascript' not in text and "missing.png" not in re.findall(r'src="([^"]*)"', text)
    assert "[figure not available: missing.png]" in text
    assert 'href="../tools/x.py"' not in text and 'href="https://example.org" rel="noopener noreferrer"' in text


def test_report_refuses_to_overwrite_a_folder_it_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["report", "--out", str(tmp_path), "ddim"]) == 2
    assert "neither empty nor an earlier zoo report" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert main(["report", "--out", str(tmp_path / "s"), "ddim"]) == 0 and main(["report", "--out", str(tmp_path / "s"), "ddim"]) == 0



def test_a_report_that_fails_midway_leaves_the_earlier_one_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report is written beside ``--out`` and swapped in at the end: a crash on the second spec leaves the
    earlier report exactly as it was and no temporary folder behind."""
    from zoo import report

    out = tmp_path / "site"
    report.build(out, ["poe-bridge"], machine=None)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    real, calls = report.spec_page, []

    def crash_on_second(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("planted crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(report, "spec_page", crash_on_second)
    with pytest.raises(RuntimeError, match="planted crash"):
        report.build(out, ["ddim", "poe-bridge"], machine=None)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # no ddim.html
    assert [p.name for p in tmp_path.iterdir()] == ["site"]


HARNESS = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><pre id="out">pending</pre><script>
const pages = %s, res = [];
function next(i) {
  if (i >= pages.length) { document.getElementById("out").textContent = "RESULT " + JSON.stringify(res); return; }
  const f = document.createElement("iframe");
  f.onload = () => {
    try {
      const d = f.contentDocument;
      res.push({page: pages[i], title: d.title, ready: d.readyState, css: getComputedStyle(d.body).margin,
                broken: [...d.images].filter(im => !(im.complete && im.naturalWidth > 0)).map(im => im.getAttribute("src")),
                images: d.images.length});
    } catch (e) { res.push({page: pages[i], error: String(e)}); }
    f.remove(); next(i + 1);
  };
  f.src = pages[i]; document.body.appendChild(f);
}
next(0);
</script></body></html>"""


def render_in_chromium(site: Path, workdir: Path) -> list[str]:
    """Open every page of ``site`` in headless Chromium (from disk); the problems found: a page that does not
    load, a console message from a page (the pages have no script: any message is an error, e.g. a refused
    load), an image that does not resolve, a stylesheet that did not apply."""
    assert CHROMIUM is not None
    pages = sorted(site.glob("*.html"))
    harness = workdir / "harness.html"
    harness.write_text(HARNESS % json.dumps([p.as_uri() for p in pages]))
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                          "--enable-logging=stderr", "--v=0", "--virtual-time-budget=60000", "--dump-dom", harness.as_uri()],
                         capture_output=True, text=True, timeout=300)
    found = re.search(r"RESULT (\[.*\])", res.stdout)
    assert found, (res.stdout[-2000:], res.stderr[-2000:])
    problems = []
    for r in json.loads(found.group(1)):
        name = Path(r["page"]).name
        if "error" in r or r.get("ready") != "complete" or not r.get("title"):
            problems.append(f"{name}: did not load ({r.get('error') or r.get('ready')})")
            continue
        problems += [f"{name}: image {src} does not resolve" for src in r["broken"]]
        if r["css"] != "0px":
            problems.append(f"{name}: style.css did not apply")
    site_uri = site.as_uri()
    problems += [f"console: {line.strip()}" for line in res.stderr.splitlines() if ":CONSOLE" in line and site_uri in line]
    return problems


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get update && apt-get install -y chromium; .ci/run does)")
def test_every_page_renders_in_headless_chromium(site: Path, tmp_path: Path) -> None:
    assert render_in_chromium(site, tmp_path) == []
    # negative control: a copy of the site with a planted missing image and a console error is caught
    bad = tmp_path / "bad-site"
    shutil.copytree(site, bad)
    (bad / "ddim.html").write_text((bad / "ddim.html").read_text().replace(
        "</main>", '<img src="figures/nowhere.png" alt="x"><script>console.error("planted")</script></main>'))
    problems = render_in_chromium(bad, tmp_path)
    assert any("ddim.html: image figures/nowhere.png does not resolve" in p for p in problems), problems
    assert any("planted" in p for p in problems), problems


def test_report_asks_the_store_for_the_spec_files_own_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store keyed by spec file is asked for this file's records: a spec that reuses a
    name never shows another file's measurements."""
    from zoo import report

    asked: list[Any] = []

    def rows(spec: Any, measured: Any = None, *, spec_file: Any = None) -> list[Any]:
        asked.append(spec_file)
        return []

    monkeypatch.setattr(metrics_store, "rows", rows)
    report.build(tmp_path / "site", ["ddim"], machine=None)
    assert asked == [zoo.entry("ddim").path]


def test_a_spec_unreadable_since_indexing_is_listed_broken_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from registry.catalog import Entry
    from registry.errors import Location, SpecError
    from zoo import report

    good = zoo.entry("ddim")
    gone = Entry(tmp_path / "gone.yaml", "test", error=SpecError("changed on disk", Location(str(tmp_path / "gone.yaml"), 3)))

    class Catalog:
        def entries(self) -> list[Entry]:
            return [good, gone]

        def broken(self) -> list[Entry]:
            return []

    monkeypatch.setattr(zoo, "catalog", lambda: Catalog())
    pages = report.build(tmp_path / "site", machine=None)
    assert [p.name for p in pages] == ["index.html", "ddim.html"]
    index = (tmp_path / "site" / "index.html").read_text()
    assert "Broken specs" in index and "gone.yaml:3" in index and "changed on disk" in index
