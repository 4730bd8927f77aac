"""Output files named on the command line (``zoo run NAME --out PATH``).

One rule for every method: a path without a suffix gets ``.png`` (and the method reports the
file it really wrote); the suffix must be a format matplotlib writes; the folder must exist;
a folder is not a file name. Problems are a ``ValueError`` at option-parsing time, which
``zoo run`` turns into one ``--out: ...`` line and exit 2.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

FORMATS = ("pdf", "png", "svg")


def output_path(text: str, default_suffix: str = ".png") -> Path:
    """The file a figure goes to: ``text`` checked, with ``default_suffix`` when it has none."""
    path = Path(text).expanduser()
    if not text.strip():
        raise ValueError("expected a file name such as samples.png")
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give a file name such as {path / ('samples' + default_suffix)}")
    if not path.suffix:
        path = path.with_name(path.name + default_suffix)
    elif path.suffix.lower().lstrip(".") not in FORMATS:
        raise ValueError(f"cannot write {path.suffix} files; use one of: {', '.join(FORMATS)} (e.g. {path.with_suffix(default_suffix)})")
    parent = path.parent
    if not parent.is_dir():
        raise ValueError(f"folder {parent} does not exist; create it first")
    return path


OutPath = Annotated[str, AfterValidator(lambda value: str(output_path(value)))]
"""A ``CliInputs`` field type for an output figure path, validated by :func:`output_path`."""
