"""Loader properties: safe parsing agrees with yaml.safe_load, duplicates are always caught,
every key has a position, and errors point at the right line."""
from __future__ import annotations

import yaml
from hypothesis import given
from hypothesis import strategies as st

from registry.errors import SpecError
from registry.loader import parse_yaml

keys = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
scalars = st.one_of(st.integers(-1000, 1000), st.booleans(), st.none(), st.text(alphabet="xyz ", max_size=5),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
trees = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(keys, c, max_size=3)), max_leaves=12)


@given(st.dictionaries(keys, trees, min_size=1, max_size=5))
def test_parse_agrees_with_safe_load_and_positions_every_key(data: dict) -> None:
    """Invariant: for plain data, parse_yaml == yaml.safe_load and every mapping key has a position."""
    text = yaml.safe_dump(data, sort_keys=False)
    doc = parse_yaml(text)
    assert doc.data == yaml.safe_load(text)

    def walk(node: object, path: tuple) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                assert path + (k,) in doc.positions
                walk(v, path + (k,))

    walk(doc.data, ())


@given(st.lists(keys, min_size=1, max_size=4, unique=True), st.integers(0, 3))
def test_duplicate_key_at_any_depth_is_an_error_on_its_line(path: list[str], extra: int) -> None:
    """Invariant: a key repeated inside any mapping is rejected, and the error names the second line."""
    lines, indent = [], ""
    for k in path[:-1]:
        lines.append(f"{indent}{k}:")
        indent += "  "
    leaf = path[-1]
    lines += [f"{indent}{leaf}: 1"] + [f"{indent}other{i}: 2" for i in range(extra)] + [f"{indent}{leaf}: 3"]
    text = "\n".join(lines) + "\n"
    try:
        parse_yaml(text, "f.yaml")
    except SpecError as exc:
        assert exc.location.line == len(lines)
        assert "duplicate key" in str(exc)
    else:
        raise AssertionError("duplicate key accepted")


def test_merge_keys_are_plain_data() -> None:
    doc = parse_yaml("base: &b {x: 1}\nuse:\n  <<: *b\n  y: 2\n")
    assert doc.data["use"] == {"x": 1, "y": 2}
