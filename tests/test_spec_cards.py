"""A spec's ``docs:`` card: one path base (the folder of the spec file that wrote it), validated, linted and
confined, because ``zoo report`` publishes the file it names."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry.errors import SpecError, SpecErrors
from registry.cards import card_path
from registry.lint import lint
from registry.loader import load_spec_file

REPO = Path(__file__).resolve().parents[1]
SPECS = sorted((REPO / "specs").glob("*.yaml"))
BASE = (REPO / "specs" / "asgd-stability.yaml").read_text()
CARD_LINE = "docs: ../docs/methods/asgd-stability.md"


def _spec(folder: Path, docs: str, name: str = "a.yaml") -> Path:
    assert CARD_LINE in BASE
    p = folder / name
    p.write_text(BASE.replace(CARD_LINE, f"docs: {docs}"))
    return p


def _lint_lines(path: Path) -> list[str]:
    return [str(e) for e in lint(load_spec_file(path), path) if "docs" in str(e)]


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_builtin_card_resolves_against_its_spec_file(path: Path) -> None:
    spec = load_spec_file(path)
    assert spec.docs, f"{path.name} names no card"
    card, why = card_path(path, spec.docs)
    assert card is not None, why
    assert card == (path.parent / spec.docs).resolve()  # the spec file's folder is the one base, not the repo root
    assert card.parent.parent == (REPO / "docs").resolve()


def test_a_card_beside_a_third_party_spec(tmp_path: Path) -> None:
    (tmp_path / "card.md").write_text("# mine\n")
    p = _spec(tmp_path, "card.md")
    assert card_path(p, "card.md") == ((tmp_path / "card.md").resolve(), "")
    assert _lint_lines(p) == []


def test_a_missing_card_is_one_error_at_its_line(tmp_path: Path) -> None:
    p = _spec(tmp_path, "nope.md")
    (line,) = _lint_lines(p)
    n = next(i for i, t in enumerate(p.read_text().splitlines(), 1) if t.startswith("docs:"))
    assert line.startswith(f"{p}:{n}:") and "card nope.md does not exist" in line


@pytest.mark.parametrize("docs", ["../../../../../etc/passwd.md", "../outside.md"])
def test_a_card_outside_the_spec_folder_is_refused(tmp_path: Path, docs: str) -> None:
    inner = tmp_path / "specs"
    inner.mkdir()
    (tmp_path / "outside.md").write_text("secret\n")
    p = _spec(inner, docs)
    assert card_path(p, docs)[0] is None
    (line,) = _lint_lines(p)
    assert "outside the spec's folder tree" in line


def test_a_symlinked_card_pointing_out_is_refused(tmp_path: Path) -> None:
    inner = tmp_path / "specs"
    inner.mkdir()
    (tmp_path / "secret.md").write_text("secret\n")
    os.symlink(tmp_path / "secret.md", inner / "card.md")
    p = _spec(inner, "card.md")
    assert card_path(p, "card.md")[0] is None
    assert any("outside" in line for line in _lint_lines(p))


@pytest.mark.parametrize("docs", ["/etc/card.md", "card.txt", "'C:\\\\card.md'", "'a\\\\b.md'"])
def test_a_card_that_is_not_a_relative_markdown_path_fails_validation(tmp_path: Path, docs: str) -> None:
    p = _spec(tmp_path, docs)
    with pytest.raises((SpecError, SpecErrors)) as exc:
        load_spec_file(p)
    assert "docs" in str(exc.value) and "relative path to a Markdown card" in str(exc.value)


def test_an_inherited_card_resolves_against_the_parent_spec_folder(tmp_path: Path) -> None:
    child = tmp_path
    parent = child / "base"
    parent.mkdir()
    (parent / "card.md").write_text("# base\n")  # not beside the child: resolving against its folder would fail
    _spec(parent, "card.md", "base.yaml")
    (child / "c.yaml").write_text("extends: base/base.yaml\nname: asgd-child\n")
    assert load_spec_file(child / "c.yaml").docs == "card.md"
    assert _lint_lines(child / "c.yaml") == []


@pytest.mark.parametrize("docs,shipped_rel", [("../docs/common/README.md", "common/README.md"),
                                               ("../docs/methods/asgd-stability.md", "methods/asgd-stability.md")])
def test_an_installed_builtin_spec_finds_its_card_among_the_shipped_cards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                          docs: str, shipped_rel: str) -> None:
    """From a wheel, ``zoo_specs/../docs`` does not exist: the card of the same path below ``docs/`` is taken from the
    shipped cards (``zoo_docs``), and nothing outside them."""
    import registry.cards as cards

    shipped = tmp_path / "site" / "zoo_docs"
    (shipped / "methods").mkdir(parents=True)
    (shipped / shipped_rel).parent.mkdir(parents=True, exist_ok=True)
    (shipped / shipped_rel).write_text("# card\n")
    specs = tmp_path / "site" / "zoo_specs"
    specs.mkdir()
    p = _spec(specs, docs)
    monkeypatch.setattr(cards, "shipped_docs", lambda: shipped)
    assert card_path(p, docs) == ((shipped / shipped_rel).resolve(), "")
    assert card_path(p, "../docs/../../secret.md")[0] is None


#: A card is user documentation: at most this many lines (the history of attempts goes to its NOTES.md).
CARD_MAX_LINES = 200


def long_cards(folder: Path) -> list[str]:
    """``name: lines`` of every card in ``folder`` over :data:`CARD_MAX_LINES` (notes and generated bench tables
    are not cards)."""
    out = []
    for p in sorted(folder.glob("*.md")):
        if p.name.endswith((".NOTES.md", "-bench.md")):
            continue
        n = len(p.read_text().splitlines())
        if n > CARD_MAX_LINES:
            out.append(f"{p.name}: {n}")
    return out


def test_every_method_card_is_at_most_200_lines(tmp_path: Path) -> None:
    assert long_cards(REPO / "docs" / "methods") == []
    (tmp_path / "long.md").write_text("x\n" * 201)  # planted: caught
    (tmp_path / "long.NOTES.md").write_text("x\n" * 500)  # notes may be long
    (tmp_path / "ok.md").write_text("x\n" * 200)
    assert long_cards(tmp_path) == ["long.md: 201"]
