"""Hostile YAML never gets past the loader as anything but a located SpecError.

Alias bombs, recursive aliases, deep nesting, bad values under allowed tags, odd
``!!binary``/``!!set``/``!!omap`` use, ``extends:`` values no file system accepts and huge
files: each is one ``SpecError`` naming the file (and the line where there is one), fast and
with bounded memory.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from registry.errors import SpecError
from registry.loader import MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, load_spec_file, parse_yaml

FIXTURES = Path(__file__).parent / "fixtures" / "specs"

# the classic "billion laughs": 9 levels of 9 aliases each -> 9**9 strings if expanded
BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")
)


def test_alias_bomb_is_refused_quickly_with_bounded_memory(tmp_path: Path) -> None:
    """A few-hundred-byte alias bomb is a SpecError, in a child process capped at 1 GiB and 60 s
    (before the fix it re-walked every alias until MemoryError)."""
    p = tmp_path / "bomb.yaml"
    p.write_text(BOMB)
    assert len(BOMB.encode()) < 500
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from registry.errors import SpecError
        from registry.loader import load_spec_file
        try:
            load_spec_file({str(p)!r})
        except SpecError as exc:
            print("SpecError", exc)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-500:]
    assert res.stdout.startswith(f"SpecError {p}:"), res.stdout
    assert "alias" in res.stdout and len(res.stdout.strip().splitlines()) == 1


def test_alias_expansion_counts_against_the_node_budget() -> None:
    """Invariant: what aliases expand to counts, so a small file cannot describe a huge tree."""
    text = "a: &a [" + ", ".join(["x"] * 10_000) + "]\n" + "b: [" + ", ".join(["*a"] * (MAX_NODES // 10_000 + 2)) + "]\n"
    assert (MAX_NODES // 10_000 + 2) <= MAX_ALIASES
    with pytest.raises(SpecError, match="nodes"):
        parse_yaml(text, "f.yaml")


def test_too_many_aliases_is_an_error() -> None:
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    with pytest.raises(SpecError, match=f"more than {MAX_ALIASES} aliases"):
        parse_yaml(text, "f.yaml")


def test_a_few_aliases_and_merge_keys_still_work() -> None:
    doc = parse_yaml("base: &b {x: 1, y: [1, 2]}\nuse:\n  <<: *b\n  y: 3\nagain: *b\n", "f.yaml")
    assert doc.data == {"base": {"x": 1, "y": [1, 2]}, "use": {"x": 1, "y": 3}, "again": {"x": 1, "y": [1, 2]}}
    assert doc.positions[("use", "y")] == (4, 3)


@pytest.mark.parametrize("text", ["a: &x [*x]\n", "a: &x {b: *x}\n", "a: &x {<<: *x}\n"])
def test_recursive_alias_is_a_located_error(text: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_yaml(text, "f.yaml")
    assert str(exc.value).startswith("f.yaml:1:") and "alias" in str(exc.value)


def test_undefined_alias_is_a_located_error() -> None:
    with pytest.raises(SpecError, match=r"^f.yaml:2:4: .*undefined alias"):
        parse_yaml("a: 1\nb: *nope\n", "f.yaml")


@pytest.mark.parametrize("opener,closer", [("[", "]"), ("{a: ", "}"), ("- ", "")])
def test_deep_nesting_is_a_located_error_not_recursion(opener: str, closer: str) -> None:
    if opener == "- ":
        text = "a:\n" + "".join("  " * (i + 1) + "-\n" for i in range(500))
    else:
        text = "a: " + opener * 500 + "1" + closer * 500 + "\n"
    with pytest.raises(SpecError) as exc:
        parse_yaml(text, "f.yaml")
    assert f"nested deeper than {MAX_DEPTH}" in str(exc.value) and str(exc.value).startswith("f.yaml:")


def test_nesting_within_the_limit_is_fine() -> None:
    depth = MAX_DEPTH - 2
    assert parse_yaml("a: " + "[" * depth + "1" + "]" * depth + "\n").data["a"] is not None


@pytest.mark.parametrize("value,line_col", [
    ("!!int abc", "1:4"), ("!!bool maybe", "1:4"), ("!!timestamp xyz", "1:4"), ("!!float one", "1:4"),
    ("2024-13-45", "1:4"), ("!!binary '!!!'", "1:4"), ("!!binary 3", "1:4"), ("!!set 3", "1:4"),
    ("!!omap {a: 1}", "1:4"), ("!!omap [1]", "1:12"), ("!!omap [{a: 1, b: 2}]", "1:12"), ("!!pairs [1]", "1:13"),
    ("!!int [1]", "1:4"), ("!!str {a: 1}", "1:4"), ("!!map 3", "1:4"), ("!!seq x", "1:4"), ("!!merge x", "1:4"),
    ("!!int " + "9" * 5000, "1:4"), ("!!null {a: 1}", "1:4"), ("{!!binary YQ==: 1}", "1:5"),
    ("!!python/object:os.system x", "1:4"), ("!custom x", "1:4"),
])
def test_allowed_tags_with_bad_values_are_located_spec_errors(value: str, line_col: str) -> None:
    """Before the fix these raised ValueError/KeyError/AttributeError (or passed mis-typed data)."""
    with pytest.raises(SpecError) as exc:
        parse_yaml(f"a: {value}\n", "f.yaml")
    assert str(exc.value).startswith(f"f.yaml:{line_col}: "), str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("value,expected", [
    ("!!int 0x1f", 31), ("!!bool yes", True), ("!!float '1.5'", 1.5), ("!!str 12", "12"), ("!!null ''", None),
    ("!!omap [{a: 1}, {b: 2}]", {"a": 1, "b": 2}), ("!!set {a, b}", {"a", "b"}), ("!!binary YWJj", b"abc"),
    ("!!pairs [{a: 1}, {a: 2}]", [["a", 1], ["a", 2]]),
])
def test_allowed_tags_with_good_values_keep_their_yaml_meaning(value: str, expected: object) -> None:
    assert parse_yaml(f"a: {value}\n").data["a"] == expected


def test_more_than_one_document_is_an_error() -> None:
    with pytest.raises(SpecError, match=r"^f.yaml:2:1: .*single document"):
        parse_yaml("a: 1\n---\nb: 2\n", "f.yaml")


@pytest.mark.parametrize("ref", ["par\x00ent.yaml", "x" * 300 + ".yaml", "a/" * 600 + "p.yaml"])
def test_extends_values_no_file_system_accepts_are_spec_errors(tmp_path: Path, ref: str) -> None:
    p = tmp_path / "child.yaml"
    p.write_text(f'extends: "{ref}"\nname: x\n'.replace("\x00", "\\0"))
    with pytest.raises(SpecError) as exc:
        load_spec_file(p)
    assert str(exc.value).startswith(f"{p}:1:1: extends: ")


def test_huge_file_is_refused_without_reading_it_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "huge.yaml"
    with open(p, "wb") as f:
        f.write(b"name: x\n")
        f.truncate(64 * MAX_FILE_BYTES)  # sparse: 64 MiB on paper, nothing on disk
    reads: list[int] = []
    real_read = __import__("os").read

    def counting_read(fd: int, n: int) -> bytes:
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr("registry.files.os.read", counting_read)
    with pytest.raises(SpecError, match=r"1 MiB"):
        load_spec_file(p)
    assert sum(reads) <= MAX_FILE_BYTES + 1


def test_every_construction_error_is_located_and_one_line(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_bytes(b"name: x\ntitle: \xff\xfe\n")
    with pytest.raises(SpecError) as exc:
        load_spec_file(p)
    assert str(exc.value).startswith(f"{p}") and "\n" not in str(exc.value)
