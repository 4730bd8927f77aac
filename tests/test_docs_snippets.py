"""Every fenced ```yaml / ```python block of README.md and docs/**/*.md runs.

* ``python`` blocks are executed (fresh namespace, in a temporary working directory);
* ``yaml`` blocks are parsed by the spec loader; a block that is a spec (has ``name:``) must pass
  ``zoo validate`` (schema + lint) as written.

A block that cannot run here is opted out by the line right above its fence:
``<!-- doc-test: skip: <reason> -->`` (the reason is required; the opt-outs are counted below), or
``<!-- doc-test: slow -->`` (runs under ``pytest -m slow``). The README's install/test commands are
the ones .ci/run runs.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>yaml|python)[ \t]*$")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(?P<what>skip|slow)\s*(?::\s*(?P<reason>.*?))?\s*-->\s*$")

#: opt-outs allowed today (file, reason); adding one means adding it here, with its reason
EXPECTED_OPT_OUTS = 4


@dataclass
class Snippet:
    file: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    mode: str = "run"  # run | skip | slow
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.file.relative_to(REPO)}:{self.line}:{self.lang}"


def snippets() -> list[Snippet]:
    out: list[Snippet] = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            snip = Snippet(path, i + 1, m["lang"], textwrap.dedent("\n".join(lines[i + 1 : j])) + "\n")
            marker = MARKER.match(lines[i - 1]) if i > 0 else None
            if marker:
                snip.mode, snip.reason = marker["what"], (marker["reason"] or "").strip()
            out.append(snip)
            i = j + 1
    return out


ALL = snippets()


def _params(mode: str) -> list[object]:
    marks = {"slow": [pytest.mark.slow]}.get(mode, [])
    return [pytest.param(s, id=s.id, marks=marks) for s in ALL if s.mode == mode]


def _run(snip: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if snip.lang == "python":
        code = compile(snip.code, snip.id, "exec")
        exec(code, {"__name__": "doc_snippet"})  # noqa: S102 - our own documentation
        return
    import yaml

    from registry.lint import lint
    from registry.loader import load_spec_file

    data = yaml.safe_load(snip.code)
    if isinstance(data, dict) and "name" in data:
        spec_file = tmp_path / "snippet.yaml"
        spec_file.write_text(snip.code)
        spec = load_spec_file(spec_file)  # raises with file:line:col on a schema error
        problems = lint(spec, spec_file)
        assert not problems, f"{snip.id}: " + "; ".join(str(p) for p in problems)


@pytest.mark.parametrize("snip", _params("run"))
def test_doc_snippet_runs(snip: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block runs (python) or validates as a spec (yaml), exactly as written."""
    _run(snip, tmp_path, monkeypatch)


@pytest.mark.parametrize("snip", _params("slow"))
def test_slow_doc_snippet_runs(snip: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks marked slow (minutes on a CPU) run in the slow step."""
    _run(snip, tmp_path, monkeypatch)


def test_opt_outs_are_explained_and_counted() -> None:
    """Every skipped block names why; the number of opt-outs is pinned, so a new one is a decision."""
    skipped = [s for s in ALL if s.mode == "skip"]
    for s in skipped:
        assert len(s.reason) > 10, f"{s.id}: a doc-test skip needs a reason"
    print("\n".join(f"doc snippet opted out: {s.id}: {s.reason}" for s in skipped))
    assert len(skipped) == EXPECTED_OPT_OUTS, [s.id for s in skipped]
    assert sum(s.mode == "run" for s in ALL) >= 4  # most blocks run


def test_readme_reuse_example_builds_and_runs_its_20_steps(tmp_path: Path) -> None:
    """The README's "reuse an implementation" spec validates, builds, and its sampler takes 20 steps."""
    import zoo

    (snip,) = [s for s in ALL if s.file.name == "README.md" and s.lang == "yaml" and "my-f-ddim-20" in s.code]
    spec_file = tmp_path / "my-method.yaml"
    spec_file.write_text(snip.code)
    pipe = zoo.load(str(spec_file))
    assert pipe.procedure.params.num_inference_steps == 20
    model = pipe.procedure.model
    start = len(model.call_log)
    pipe(seed=0, batch_size=3)
    assert len(model.call_log) - start == 20


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S)


def test_ci_runs_the_readme_install_and_test_commands() -> None:
    """.ci/run mirrors README: each command of the install line and of the test lines appears in it."""
    readme = (REPO / "README.md").read_text()
    ci_lines = {ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()}
    ci_text = "\n".join(ci_lines)
    blocks = _bash_blocks(readme)
    install = next(b for b in blocks if "pip install" in b)
    tests = [b for b in blocks if "pytest" in b]
    assert tests, "README has no test command"
    for block in [install, *tests]:
        for cmd in (c.strip() for c in block.strip().split("&&")):
            if cmd.startswith(("python3.11 -m venv", ". .venv/bin/activate")):
                continue  # CI makes its own venv
            prefix = re.match(r"(?:[A-Z_]+=\S*\s+)*", cmd)
            assert prefix is not None
            env, rest = prefix.group(0).split(), cmd[prefix.end():]
            assert rest in ci_lines, f"README command not run by .ci/run: {cmd}"
            for e in env:
                assert e in ci_text, f".ci/run does not set {e} like README: {cmd}"
    # the first command ends in something a newcomer sees working, not the minutes-long check
    assert install.strip().endswith('zoo list && zoo run poe-bridge --prompt "12+34="')
    assert any(b.strip().endswith("zoo check --all") for b in blocks)  # its own documented step
