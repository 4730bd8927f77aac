"""Fuzzing the engine with mutations of the shipped specs.

Every mutated spec goes through the loader and the validator (``load_spec_file`` + ``lint``);
mutated specs that still validate go through the builder. The invariant: only ``ZooError``
escapes, and every message is one printable line that starts with the file it is about
(``file:line:col: ...`` where a line is known). Mutations, all seeded from ``specs/*.yaml``
and the demo fixture spec:

* bytes: deletions, insertions (YAML syntax, control characters, invalid UTF-8), overwrites;
* lines: deletion, duplication, swaps, re-indentation;
* data: key deletions and insertions, values swapped for other types and extreme values;
* YAML: anchors and aliases (including bombs and self-reference), explicit tags on any value,
  deep nesting, extra documents, ``extends:`` to odd places.

The default suite runs a quick profile (a few seconds); ``pytest -m slow`` runs thousands.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.errors import SpecErrors, ZooError
from registry.lint import lint
from registry.loader import load_spec_file

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "specs"
SOURCES = {p.name: p.read_text() for p in sorted((REPO / "specs").glob("*.yaml"))}
SOURCES["demo-gaussian.yaml"] = (FIXTURES / "demo-gaussian.yaml").read_text()
NAMES = sorted(SOURCES)

QUICK = dict(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = dict(max_examples=2500, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped specs (with their weights), where each mutant is written."""
    d = tmp_path_factory.mktemp("fuzz")
    for name, text in SOURCES.items():
        (d / name).write_text(text)
    shutil.copytree(REPO / "specs" / "weights", d / "weights")
    shutil.copy(FIXTURES / "demo-affine.safetensors", d)
    return d


# ----------------------------------------------------------------------------- the invariant
LOCATED = re.compile(r"^(?P<file>[^:]+?)(:(?P<line>\d+)(:\d+)?)?: \S")


def assert_one_line_naming_a_file(message: str, folder: Path) -> None:
    assert message.isprintable(), f"not one printable line: {message!r}"
    m = LOCATED.match(message)
    assert m is not None, f"no file named: {message!r}"
    # the mutant, or a shipped spec it extends (never a file outside the folder: that is refused)
    assert Path(m["file"]).parent == folder, message


def check_load_and_lint(path: Path, folder: Path) -> Any:
    """Load and lint ``path``; return the spec if it is valid. Fails the test on anything but a ZooError."""
    try:
        spec = load_spec_file(path)
    except SpecErrors as exc:
        for line in [str(exc), *exc.lines()]:
            assert_one_line_naming_a_file(line, folder)
        return None
    except ZooError as exc:
        assert_one_line_naming_a_file(str(exc), folder)
        return None
    for problem in lint(spec, path):
        assert_one_line_naming_a_file(str(problem), folder)
    return spec


def write(folder: Path, text: str | bytes) -> Path:
    p = folder / "mutant.yaml"
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogatepass")
    p.write_bytes(text)
    return p


# ----------------------------------------------------------------------------- strategies
SPECIAL = st.sampled_from(
    list(":{}[]&*!|>'\"#-?,%@`\\\n\t ") + ["\x00", "\x1b[31m", "\r", "\u202e", "\ufeff", "<<: ", "&a ", "*a", "!!int ",
                                          "!!binary ", "!!python/object:os.system ", "\n---\n", "\n...\n", "\t\n  "])
sources = st.sampled_from(NAMES)


@st.composite
def byte_mutants(draw: st.DrawFn) -> bytes:
    raw = bytearray(SOURCES[draw(sources)].encode())
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(raw)))
        op = draw(st.sampled_from(["delete", "insert", "insert-bytes", "overwrite"]))
        if op == "delete":
            del raw[pos:pos + draw(st.integers(1, 40))]
        elif op == "insert":
            raw[pos:pos] = draw(SPECIAL).encode()
        elif op == "insert-bytes":
            raw[pos:pos] = draw(st.binary(min_size=1, max_size=6))
        else:
            raw[pos:pos + 1] = draw(st.binary(min_size=1, max_size=1))
    return bytes(raw)


@st.composite
def line_mutants(draw: st.DrawFn) -> str:
    lines = SOURCES[draw(sources)].splitlines()
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        j = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "indent", "dedent"]))
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(j, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "indent":
            lines[i] = " " * draw(st.sampled_from([1, 2, 4])) + lines[i]
        else:
            lines[i] = lines[i].lstrip()
    return "\n".join(lines) + "\n"


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        node = node[part]
    return node


WEIRD_VALUES = st.one_of(
    st.integers(-(10**20), 10**20), st.sampled_from([0, -1, 1, 2**31, 2**63, 10**12, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e-300, -0.0, 1e308]),
    st.booleans(), st.none(), st.text(max_size=8), st.sampled_from(["", "x" * 300, "a\x1b[2Jb\nc", "../../etc/passwd", "zoo:load",
                                                                  "zoo.cli:main", "os:system", "builtins:eval"]),
    st.lists(st.integers(0, 3), max_size=3), st.dictionaries(st.sampled_from(["a", "name", "trust_remote_code"]),
                                                                st.integers(0, 3), max_size=2),
)
FIELD_NAMES = st.sampled_from(["name", "title", "extends", "weights", "sha256", "params", "config", "trust_remote_code",
                               "variants", "hardware", "kind", "source", "factory", "target", "auto_map", "unknown", "<<"])


@st.composite
def data_mutants(draw: st.DrawFn, names: list[str] | None = None, only_under: tuple[str, ...] = ()) -> str:
    data = yaml.safe_load(SOURCES[draw(st.sampled_from(names or NAMES))])
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p and (not only_under or p[0] in only_under)]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(data, path[:-1])
        op = draw(st.sampled_from(["delete", "swap", "insert", "swap"]))
        if op == "delete":
            del parent[path[-1]]
        elif op == "swap":
            parent[path[-1]] = draw(WEIRD_VALUES)
        elif isinstance(parent, dict):
            parent[draw(FIELD_NAMES)] = draw(WEIRD_VALUES)
        else:
            parent.insert(draw(st.integers(0, len(parent))), draw(WEIRD_VALUES))
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _bomb(levels: int) -> str:
    out = "  l0: &l0 [x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, levels):
        out += f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n"
    return out


@st.composite
def yaml_mutants(draw: st.DrawFn) -> str:
    lines = SOURCES[draw(sources)].splitlines()
    tops = [i for i, line in enumerate(lines) if re.match(r"^[a-z_]+:", line)]
    i = draw(st.sampled_from(tops))
    key, _, rest = lines[i].partition(":")
    op = draw(st.sampled_from(["tag", "anchor-alias", "self-alias", "bomb", "deep", "document", "extends", "merge"]))
    if op == "tag":
        tag = draw(st.sampled_from(["!!int", "!!float", "!!bool", "!!null", "!!timestamp", "!!binary", "!!set", "!!omap",
                                    "!!pairs", "!!seq", "!!map", "!!str", "!!merge", "!!python/name:os.system",
                                    "!custom", "!", "!<tag:yaml.org,2002:int>"]))
        lines[i] = f"{key}: {tag}{rest}" if rest.strip() else f"{key}: {tag}"
    elif op == "anchor-alias":
        j = draw(st.sampled_from(tops))
        lines[i] = f"{key}: &anchor{rest}"
        other = lines[j].partition(":")[0]
        lines.append(f"{other}_copy: *anchor" if draw(st.booleans()) else f"{other}: *anchor")
    elif op == "self-alias":
        lines[i] = f"{key}: &self [*self]"
    elif op == "bomb":
        lines.insert(i, f"bomb:\n{_bomb(draw(st.integers(2, 9)))}")
    elif op == "deep":
        n = draw(st.integers(10, 400))
        lines[i] = f"{key}: " + "[" * n + "1" + "]" * n
    elif op == "document":
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["---", "...", "--- !!map", "%YAML 1.1"])))
    elif op == "extends":
        target = draw(st.sampled_from(NAMES + ["mutant.yaml", "../x.yaml", "/etc/hostname.yaml", "a\\0b.yaml",
                                               "x" * 300 + ".yaml", "weights", "missing.yaml"]))
        lines.insert(0, f'extends: "{target}"')
    else:
        lines.insert(i, f"base: &base {{{key}: 1}}")
        lines.append("<<: *base")
    return "\n".join(lines) + "\n"


MUTANTS = {"bytes": byte_mutants(), "lines": line_mutants(), "data": data_mutants(), "yaml": yaml_mutants()}


# ----------------------------------------------------------------------------- loader + validator
@pytest.mark.parametrize("kind", sorted(MUTANTS))
@settings(**QUICK)
@given(data=st.data())
def test_only_zoo_errors_escape_loader_and_validator_and_each_is_one_located_line(folder: Path, kind: str, data: st.DataObject) -> None:
    """Invariant: for any mutation of a shipped spec, load_spec_file + lint either succeed or
    raise a ZooError whose every line is printable and starts with the file it is about."""
    check_load_and_lint(write(folder, data.draw(MUTANTS[kind])), folder)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(MUTANTS))
@settings(**SLOW)
@given(data=st.data())
def test_only_zoo_errors_escape_loader_and_validator_thousands(folder: Path, kind: str, data: st.DataObject) -> None:
    """Invariant (slow profile, 2,500 mutants per kind): only ZooError escapes the loader and the
    validator, one located printable line each."""
    check_load_and_lint(write(folder, data.draw(MUTANTS[kind])), folder)


# ----------------------------------------------------------------------------- builder
CHEAP = ["demo-gaussian.yaml", "f-dpmsolver.yaml"]  # CPU variants build in milliseconds
BUILD_MUTANTS = data_mutants(names=CHEAP, only_under=("models", "samplers", "recipes", "hardware", "default", "variants"))



def check_build(path: Path, folder: Path) -> None:
    spec = check_load_and_lint(path, folder)
    if spec is None:
        return
    from registry.context import build_pipeline
    from registry.hardware import Machine

    cpu = [v for v in spec.variants if spec.hardware[v].accelerator in ("cpu", "any")]
    if not cpu:
        return
    try:
        build_pipeline(spec, file=path, variant=cpu[0], device="cpu", use_cache=False,
                       machine=Machine(cuda_devices=0, cuda_memory_gb=(), cuda_names=(), bf16_cuda=False, mps=False))
    except ZooError as exc:
        assert_one_line_naming_a_file(str(exc), folder) if exc.location.file else None
        assert str(exc).isprintable()


@settings(**QUICK)
@given(data=st.data())
def test_only_zoo_errors_escape_the_builder(folder: Path, data: st.DataObject) -> None:
    """Invariant: a mutated spec that validates either builds or fails with one ZooError line."""
    check_build(write(folder, data.draw(BUILD_MUTANTS)), folder)


@pytest.mark.slow
@settings(**dict(SLOW, max_examples=1000))
@given(data=st.data())
def test_only_zoo_errors_escape_the_builder_thousand(folder: Path, data: st.DataObject) -> None:
    """Invariant (slow profile): as above, 1,000 valid mutants of the cheap specs."""
    check_build(write(folder, data.draw(BUILD_MUTANTS)), folder)
