"""Reading the files a spec names, safely and cheaply (no pydantic, no YAML: the spec index
uses this on every warm ``zoo list``).

* :func:`read_spec_bytes`: regular files only, checked before opening (FIFOs and devices are
  never opened) and again on the descriptor; at most :data:`MAX_FILE_BYTES`, never read whole
  when larger.
* :func:`within`: the one containment check for paths a spec names (``extends:``, ``weights``).
* :func:`folder_in_place`: write a whole folder (a saved pipeline, a report) so that it appears
  complete or not at all.
"""
from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from .errors import BuildError, Location, SpecError

MAX_FILE_BYTES = 1 << 20  # 1 MiB: the largest shipped spec is 16 KB


@contextlib.contextmanager
def folder_in_place(target: Path, suffix: str = ".writing") -> Iterator[Path]:
    """A fresh temporary folder beside ``target`` to write into. When the block ends it takes ``target``'s place
    (an earlier ``target`` is moved aside first and removed after the swap); when the block raises, the temporary
    folder is removed and ``target`` is left as it was: nobody ever sees a half-written folder under its name."""
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent))
    try:
        yield tmp
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.replace(target, old / "x")
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def within(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is ``root`` or inside it, after resolving symlinks and ``..`` in both.

    The one containment check for files a spec names (``extends:``, ``weights:``); lint and the
    builder call it too."""
    try:
        r, p = Path(os.path.realpath(root)), Path(os.path.realpath(path))
    except (OSError, ValueError):
        return False
    return p == r or r in p.parents


_FILE_KINDS = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")]


def read_spec_bytes(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a spec file: regular files only (checked before opening, so FIFOs and devices
    are never opened, and again on the open descriptor), at most ``limit`` bytes, never read whole
    when larger. Any problem is a :class:`SpecError` naming the file."""
    where = Location(str(path))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        dangling = os.path.islink(path)
        raise SpecError("no such file" + (" (dangling symlink)" if dangling else ""), where) from None
    except (OSError, ValueError) as exc:
        raise SpecError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", where) from None

    def check(mode: int, size: int) -> None:
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a file")
            raise SpecError(f"not a regular file ({kind}); spec files must be regular files", where)
        if size > limit:
            raise SpecError(f"file is {size} bytes; spec files are limited to {limit // (1 << 20)} MiB", where)

    check(st.st_mode, st.st_size)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", where) from None
    try:
        st = os.fstat(fd)
        check(st.st_mode, st.st_size)  # swapped for something else since the stat above
        chunks: list[bytes] = []
        total = 0
        while True:
            block = os.read(fd, min(1 << 16, limit + 1 - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
            if total > limit:
                raise SpecError(f"file grew past {limit // (1 << 20)} MiB while being read; spec files are limited to that",
                                where)
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", where) from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _digest(raw: bytes) -> str:
    import hashlib

    return hashlib.sha1(raw).hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str | None:
    """What :func:`read_document` records for a file it read (``None``: it could not be read)."""
    try:
        return _digest(read_spec_bytes(path))
    except SpecError:
        return None


# ----------------------------------------------------------------------------- paths a model source names
def outside_paths_allowed() -> bool:
    """The caller's ``ZOO_ALLOW_OUTSIDE_SPEC_DIR=1``: local model ids may leave the spec's folder."""
    return os.environ.get("ZOO_ALLOW_OUTSIDE_SPEC_DIR", "") not in ("", "0", "false")

def local_path(rel: str, spec_dir: Path, loc: Location, allow_outside: bool | None, what: str) -> Path:
    """``rel`` (relative, absolute or ``~``) resolved against the spec's folder; outside that
    folder tree only if the caller allows it (argument, else ``ZOO_ALLOW_OUTSIDE_SPEC_DIR``)."""
    base = spec_dir.resolve()
    path = (base / Path(rel).expanduser()).resolve()
    allowed = outside_paths_allowed() if allow_outside is None else allow_outside
    if not allowed and path != base and base not in path.parents:
        raise BuildError(
            f"{what} {rel!r} resolves to {path}, outside the spec's folder {base} "
            f"(the caller may allow it with ZOO_ALLOW_OUTSIDE_SPEC_DIR=1)", loc
        )
    return path

def check_folder_links(folder: Path, spec_dir: Path, loc: Location, allow_outside: bool | None, what: str) -> None:
    """Every entry of a local folder (a model folder, an adapter folder) stays inside the spec's folder
    tree: a symlink whose target resolves outside it is refused, naming the entry (never hashing or
    reading it), unless the caller allows outside paths. At most :data:`registry.limits.FOLDER_ENTRIES`
    entries are looked at (more is an error)."""
    from .limits import FOLDER_ENTRIES, SizeError

    if (outside_paths_allowed() if allow_outside is None else allow_outside) or not folder.is_dir():
        return
    base = spec_dir.resolve()
    seen = 0
    for top, dirs, files in os.walk(folder, followlinks=False):
        for name in [*dirs, *files]:
            seen += 1
            try:
                FOLDER_ENTRIES.check(seen, f"{what} {folder.name}", " entries")
            except SizeError as exc:
                raise BuildError(str(exc), loc) from None
            entry = Path(top) / name
            if entry.is_symlink() and not within(base, entry):
                rel = entry.relative_to(folder)
                raise BuildError(f"{what} {folder.name}: {rel} is a link to {os.path.realpath(entry)}, outside the spec's "
                                 f"folder {base} (the caller may allow it with ZOO_ALLOW_OUTSIDE_SPEC_DIR=1)", loc)


def cache_dir(*parts: str) -> Path:
    """A per-user folder for a method's derived artefacts (embeddings, datasets): ``$ZOO_CACHE_DIR``
    or ``~/.cache/zoo``, plus ``parts``; created on first use. Never for weights a spec declares."""
    root = Path(os.environ.get("ZOO_CACHE_DIR") or Path.home() / ".cache" / "zoo")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path

