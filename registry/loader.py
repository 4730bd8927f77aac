"""Safe YAML loading with positions, and spec validation with one-line, located errors.

* Only YAML's safe types: no ``!!python/...`` or custom tags (they are errors, not code).
* Duplicate keys are errors (the last value silently winning is a classic config bug).
* Every problem names ``file:line:col: field.path: message``; all problems of a file are
  reported at once, unknown keys with a "did you mean".
* ``extends: other.yaml`` (a path relative to the file) inherits another spec: mappings merge
  key by key, everything else (lists, scalars) is replaced by the child, and a child value of
  ``null`` deletes the key. Chains are allowed, cycles are errors; errors in inherited fields
  name the parent file and line. Relative ``weights`` paths resolve against the child's folder.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .errors import Location, SpecError, SpecErrors
from .spec import Spec

try:  # the C loader is several times faster for listing many specs
    _BaseLoader = yaml.CSafeLoader  # type: ignore[attr-defined]
except AttributeError:  # pragma: no cover - libyaml missing
    _BaseLoader = yaml.SafeLoader

PathKey = tuple[Any, ...]


@dataclass
class Document:
    """Parsed YAML plus the position of every key and value (by field path)."""

    data: Any
    file: str
    positions: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    origins: dict[PathKey, str] = field(default_factory=dict)  # inherited paths -> the file defining them

    def location(self, path: PathKey, field_name: str | None = None) -> Location:
        """Location of the deepest existing prefix of ``path``."""
        probe = tuple(path)
        while probe and probe not in self.positions:
            probe = probe[:-1]
        line, col = self.positions.get(probe, (1, 1))
        file = self.origins.get(probe, self.file)
        return Location(file, line, col, field_name if field_name is not None else dotted(path))


def dotted(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def parse_yaml(text: str, file: str = "<string>") -> Document:
    """Parse one YAML document safely, recording positions; raise :class:`SpecError`."""
    loader = _BaseLoader(text)
    doc = Document(None, file)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError("empty file: expected a mapping of spec fields", Location(file, 1, 1))
        doc.data = _construct(loader, node, (), doc)
    except SpecError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        problem = exc.problem or str(exc)
        raise SpecError(f"invalid YAML: {problem}", Location(file, line, col)) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {exc}", Location(file)) from None
    finally:
        loader.dispose()
    return doc


def _construct(loader: Any, node: yaml.Node, path: PathKey, doc: Document) -> Any:
    doc.positions[path] = _mark(node)
    if node.tag not in _SAFE_TAGS:
        raise SpecError(
            f"YAML tag {node.tag!r} is not allowed in specs (specs are data only, no code-running tags)",
            Location(doc.file, *_mark(node), dotted(path) or None),
        )
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise SpecError("mapping keys must be scalars", Location(doc.file, *_mark(key_node), dotted(path)))
            if key in out:
                first = doc.positions.get(path + (key,), (None, None))
                raise SpecError(
                    f"duplicate key {key!r} (first defined at line {first[0]}); remove one of them",
                    Location(doc.file, *_mark(key_node), dotted(path + (key,))),
                )
            out[key] = _construct(loader, value_node, path + (key,), doc)
            doc.positions[path + (key,)] = _mark(key_node)  # a field's errors point at its key, not its value
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_construct(loader, item, path + (i,), doc) for i, item in enumerate(node.value)]
    return loader.construct_object(node, deep=True)


_SAFE_TAGS = {
    "tag:yaml.org,2002:" + t
    for t in ("map", "seq", "str", "int", "float", "bool", "null", "timestamp", "binary", "omap", "pairs", "set", "merge")
}


@lru_cache(maxsize=1)
def _all_field_names() -> tuple[str, ...]:
    """Every field name of the schema's models, for "did you mean" suggestions."""
    from . import spec as spec_module

    names = {
        name
        for obj in vars(spec_module).values()
        if isinstance(obj, type) and issubclass(obj, BaseModel) and obj is not BaseModel
        for name in obj.model_fields
    }
    return tuple(sorted(names))


def _data_path(data: Any, loc: tuple[Any, ...]) -> PathKey:
    """Map a pydantic error ``loc`` onto a path that exists in the data (drops union tags)."""
    out: list[Any] = []
    cur = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, dict) and isinstance(part, str) and last:
            # a missing or unknown field: point at the parent, name the field
            out.append(part)
            cur = None
        # anything else is a union tag or validator frame that names no data: skip it
    return tuple(out)


def validation_errors(doc: Document, exc: ValidationError) -> list[SpecError]:
    errors: list[SpecError] = []
    for err in exc.errors(include_url=False):
        path = _data_path(doc.data, tuple(err["loc"]))
        msg = err["msg"]
        kind = err["type"]
        if kind == "extra_forbidden":
            key = str(path[-1]) if path else "?"
            close = difflib.get_close_matches(key, _all_field_names(), n=1, cutoff=0.6)
            msg = f"unknown field {key!r}" + (f"; did you mean {close[0]!r}?" if close else "")
        elif kind == "missing":
            msg = "required field is missing"
        elif kind.endswith("_type") or kind in ("literal_error", "string_pattern_mismatch", "union_tag_invalid"):
            got = err.get("input")
            shown = repr(got) if not isinstance(got, (dict, list)) else type(got).__name__
            msg = f"{msg} (got {shown})"
        elif kind == "value_error":
            msg = msg.removeprefix("Value error, ")
            # validators say "field: message"; move the field into the path
            head, sep, tail = msg.partition(": ")
            if sep and head.replace("_", "").replace(".", "").isalnum() and " " not in head:
                path = path + tuple(head.split("."))
                msg = tail
        errors.append(SpecError(msg, doc.location(path)))
    # keep file order
    errors.sort(key=lambda e: (e.location.line or 0, e.location.column or 0))
    return errors


def validate_document(doc: Document) -> Spec:
    if not isinstance(doc.data, dict):
        raise SpecError("a spec must be a YAML mapping of fields", doc.location(()))
    try:
        return Spec.model_validate(doc.data)
    except ValidationError as exc:
        errs = validation_errors(doc, exc)
        raise SpecErrors(errs) from None


_DOCUMENTS: dict[str, Document] = {}


def merge(base: Any, over: Any) -> Any:
    """``extends`` semantics: mappings merge recursively, a ``None`` in ``over`` deletes the key,
    anything else in ``over`` replaces. Inputs are not modified."""
    if not (isinstance(base, dict) and isinstance(over, dict)):
        return over
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            # merge into the inherited mapping, or into nothing (which still drops null markers)
            out[key] = merge(out[key] if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = value
    return out


def read_document(path: str | Path, _chain: tuple[Path, ...] = ()) -> Document:
    """Parse a spec file and resolve its ``extends`` chain into one document."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError("no such file", Location(str(p))) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read: {exc}", Location(str(p))) from None
    doc = parse_yaml(text, str(p))
    if not (isinstance(doc.data, dict) and "extends" in doc.data):
        return doc
    ref = doc.data["extends"]
    here = doc.location(("extends",))
    if not isinstance(ref, str) or not ref.endswith((".yaml", ".yml")):
        raise SpecError("expected the path of a spec file relative to this one, e.g. ddim.yaml", here)
    parent_path = (p.parent / ref).resolve()
    chain = _chain + (p.resolve(),)
    if parent_path in chain:
        raise SpecError(f"extends cycle: {' -> '.join(c.name for c in chain)} -> {parent_path.name}", here)
    if not parent_path.is_file():
        raise SpecError(f"extends: no such file {parent_path}", here)
    parent = read_document(parent_path, chain)
    child = {k: v for k, v in doc.data.items() if k != "extends"}
    merged = Document(merge(parent.data, child), str(p))
    for key, pos in parent.positions.items():
        if key not in doc.positions:
            merged.positions[key] = pos
            merged.origins[key] = parent.origins.get(key, parent.file)
    merged.positions.update(doc.positions)
    return merged


def locate(file: str | None, field_path: str) -> Location:
    """Location (with line and column) of a dotted field path in a spec file already loaded."""
    if file is None:
        return Location(None, None, None, field_path)
    doc = _DOCUMENTS.get(str(file))
    if doc is None:
        try:
            doc = read_document(file)
        except SpecError:
            doc = Document(None, str(file))
        _DOCUMENTS[str(file)] = doc
    parts = tuple(int(p) if p.isdigit() else p for p in field_path.split(".")) if field_path else ()
    return doc.location(parts, field_path)


def load_spec_file(path: str | Path) -> Spec:
    """Read, parse (with ``extends``) and validate one spec file; all problems at once in :class:`SpecErrors`."""
    doc = read_document(path)
    _DOCUMENTS[str(path)] = doc
    return validate_document(doc)
