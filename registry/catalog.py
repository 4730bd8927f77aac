"""Discovery and listing of specs: built-in and plugin packages (entry-point group
``zoo.specs``), folders added at run time (:func:`Catalog.add_path`, ``ZOO_SPECS_PATH``).

Listing and validation import no torch/transformers/diffusers/timm. Broken specs are kept
and reported (``zoo list``, ``zoo doctor``), one line each, never skipped silently and never
in the way of the others: a malformed spec, a directory, FIFO, device or dangling symlink
named ``*.yaml`` (never opened), an unreadable file. When two files declare the same name the
first discovered keeps it (built-ins first) and the later one is broken, naming both.

Listing reads a small index cache (``$ZOO_CACHE_DIR`` or ``~/.cache/zoo``) of each file's
header (name, task, tags, variants, accelerators, or its error), keyed by path, the content
hashes of every file the loader read for it (the ``extends`` chain included) and a
fingerprint of the schema code: a warm ``zoo list`` parses no YAML and imports no pydantic.
Any change to a file re-validates it; a mis-shaped index counts as absent, and a header is
checked against its file before the spec is used. ``ZOO_NO_INDEX_CACHE=1`` turns it off.
"""
from __future__ import annotations

import fnmatch
import os
import re
import threading
from pathlib import Path

from typing import TYPE_CHECKING, Any

from .discovery import SPECS_GROUP, package_dirs, source_files, spec_sources  # noqa: F401 - SPECS_GROUP, package_dirs re-exported
from .errors import CollisionError, Location, NotFoundError, SpecError

if TYPE_CHECKING:
    from .spec import Spec

#: what ``fits=`` / ``zoo list --fits`` accepts (the ``hardware.<variant>.accelerator`` values that name a device)
ACCELERATORS = ("cpu", "cuda", "mps")


class FilterError(NotFoundError):
    """A listing filter (``task``, ``tags``, ``fits``) that no spec can match: a typo, reported with did-you-mean."""


class Entry:
    """One spec file: its header (for listing), its validated spec (loaded on first use), or
    the error that makes it unusable. ``from_index``: the header came from the index cache and
    has not been checked against the file yet."""

    def __init__(self, path: Path, origin: str, spec: "Spec | None" = None, error: SpecError | None = None,
                 header: dict[str, Any] | None = None, from_index: bool = False):
        self.path, self.origin, self.error = path, origin, error
        self._spec = spec
        self.header = header if header is not None else (_header(spec) if spec is not None else None)
        self.from_index = from_index

    @property
    def spec(self) -> "Spec | None":
        if self._spec is None and self.error is None:
            from .loader import load_spec_file

            try:
                self._spec = load_spec_file(self.path)
            except SpecError as exc:  # the file changed since it was indexed
                self.error = exc
        return self._spec

    def verified(self) -> bool:
        """Load the spec and check the header listed for it; ``False`` if the index lied."""
        spec = self.spec
        if spec is None:
            return not self.from_index
        real = _header(spec)
        ok = self.header == real
        self.header, self.from_index = real, False
        return ok

    @property
    def name(self) -> str:
        if self.header is not None:
            return str(self.header["name"])
        return self.path.stem

    def __repr__(self) -> str:
        return f"Entry({self.name!r}, {str(self.path)!r}, {'broken' if self.error else 'ok'})"


def _header(spec: "Spec") -> dict[str, Any]:
    return {
        "name": spec.name, "title": spec.title, "task": spec.task, "tags": list(spec.tags),
        "variants": list(spec.variants), "accelerators": sorted({h.accelerator for h in spec.hardware.values()}),
        "status": {v: h.status for v, h in spec.hardware.items() if h.status != "runnable"},
    }


def _fingerprint() -> str:
    import hashlib

    here = Path(__file__).parent
    h = hashlib.sha1()
    for name in ("schema.py", "spec.py", "loader.py", "files.py", "catalog.py", *sorted(
            f"sources/{p.name}" for p in (here / "sources").glob("*.py"))):
        h.update((here / name).read_bytes())
    h.update(os.environ.get("ZOO_SPEC_ROOT", "").encode("utf-8", "replace"))  # it changes what loads
    return h.hexdigest()[:16]


_HEADER_LISTS = ("tags", "variants", "accelerators")
_ERROR_FIELDS = {"message": (str,), "file": (str, type(None)), "line": (int, type(None)),
                 "column": (int, type(None)), "field": (str, type(None))}


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _well_formed(hit: Any) -> bool:
    """Whether an index record has the shape :meth:`_IndexCache.put` writes (anything else is a miss)."""
    if not (isinstance(hit, dict) and isinstance(hit.get("deps"), list) and hit["deps"]):
        return False
    if not all(isinstance(d, list) and len(d) == 2 and isinstance(d[0], str) and isinstance(d[1], (str, type(None)))
               for d in hit["deps"]):
        return False
    header, error = hit.get("header"), hit.get("error")
    if (header is None) == (error is None):
        return False
    if header is not None:
        return (isinstance(header, dict) and set(header) == {"name", "title", "task", "status", *_HEADER_LISTS}
                and all(isinstance(header[k], str) for k in ("name", "title", "task"))
                and all(_is_str_list(header[k]) for k in _HEADER_LISTS)
                and isinstance(header["status"], dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in header["status"].items()))
    return (isinstance(error, dict) and set(error) == set(_ERROR_FIELDS)
            and all(isinstance(error[k], t) and not isinstance(error[k], bool) for k, t in _ERROR_FIELDS.items()))


class _IndexCache:
    """Headers of validated files, persisted between processes (best effort, atomic writes).

    The index only accelerates: a record is used only if every file the loader read for it
    (the spec and its ``extends`` parents, as the loader itself resolved them) still has the
    recorded content; a record of any other shape, or an unreadable index, counts as absent;
    and :meth:`Catalog.get` checks the header against the file before handing out a spec."""

    MAX_BYTES = 64 << 20

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = os.environ.get("ZOO_NO_INDEX_CACHE", "") in ("", "0")
        self.read = self.enabled and enabled
        root = os.environ.get("ZOO_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "zoo")
        self.file = Path(root) / "spec-index.json"
        self.fingerprint = _fingerprint() if self.enabled else ""
        self.data: dict[str, Any] = {}
        self.dirty = False
        self.hits = 0
        if self.read:
            import json

            from .files import read_spec_bytes

            try:
                raw = json.loads(read_spec_bytes(self.file, limit=self.MAX_BYTES))
            except (SpecError, ValueError, RecursionError):
                raw = None
            if isinstance(raw, dict) and raw.get("fingerprint") == self.fingerprint and isinstance(raw.get("files"), dict):
                self.data = raw["files"]

    def get(self, path: Path) -> dict[str, Any] | None:
        from .files import file_digest

        hit = self.data.get(str(path))
        if not _well_formed(hit) or hit["deps"][0][0] != str(path):
            return None
        if any(file_digest(dep) != digest for dep, digest in hit["deps"]):
            return None
        self.hits += 1
        return hit

    def put(self, path: Path, deps: list[tuple[str, str | None]], header: dict[str, Any] | None,
            error: SpecError | None) -> None:
        if not self.enabled or not deps or deps[0][0] != str(path):
            return
        err = None
        if error is not None:
            loc = error.location
            err = {"message": error.message, "file": loc.file, "line": loc.line, "column": loc.column, "field": loc.field}
        self.data[str(path)] = {"deps": [list(d) for d in deps], "header": header, "error": err}
        self.dirty = True

    def save(self) -> None:
        if not (self.enabled and self.dirty):
            return
        import json
        import tempfile

        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump({"fingerprint": self.fingerprint, "files": self.data}, f)
            os.replace(tmp, self.file)
            self.dirty = False
        except OSError:
            pass


def _natural(s: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


class Catalog:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._dirs: list[tuple[Path, str]] = []
        self._entries: dict[str, Entry] | None = None
        self._broken: list[Entry] = []
        self._source_errors: list[Entry] = []  # zoo.specs entry points whose package fails to import
        self._cache_hits = 0

    # ------------------------------------------------------------------ sources
    def add_path(self, path: str | os.PathLike[str], origin: str = "user") -> None:
        p = Path(path).expanduser().resolve()
        if not p.exists():
            raise SpecError("no such file or directory", Location(str(p)))
        with self._lock:
            if all(d != p for d, _ in self._dirs):
                self._dirs.append((p, origin))
            self._entries = None

    def _sources(self) -> list[tuple[Path, str]]:
        sources, errors = spec_sources(list(self._dirs))
        self._source_errors[:] = [Entry(value, origin, error=err) for value, origin, err in errors]
        return sources

    @staticmethod
    def _files(path: Path) -> list[Path]:
        return source_files(path)

    # ------------------------------------------------------------------ index
    def _index(self, use_cache: bool = True) -> dict[str, Entry]:
        """Rule for names: the first file discovered keeps a name (sources in order: the
        ``zoo.specs`` entry points sorted by name, so the built-ins first, then ``ZOO_SPECS_PATH``,
        then :meth:`add_path` folders); every later file declaring it is broken with a
        :class:`CollisionError` naming both files."""
        with self._lock:
            if self._entries is not None and use_cache:
                return self._entries
            entries: dict[str, Entry] = {}
            broken: list[Entry] = []
            seen_files: set[Path] = set()
            cache = _IndexCache(enabled=use_cache)
            for root, origin in self._sources():
                for f in self._files(root):
                    try:
                        rf = f.resolve()
                    except (OSError, RuntimeError, ValueError):
                        rf = f.absolute()
                    if rf in seen_files:
                        continue
                    seen_files.add(rf)
                    entry = self._read(rf if os.path.isfile(rf) else f.absolute(), origin, cache)
                    if entry.error is not None:
                        broken.append(entry)
                        continue
                    other = entries.get(entry.name)
                    if other is not None:
                        err = CollisionError(
                            f"spec name {entry.name!r} is already declared by {other.path}; this file is ignored "
                            "(the first file found keeps a name: rename one of them)",
                            Location(str(entry.path), None, None, "name"),
                        )
                        broken.append(Entry(entry.path, origin, error=err, header=entry.header))
                        continue
                    entries[entry.name] = entry
            cache.save()
            broken.extend(self._source_errors)
            self._entries, self._broken, self._cache_hits = entries, broken, cache.hits
            return entries

    @staticmethod
    def _read(path: Path, origin: str, cache: _IndexCache) -> Entry:
        hit = cache.get(path)
        if hit is not None:
            if hit["error"] is not None:
                e = hit["error"]
                return Entry(path, origin, error=SpecError(e["message"], Location(e["file"], e["line"], e["column"], e["field"])),
                             from_index=True)
            return Entry(path, origin, header=hit["header"], from_index=True)
        from .loader import load_spec_file

        reads: list[tuple[str, str | None]] = []
        try:
            entry = Entry(path, origin, spec=load_spec_file(path, reads=reads))
        except SpecError as exc:
            entry = Entry(path, origin, error=exc)
        cache.put(path, reads, entry.header, entry.error)
        return entry

    def refresh(self) -> None:
        with self._lock:
            self._entries = None

    # ------------------------------------------------------------------ queries
    def entries(self) -> list[Entry]:
        return sorted(self._index().values(), key=lambda e: _natural(e.name))

    def broken(self) -> list[Entry]:
        self._index()
        return list(self._broken)

    def get(self, name: str) -> Entry:
        """The entry of ``name``, its spec loaded and checked against what the index said
        (a stale or poisoned index is dropped and the folders are re-read without it)."""
        for attempt in (0, 1):
            idx = self._index(use_cache=attempt == 0)
            entry = idx.get(name)
            if entry is not None and entry.verified() and entry.name == name and entry.error is None:
                return entry
            if not self._cache_hits:
                break
        if entry is not None and entry.error is not None:
            raise entry.error
        import difflib

        close = difflib.get_close_matches(name, list(idx), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(idx)) or 'none'}"
        for b in self._broken:
            if b.name == name and not isinstance(b.error, CollisionError):
                raise b.error  # type: ignore[misc]
        raise NotFoundError(f"no spec named {name!r}{hint}")

    def list(
        self,
        pattern: str | list[str] = "*",
        *,
        task: str | None = None,
        tags: list[str] | str | None = None,
        fits: str | None = None,
        exclude: str | list[str] | None = None,
    ) -> list[str]:
        """Names matching fnmatch ``pattern`` (and ``task``, all ``tags``, an accelerator ``fits``)."""
        pats = [pattern] if isinstance(pattern, str) else list(pattern)
        excl = [exclude] if isinstance(exclude, str) else list(exclude or [])
        want_tags = [tags] if isinstance(tags, str) else list(tags or [])
        self.check_filters(task=task, tags=want_tags, fits=fits)
        out = []
        for e in self.entries():
            h = e.header
            assert h is not None
            if not any(fnmatch.fnmatchcase(h["name"], p) for p in pats):
                continue
            if any(fnmatch.fnmatchcase(h["name"], p) for p in excl):
                continue
            if task and h["task"] != task:
                continue
            if want_tags and not all(t in h["tags"] for t in want_tags):
                continue
            if fits and not any(a in (fits, "any") or (a == "cpu" and fits == "cuda") for a in h["accelerators"]):
                continue
            out.append(h["name"])
        return out

    def check_filters(self, *, task: str | None = None, tags: list[str] | None = None, fits: str | None = None) -> None:
        """A filter value no spec could match is a typo, not an empty result: one :class:`FilterError`
        line naming the filter, what was given, the closest known values and all of them (``fits``: an
        accelerator, ``cpu``, ``cuda`` or ``mps``; ``task``/``tags``: the values the listed specs use)."""
        import difflib

        def refuse(what: str, value: str, known: list[str], alias: str | None = None) -> None:
            close = [alias] if alias else difflib.get_close_matches(value, known, n=3, cutoff=0.5)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            shown = ", ".join(known[:25]) + (f", ... ({len(known)} in all)" if len(known) > 25 else "")
            raise FilterError(f"{value!r} matches no spec; {hint}known: {shown or 'none'}", Location(None, None, None, what))

        if fits is not None and fits not in ACCELERATORS:
            refuse("fits", fits, list(ACCELERATORS), {"gpu": "cuda", "nvidia": "cuda", "apple": "mps", "metal": "mps"}.get(fits.lower()))
        headers = [e.header for e in self.entries() if e.header is not None]
        if task is not None:
            tasks = sorted({str(h["task"]) for h in headers})
            if task not in tasks:
                refuse("task", task, tasks)
        if tags:
            known = sorted({str(t) for h in headers for t in h["tags"]})
            for tag in tags:
                if tag not in known:
                    refuse("tag", tag, known)
