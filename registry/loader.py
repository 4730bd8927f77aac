"""Safe YAML loading with positions, and spec validation with one-line, located errors.

* Only YAML's safe types: no ``!!python/...`` or custom tags (they are errors, not code).
* Duplicate keys are errors (the last value silently winning is a classic config bug).
* Every problem names ``file:line:col: field.path: message``; all problems of a file are
  reported at once, unknown keys with a "did you mean".
* ``extends: other.yaml`` (a path relative to the file) or ``extends: spec-name`` (a catalogued
  spec) inherits another spec: mappings merge key by key, everything else (lists, scalars) is
  replaced by the child, and a child value of ``null`` deletes the key. Chains are allowed, cycles
  are errors; errors in inherited fields name the parent file and line. Relative paths
  (``weights``, local ``id``, ``adapters``) resolve against the folder of the file that wrote
  them: inherited ones stay relative to the parent, and must lie in the parent's folder tree.
"""
from __future__ import annotations

import difflib
import os
import re
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from .errors import Location, SpecError, SpecErrors, ZooDeprecationWarning
from .discovery import source_files, spec_sources
from .files import MAX_FILE_BYTES, _digest, file_digest, read_spec_bytes, within  # noqa: F401 - within, file_digest re-exported
from .limits import EXTENDS_CHAIN
from . import sources
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


# ----------------------------------------------------------------------------- limits
MAX_DEPTH = 64  # nested collections; shipped specs use 7
MAX_NODES = 100_000  # scalars + collections, with every alias counted as what it expands to
MAX_ALIASES = 100  # ``*alias`` uses per file (a handful is plenty for sharing a block)
MAX_EXTENDS_CHARS = 1024  # length of an ``extends:`` path (255 per path component)


def _yaml_tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag


def _short(value: str, limit: int = 40) -> str:
    return repr(value if len(value) <= limit else value[:limit] + "...")


_Y = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_Y + t for t in ("str", "int", "float", "bool", "null", "timestamp", "binary")}
_MAPPING_TAGS = {_Y + "map", _Y + "set"}
_SEQUENCE_TAGS = {_Y + "seq", _Y + "omap", _Y + "pairs"}
_SAFE_TAGS = _SCALAR_TAGS | _MAPPING_TAGS | _SEQUENCE_TAGS | {_Y + "merge"}
_NULLS = {"", "~", "null", "Null", "NULL"}
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}
_scalar_constructor = yaml.SafeLoader("")  # only its (pure) construct_yaml_* methods are used


def _scalar(tag: str, value: str) -> Any:
    """Construct a scalar of a safe tag; a value the tag does not accept is a ``ValueError``."""
    if tag == _Y + "str":
        return value
    if tag == _Y + "null":
        if value not in _NULLS:
            raise ValueError(f"{_short(value)} is not a !!null value (use ~, null or nothing)")
        return None
    if tag == _Y + "bool":
        if value.lower() not in _BOOLS:
            raise ValueError(f"{_short(value)} is not a !!bool value (true/false, yes/no, on/off)")
        return _BOOLS[value.lower()]
    if tag == _Y + "binary":
        import base64
        import binascii

        try:
            return base64.b64decode("".join(value.split()), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{_short(value)} is not base64 (!!binary)") from None
    node = yaml.ScalarNode(tag, value)
    try:
        if tag == _Y + "int":
            return _scalar_constructor.construct_yaml_int(node)
        if tag == _Y + "float":
            return _scalar_constructor.construct_yaml_float(node)
        return _scalar_constructor.construct_yaml_timestamp(node)
    except Exception:  # noqa: BLE001 - int()/float()/datetime raise ValueError, a failed regex AttributeError, ...
        raise ValueError(f"{_short(value)} is not a valid {_yaml_tag(tag)} value") from None


class _Collection:
    """A mapping or sequence being built from parser events."""

    __slots__ = ("is_map", "tag", "path", "mark", "anchor", "value", "size", "log_start", "key", "key_mark",
                 "key_is_merge", "explicit", "merges")

    def __init__(self, is_map: bool, tag: str, path: PathKey, mark: tuple[int, int], anchor: str | None, log_start: int):
        self.is_map, self.tag, self.path, self.mark, self.anchor = is_map, tag, path, mark, anchor
        self.value: Any = {} if is_map else []
        self.size = 1
        self.log_start = log_start
        self.key: Any = _NO_KEY
        self.key_mark = (0, 0)
        self.key_is_merge = False
        self.explicit: set[Any] = set()
        self.merges: list[tuple[Any, PathKey, int, int, tuple[int, int]]] = []


_NO_KEY = object()


class _Builder:
    """Turn a libyaml event stream into plain data plus positions, iteratively (no recursion),
    within :data:`MAX_DEPTH`, :data:`MAX_NODES` and :data:`MAX_ALIASES`. Aliases reuse the
    value already built for their anchor (never re-walked) but count as their full size."""

    def __init__(self, loader: Any, doc: Document):
        self.loader, self.doc = loader, doc
        self.stack: list[_Collection] = []
        # anchor -> (value, size, path, log slice) once complete; None while still open (recursion)
        self.anchors: dict[str, tuple[Any, int, PathKey, int, int] | None] = {}
        self.log: list[tuple[PathKey, tuple[int, int]]] = []  # every position recorded, in order
        self.nodes = 0
        self.aliases = 0
        self.result: Any = _NO_KEY

    # -- helpers
    def error(self, message: str, mark: tuple[int, int], path: PathKey | None = None) -> SpecError:
        p = self.current_path() if path is None else path
        return SpecError(message, Location(self.doc.file, mark[0], mark[1], dotted(p) or None))

    def current_path(self) -> PathKey:
        if not self.stack:
            return ()
        top = self.stack[-1]
        if top.is_map:
            return top.path + (top.key,) if top.key is not _NO_KEY else top.path
        return top.path + (len(top.value),)

    def position(self, path: PathKey, mark: tuple[int, int]) -> None:
        self.doc.positions[path] = mark
        self.log.append((path, mark))

    def count(self, n: int, mark: tuple[int, int]) -> None:
        self.nodes += n
        if self.nodes > MAX_NODES:
            raise self.error(f"more than {MAX_NODES} nodes (aliases counted as what they expand to); "
                             "specs are small documents", mark)

    def relocate(self, src: PathKey, dst: PathKey, start: int, end: int, skip: set[Any] | None = None) -> None:
        """Copy the positions logged for ``src``'s subtree (log[start:end]) under ``dst``."""
        n = len(src)
        for path, mark in self.log[start:end]:
            if path[:n] != src or (skip is not None and len(path) > n and path[n] in skip):
                continue
            self.position(dst + path[n:], mark)

    # -- events
    def feed(self, event: Any) -> None:
        mark = (event.start_mark.line + 1, event.start_mark.column + 1)
        if isinstance(event, yaml.AliasEvent):
            self.alias(event.anchor, mark)
        elif isinstance(event, yaml.ScalarEvent):
            self.scalar(event, mark)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self.start(event, mark)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            self.end()

    def alias(self, anchor: str, mark: tuple[int, int]) -> None:
        self.aliases += 1
        if self.aliases > MAX_ALIASES:
            raise self.error(f"more than {MAX_ALIASES} aliases (*name); write the data out instead", mark)
        if anchor not in self.anchors:
            raise self.error(f"undefined alias *{anchor} (no &{anchor} before it)", mark)
        found = self.anchors[anchor]
        if found is None:
            raise self.error(f"recursive alias *{anchor} refers to a collection that contains it", mark)
        value, size, src, start, end = found
        self.count(size, mark)
        path = self.current_path()
        self.relocate(src, path, start, end)  # errors inside aliased data point at its definition
        self.position(path, mark)
        self.add(value, size, mark, is_merge_source=(src, start, end))

    def scalar(self, event: Any, mark: tuple[int, int]) -> None:
        self.count(1, mark)
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        top = self.stack[-1] if self.stack else None
        as_key = top is not None and top.is_map and top.key is _NO_KEY
        if tag == _Y + "merge":
            if not as_key:
                raise self.error("the merge key << may only be used as a mapping key", mark)
            top.key_is_merge = True  # type: ignore[union-attr]
            top.key, top.key_mark = "<<", mark  # type: ignore[union-attr]
            return
        if tag not in _SAFE_TAGS:
            raise self.error(f"YAML tag {tag!r} is not allowed in specs (specs are data only, no code-running tags)", mark)
        if tag not in _SCALAR_TAGS:
            raise self.error(f"tag {_yaml_tag(tag)} needs a {'mapping' if tag in _MAPPING_TAGS else 'sequence'}, "
                             f"not the scalar {_short(event.value)}", mark)
        try:
            value = _scalar(tag, event.value)
        except ValueError as exc:
            raise self.error(str(exc), mark) from None
        start = len(self.log)
        if not as_key:
            self.position(self.current_path(), mark)
        if event.anchor is not None:
            self.anchors[event.anchor] = (value, 1, self.current_path(), start, len(self.log))
        self.add(value, 1, mark)

    def start(self, event: Any, mark: tuple[int, int]) -> None:
        self.count(1, mark)
        is_map = isinstance(event, yaml.MappingStartEvent)
        if len(self.stack) >= MAX_DEPTH:
            raise self.error(f"collections nested deeper than {MAX_DEPTH} levels", mark)
        top = self.stack[-1] if self.stack else None
        if top is not None and top.is_map and top.key is _NO_KEY:
            raise self.error("mapping keys must be scalars", mark, top.path)
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.MappingNode if is_map else yaml.SequenceNode, None, event.implicit)
        if tag not in _SAFE_TAGS:
            raise self.error(f"YAML tag {tag!r} is not allowed in specs (specs are data only, no code-running tags)", mark)
        if tag not in (_MAPPING_TAGS if is_map else _SEQUENCE_TAGS):
            kind = "mapping" if is_map else "sequence"
            raise self.error(f"tag {_yaml_tag(tag)} cannot be applied to a {kind}", mark)
        path = self.current_path()
        self.position(path, mark)
        if event.anchor is not None:
            self.anchors[event.anchor] = None  # open: an alias to it now would be recursive
        self.stack.append(_Collection(is_map, tag, path, mark, event.anchor, len(self.log) - 1))

    def end(self) -> None:
        c = self.stack.pop()
        value: Any = c.value
        if c.is_map:
            for merged, src, start, end, mark in c.merges:
                for k, v in merged.items():
                    if k not in c.explicit and k not in value:
                        value[k] = v
                self.relocate(src, c.path, start, end, skip=c.explicit)
            if c.tag == _Y + "set":
                if any(v is not None for v in value.values()):
                    raise self.error("!!set entries take no values (write {a, b} or ? a)", c.mark, c.path)
                value = set(value)
        elif c.tag == _Y + "omap" or c.tag == _Y + "pairs":
            pairs = []
            for i, item in enumerate(value):
                if not (isinstance(item, dict) and len(item) == 1):
                    raise self.error(f"{_yaml_tag(c.tag)} entries must be one-key mappings (- key: value)",
                                     self.doc.positions.get(c.path + (i,), c.mark), c.path + (i,))
                pairs.append(next(iter(item.items())))
            if c.tag == _Y + "pairs":
                value = [list(p) for p in pairs]
            else:
                value = {}
                for i, (k, v) in enumerate(pairs):
                    if k in value:
                        raise self.error(f"duplicate key {k!r} in !!omap", self.doc.positions.get(c.path + (i,), c.mark),
                                         c.path + (i,))
                    value[k] = v
        if c.anchor is not None:
            self.anchors[c.anchor] = (value, c.size, c.path, c.log_start, len(self.log))
        self.add(value, c.size, c.mark, is_merge_source=(c.path, c.log_start, len(self.log)))

    def add(self, value: Any, size: int, mark: tuple[int, int],
            is_merge_source: tuple[PathKey, int, int] | None = None) -> None:
        if not self.stack:
            self.result = value
            return
        top = self.stack[-1]
        top.size += size
        if not top.is_map:
            top.value.append(value)
            return
        if top.key is _NO_KEY:  # this value is a key
            if isinstance(value, (dict, list, set)):
                raise self.error("mapping keys must be scalars", mark, top.path)
            if not (value is None or isinstance(value, (str, int, float, bool))):
                raise self.error(f"mapping keys must be strings or numbers, not {type(value).__name__}", mark, top.path)
            if value in top.explicit:
                first = self.doc.positions.get(top.path + (value,), (None, None))
                raise self.error(f"duplicate key {value!r} (first defined at line {first[0]}); remove one of them",
                                 mark, top.path + (value,))
            top.key, top.key_mark = value, mark
            return
        key, key_mark = top.key, top.key_mark
        top.key = _NO_KEY
        if top.key_is_merge:
            top.key_is_merge = False
            if top.merges:
                raise self.error("duplicate merge key <<", key_mark, top.path)
            sources = [value] if isinstance(value, dict) else value if isinstance(value, list) else None
            if not sources or not all(isinstance(s, dict) for s in sources):
                raise self.error("the merge key << takes a mapping or a list of mappings (usually *aliases)", mark, top.path)
            src, start, end = is_merge_source or (top.path + ("<<",), 0, 0)
            if isinstance(value, dict):
                top.merges.append((value, src, start, end, mark))
            else:  # earlier mappings win; positions of a list's items are not relocated
                merged: dict[Any, Any] = {}
                for s in sources:
                    for k, v in s.items():
                        merged.setdefault(k, v)
                top.merges.append((merged, src, 0, 0, mark))
            return
        top.explicit.add(key)
        top.value[key] = value
        self.position(top.path + (key,), key_mark)  # a field's errors point at its key, not its value


def parse_yaml(text: str, file: str = "<string>") -> Document:
    """Parse one YAML document safely, recording positions; raise :class:`SpecError`.

    Only YAML's own data tags, bounded size (:data:`MAX_NODES`, :data:`MAX_DEPTH`,
    :data:`MAX_ALIASES`); any problem, including a value its tag rejects, is a located error.
    """
    loader = _BaseLoader(text)
    doc = Document(None, file)
    builder = _Builder(loader, doc)
    mark = (1, 1)
    try:
        documents = 0
        while True:
            event = loader.get_event()
            mark = (event.start_mark.line + 1, event.start_mark.column + 1)
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise SpecError("expected a single document in the file, found another one (---)",
                                    Location(file, *mark))
            elif isinstance(event, yaml.StreamEndEvent):
                break
            elif not isinstance(event, (yaml.StreamStartEvent, yaml.DocumentEndEvent)):
                builder.feed(event)
        if documents == 0 or builder.result is _NO_KEY:
            raise SpecError("empty file: expected a mapping of spec fields", Location(file, 1, 1))
        doc.data = builder.result
    except SpecError:
        raise
    except yaml.MarkedYAMLError as exc:
        m = exc.problem_mark or exc.context_mark
        line, col = (m.line + 1, m.column + 1) if m else (None, None)
        problem = exc.problem or str(exc)
        raise SpecError(f"invalid YAML: {problem}", Location(file, line, col)) from None
    except yaml.reader.ReaderError as exc:
        pos = max(0, min(int(exc.position), len(text)))
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        raise SpecError(f"invalid YAML: {exc.reason} ({exc.character!r})", Location(file, line, col)) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {exc}", Location(file, *mark)) from None
    except (RecursionError, MemoryError):
        raise SpecError("invalid YAML: document too large or too deeply nested", Location(file, *mark)) from None
    finally:
        loader.dispose()
    return doc


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


def _data_path(data: Any, loc: tuple[Any, ...], name_missing: bool = True) -> PathKey:
    """Map a pydantic error ``loc`` onto a path that exists in the data (drops union tags). With
    ``name_missing``, a last part absent from the data is kept (a missing field); a validator's error
    ends in the union tag instead (``...full.transformers``), which is dropped."""
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
        elif isinstance(cur, dict) and isinstance(part, str) and last and name_missing:
            # a missing or unknown field: point at the parent, name the field
            out.append(part)
            cur = None
        # anything else is a union tag or validator frame that names no data: skip it
    return tuple(out)


def validation_errors(doc: Document, exc: ValidationError) -> list[SpecError]:
    errors: list[SpecError] = []
    for err in exc.errors(include_url=False):
        msg = err["msg"]
        kind = err["type"]
        path = _data_path(doc.data, tuple(err["loc"]), name_missing=kind != "value_error")
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
    sources.ensure_tags(_source_tags(doc.data))  # a tag no kind answers to: installed `zoo.sources` kinds, once
    try:
        return Spec.model_validate(doc.data)
    except ValidationError as exc:
        errs = validation_errors(doc, exc)
        raise SpecErrors(errs) from None


def _source_tags(data: dict[str, Any]) -> set[str]:
    """The ``source:`` tags a spec's model roles use (strings only; anything else is left to the schema)."""
    models = data.get("models")
    tags = set()
    for model in models.values() if isinstance(models, dict) else ():
        variants = model.get("variants") if isinstance(model, dict) else None
        for src in variants.values() if isinstance(variants, dict) else ():
            if isinstance(src, dict) and isinstance(src.get("source"), str):
                tags.add(src["source"])
    return tags


_DOCUMENTS: dict[str, Document] = {}

#: Parsed files by (path, sha1 of their bytes): each spec file (an ``extends`` parent shared by many
#: children included) is parsed once per process; an edited file has other bytes and is parsed again.
_PARSED: "OrderedDict[tuple[str, str], Document | SpecError]" = OrderedDict()
_PARSED_MAX = 4096


def parse_cached(raw: bytes, file: str) -> Document:
    """:func:`parse_yaml` of a file's bytes, memoised by path and content (errors too). The returned
    Document's position maps are copies; its data is shared and must not be mutated (nothing does:
    :func:`merge` builds new mappings)."""
    key = (file, _digest(raw))
    hit = _PARSED.get(key)
    if hit is None:
        try:
            hit = parse_yaml(_decode(raw, file), file)
        except SpecError as exc:
            hit = exc
        _PARSED[key] = hit
        while len(_PARSED) > _PARSED_MAX:
            _PARSED.popitem(last=False)
    else:
        _PARSED.move_to_end(key)
    if isinstance(hit, SpecError):
        raise hit
    return Document(hit.data, hit.file, dict(hit.positions), dict(hit.origins))


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


def spec_roots(file: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> tuple[Path, ...]:
    """Folders a spec may read from: its own folder tree, plus ``root`` (the caller's) or, when
    no ``root`` is given, ``$ZOO_SPEC_ROOT``."""
    extra = root if root is not None else os.environ.get("ZOO_SPEC_ROOT") or None
    roots = [Path(os.path.realpath(Path(file).parent))]
    if extra is not None:
        roots.append(Path(os.path.realpath(Path(extra).expanduser())))
    return tuple(roots)


def _outside(path: Path, roots: tuple[Path, ...], what: str) -> str | None:
    if any(within(r, path) for r in roots):
        return None
    return (f"{what} {path} is outside the spec's folder tree ({roots[0]}); a spec reads files only there "
            "unless the caller allows more (ZOO_SPEC_ROOT=folder, or root= in Python)")


def _decode(raw: bytes, file: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError(f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be decoded", Location(file, line, col)) from None


Reads = list[tuple[str, "str | None"]]


_SPEC_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def _extends_path(ref: Any, p: Path, here: Location) -> Path:
    """The parent file ``extends: ref`` names: a path (``*.yaml``/``*.yml``, relative to this
    file) or a spec name found through the catalog's sources (see :func:`find_spec_by_name`)."""
    if not isinstance(ref, str):
        raise SpecError("expected the path of a spec file relative to this one (e.g. ddim.yaml) or a spec name", here)
    if not ref.isprintable():
        raise SpecError(f"the path {ref!r} contains control characters", here)
    if len(ref) > MAX_EXTENDS_CHARS or any(len(part.encode()) > 255 for part in ref.split("/")):
        raise SpecError(f"the path is too long ({len(ref)} characters; at most {MAX_EXTENDS_CHARS}, 255 per name)", here)
    if ref.endswith((".yaml", ".yml")):
        return p.parent / ref
    if not _SPEC_NAME.fullmatch(ref):
        raise SpecError(f"expected a spec file (*.yaml) or a spec name (lower-case letters, digits, -), got {ref!r}", here)
    found = find_spec_by_name(ref, exclude=p)
    if found is None:
        raise SpecError(f"no spec named {ref!r} in the catalog (built-ins, zoo.specs plugins, "
                        "ZOO_SPECS_PATH); name a file instead (a path ending in .yaml)", here)
    return found


def find_spec_by_name(name: str, exclude: Path | None = None) -> Path | None:
    """The file of the catalogued spec called ``name`` (built-ins, ``zoo.specs`` entry points,
    ``$ZOO_SPECS_PATH``), found by reading each candidate's ``name:`` only (no ``extends``, no
    validation, so a spec extending by name never recurses into indexing). Files named
    ``<name>.yaml`` are tried first."""
    files = [f for src, _ in spec_sources()[0] for f in source_files(src)]
    files.sort(key=lambda f: f.stem != name)
    skip = os.path.realpath(exclude) if exclude is not None else None
    for f in files:
        if skip is not None and os.path.realpath(f) == skip:
            continue
        try:
            doc = parse_cached(read_spec_bytes(f), str(f))
        except SpecError:
            continue
        if isinstance(doc.data, dict) and doc.data.get("name") == name:
            return f
    return None


def origin_dir(file: str | None, path: PathKey, fallback: Path) -> Path:
    """The folder of the spec file that wrote the value at ``path`` (a parent's, when inherited through
    ``extends``): where a relative file name written there resolves."""
    if file is None:
        return fallback
    doc = _document(file)
    if tuple(path) not in doc.positions:
        return fallback
    return Path(doc.origins.get(tuple(path), doc.file)).resolve().parent


def source_dir(file: str | None, role: str, variant: str, fallback: Path) -> Path:
    """The folder a model source's relative paths (``weights``, a local ``id``, ``adapters``) resolve
    against: the folder of the spec file that wrote them, so paths inherited through ``extends``
    stay relative to the parent."""
    if file is None:
        return fallback
    doc = _document(file)
    base = ("models", role, "variants", variant)
    for key in ("weights", "id", "adapters", "model_name"):
        if base + (key,) in doc.positions:
            return Path(doc.origins.get(base + (key,), doc.file)).resolve().parent
    return fallback


class _ChainTooLong(SpecError):
    """An ``extends`` chain over :data:`registry.limits.EXTENDS_CHAIN` files."""


def _chain_message(chain: tuple[Path, ...]) -> str:
    names = [c.name for c in chain]
    shown = " -> ".join(names[:3]) + (" -> ..." if len(names) > 3 else "")
    return (f"extends chain longer than the limit EXTENDS_CHAIN = {EXTENDS_CHAIN.value} files (registry.limits): "
            f"{shown}; inherit from a spec nearer the root")


# ----------------------------------------------------------------------------- deprecated spellings
#: keys of earlier releases, read for one release (rewritten before validation, each occurrence warned):
#: old key -> the path of keys that replaces it, under the same mapping
DEPRECATED_KEYS: dict[str, tuple[str, ...]] = {
    "variant_defaults": ("default_by_variant",),   # Spec
    "variant_params": ("params_by_variant",),      # ProcedureSpec (samplers.<name>, recipes.<name>)
    "tiny_config": ("tiny", "config"),             # a `source: zoo` model source
}


def _deprecated_sites(data: Any, inherited: Any = None) -> list[tuple[PathKey, str]]:
    """``(mapping path, old key)`` of every deprecated spelling in one file's data. ``inherited``: the merged data of
    the ``extends`` parent, where a child's model source that does not repeat its ``source:`` finds it."""
    out: list[tuple[PathKey, str]] = []
    if not isinstance(data, dict):
        return out
    if "variant_defaults" in data:
        out.append(((), "variant_defaults"))
    for section in ("samplers", "recipes"):
        procs = data.get(section)
        for name, proc in procs.items() if isinstance(procs, dict) else ():
            if isinstance(proc, dict) and "variant_params" in proc:
                out.append(((section, name), "variant_params"))
    models = data.get("models")
    for role, model in models.items() if isinstance(models, dict) else ():
        variants = model.get("variants") if isinstance(model, dict) else None
        for v, src in variants.items() if isinstance(variants, dict) else ():
            if not (isinstance(src, dict) and "tiny_config" in src):
                continue
            kind = src.get("source", _get(inherited, ("models", role, "variants", v, "source")))
            if kind in ("zoo", None):  # another kind never had tiny_config: its schema reports the unknown key
                out.append((("models", role, "variants", v), "tiny_config"))
    return out


def _get(data: Any, path: PathKey) -> Any:
    for part in path:
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _replace_at(data: Any, path: PathKey, fn: Any) -> Any:
    """``data`` with the mapping at ``path`` replaced by ``fn(mapping)``; mappings on the way are copied, never
    mutated (parsed data is shared by the parse cache and by YAML aliases)."""
    if not path:
        return fn(data)
    out = dict(data)
    out[path[0]] = _replace_at(data[path[0]], path[1:], fn)
    return out


def _renamed(mapping: dict[Any, Any], old: str, new: tuple[str, ...]) -> dict[Any, Any]:
    """``mapping`` with ``old`` replaced, in place of order, by ``new[0]`` (its value nested under ``new[1:]``; a
    ``null``, which deletes an inherited key, stays a ``null``)."""
    value = mapping[old]
    for key in reversed(new[1:]):
        value = None if value is None else {key: value}
    return {(new[0] if k == old else k): (value if k == old else v) for k, v in mapping.items()}


def rewrite_deprecated(doc: Document, inherited: Any = None, warn: bool = True) -> Document:
    """One file's document with the deprecated spellings of :data:`DEPRECATED_KEYS` rewritten to their new names,
    before ``extends`` merging and validation; the position maps follow (an error under a renamed key still names
    its line). Each occurrence emits one :class:`registry.errors.ZooDeprecationWarning`
    (``file:line:col: old is deprecated, write new``) when ``warn``; the old and the new spelling in one mapping is a
    located error."""
    sites = _deprecated_sites(doc.data, inherited)
    if not sites:
        return doc
    problems: list[SpecError] = []
    data = doc.data
    positions, origins = dict(doc.positions), dict(doc.origins)
    for at, old in sites:
        new = DEPRECATED_KEYS[old]
        new_name = ".".join(new)
        here = doc.location(at + (old,))
        if new[0] in _get(data, at):
            problems.append(SpecError(f"{old} and {new[0]} both given: {old} is the deprecated spelling of {new_name}; "
                                      f"write only {new_name}", here))
            continue
        if warn:
            warnings.warn(f"{here.file}:{here.line}:{here.column}: {old} is deprecated, write {new_name}",
                          ZooDeprecationWarning, stacklevel=2)
        data = _replace_at(data, at, lambda m, old=old, new=new: _renamed(m, old, new))
        n = len(at) + 1
        for table in (positions, origins):
            moved = {at + new + k[n:]: table.pop(k) for k in [k for k in table if k[:n] == at + (old,)]}
            for i in range(1, len(new)):  # a new outer key (tiny of tiny.config) is where the old key was
                if at + new in moved:
                    moved.setdefault(at + new[:i], moved[at + new])
            table.update(moved)
    if problems:
        raise SpecErrors(problems)
    return Document(data, doc.file, positions, origins)


def read_document(path: str | Path, _chain: tuple[Path, ...] = (), *, root: str | os.PathLike[str] | None = None,
                  reads: Reads | None = None, _roots: tuple[Path, ...] | None = None, warn: bool = True) -> Document:
    """Parse a spec file and resolve its ``extends`` chain into one document.

    Parents must lie in the spec's folder tree (or under ``root`` / ``$ZOO_SPEC_ROOT``).
    ``reads`` collects ``(path, sha1 or None)`` of every file read or looked for, so a cache
    can tell when the result may have changed. Each file's deprecated spellings are rewritten
    (:func:`rewrite_deprecated`; ``warn``: emit their warnings) before it is merged."""
    p = Path(path)
    roots = _roots or spec_roots(p, root)
    try:
        raw = read_spec_bytes(p)
    except SpecError:
        if reads is not None:
            reads.append((str(p), None))
        raise
    if reads is not None:
        reads.append((str(p), _digest(raw)))
    doc = parse_cached(raw, str(p))
    if not (isinstance(doc.data, dict) and "extends" in doc.data):
        if isinstance(doc.data, dict) and "inherit_metrics" in doc.data:
            raise SpecError("inherit_metrics says what an `extends:` child inherits; this spec extends nothing",
                            doc.location(("inherit_metrics",)))
        return rewrite_deprecated(doc, warn=warn)
    here = doc.location(("extends",))
    if len(_chain) + 1 >= EXTENDS_CHAIN.value:  # this file and its parent would make the chain longer than the cap
        raise _ChainTooLong(_chain_message(_chain + (p,)), here)
    joined = _extends_path(doc.data["extends"], p, here)
    try:
        parent_path = joined.resolve()
        chain = _chain + (p.resolve(),)
    except (OSError, RuntimeError, ValueError) as exc:
        raise SpecError(f"cannot resolve {joined}: {exc}", here) from None
    by_name = not str(doc.data["extends"]).endswith((".yaml", ".yml"))
    outside = None if by_name else _outside(parent_path, roots, "the parent")  # a catalogued spec is not a path read
    if outside:
        raise SpecError(outside, here)
    if parent_path in chain:
        raise SpecError(f"extends cycle: {' -> '.join(c.name for c in chain)} -> {parent_path.name}", here)
    try:
        parent = read_document(parent_path, chain, reads=reads, _roots=spec_roots(parent_path, root) if by_name else roots,
                               warn=warn)
    except _ChainTooLong as exc:  # reported at the extends line of the file asked for, not deep in the chain
        raise _ChainTooLong(exc.message, here) from None
    except SpecError as exc:
        if exc.location.file == str(parent_path) and exc.location.line is None:  # the parent file itself
            raise SpecError(f"extends {parent_path}: {exc.message}", here) from None
        raise
    doc = rewrite_deprecated(doc, parent.data, warn=warn)
    child = {k: v for k, v in doc.data.items() if k != "extends"}
    merged = Document(merge(parent.data, child), str(p))
    for key, pos in parent.positions.items():
        if key not in doc.positions:
            merged.positions[key] = pos
            merged.origins[key] = parent.origins.get(key, parent.file)
    merged.positions.update(doc.positions)
    _inherit_metrics(merged, child)
    return merged


def _inherit_metrics(merged: Document, child: dict[str, Any]) -> None:
    """``inherit_metrics`` (see :class:`registry.spec.Spec`): a child without a ``metrics:`` list of its own keeps
    the parent's ``reported`` metrics (default), ``all`` of them, or ``none``; positions of the kept entries follow
    them, so an error in one still names the parent's line. The policy belongs to this file's ``extends`` only:
    a parent's own ``inherit_metrics`` is not passed down."""
    policy = child.get("inherit_metrics", "reported")
    if "inherit_metrics" not in child and isinstance(merged.data, dict):
        merged.data.pop("inherit_metrics", None)
    if "metrics" in child or policy not in ("reported", "none") or not isinstance(merged.data, dict):
        return  # the child's own list, `all`, or a bad value (the schema reports it, located)
    metrics = merged.data.get("metrics")
    if not isinstance(metrics, list):
        return
    keep = [i for i, m in enumerate(metrics)
            if policy == "reported" and isinstance(m, dict) and m.get("kind") == "reported"]
    new_index = {old: new for new, old in enumerate(keep)}
    merged.data["metrics"] = [metrics[i] for i in keep]
    for table in (merged.positions, merged.origins):
        moved = {}
        for key in [k for k in table if len(k) > 1 and k[0] == "metrics" and isinstance(k[1], int)]:
            value = table.pop(key)
            if key[1] in new_index:
                moved[("metrics", new_index[key[1]], *key[2:])] = value
        table.update(moved)


def check_paths(spec: Spec, doc: Document, roots: tuple[Path, ...], root: str | os.PathLike[str] | None = None) -> None:
    """Weights a spec names must lie inside the folder tree of the file that names them (a parent's
    own weights inside the parent's tree), or the caller's root."""
    problems = []

    def tree(path: PathKey) -> tuple[Path, tuple[Path, ...]]:
        origin = doc.origins.get(path, doc.file)
        if origin == doc.file:
            return Path(doc.file).parent, roots
        return Path(origin).parent, spec_roots(origin, root)

    for role, model in spec.models.items():
        for variant, src in model.variants.items():
            at = ("models", role, "variants", variant)
            weights = getattr(src, "weights", None)
            if isinstance(weights, str):  # a hub file ({hub, filename, ...}) is fetched, not read from the tree
                base, where = tree(at + ("weights",))
                outside = _outside(base / weights, where, "the weights file")
                if outside:
                    problems.append(SpecError(outside, doc.location(at + ("weights",))))
            for key, ref in src.config_files().items():
                base, where = tree(at + ("transform_config", key, "file"))
                outside = _outside(base / ref.file, where, "the file")
                if outside:
                    problems.append(SpecError(outside, doc.location(at + ("transform_config", key, "file"))))
            for i, adapter in enumerate(getattr(src, "adapters", None) or []):
                base, where = tree(at + ("adapters",))
                outside = _outside(base / adapter.path, where, "the adapter folder") if adapter.path else None
                if outside:
                    problems.append(SpecError(outside, doc.location(at + ("adapters", i, "path"))))
    if problems:
        raise SpecErrors(problems)


def _document(file: str) -> Document:
    doc = _DOCUMENTS.get(str(file))
    if doc is None:
        try:
            doc = read_document(file, warn=False)  # positions only: load_spec_file warned
        except SpecError:
            doc = Document(None, str(file))
        _DOCUMENTS[str(file)] = doc
    return doc


def locate(file: str | None, field_path: str) -> Location:
    """Location (with line and column) of a dotted field path in a spec file already loaded."""
    if file is None:
        return Location(None, None, None, field_path)
    doc = _document(file)
    parts = tuple(int(p) if p.isdigit() else p for p in field_path.split(".")) if field_path else ()
    return doc.location(parts, field_path)


def load_spec_file(path: str | Path, *, root: str | os.PathLike[str] | None = None, reads: Reads | None = None) -> Spec:
    """Read, parse (with ``extends``) and validate one spec file; all problems at once in :class:`SpecErrors`.

    Files the spec names (``extends:`` parents, ``weights``) must lie in its folder tree, or
    under ``root`` (default ``$ZOO_SPEC_ROOT``) when the caller allows more."""
    roots = spec_roots(path, root)
    doc = read_document(path, reads=reads, _roots=roots)
    _DOCUMENTS[str(path)] = doc
    spec = validate_document(doc)
    check_paths(spec, doc, roots, root)
    return spec
