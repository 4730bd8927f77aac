"""Output files named on the command line (``zoo run NAME --out PATH``).

One rule for every method: a path without a suffix gets ``.png`` (``.json`` for a JSON report; the
method reports the file it really wrote); the suffix must be a format matplotlib writes (or ``json``); the folder must exist;
a folder is not a file name. Problems are a ``ValueError`` at option-parsing time, which
``zoo run`` turns into one ``--out: ...`` line and exit 2.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from registry.contract import CliInputs
from registry.limits import Rows

FORMATS = ("pdf", "png", "svg")


def output_path(text: str, default_suffix: str = ".png", formats: tuple[str, ...] = FORMATS) -> Path:
    """The file a figure (or, with ``formats=("json",)``, a JSON report) goes to: ``text`` checked, with
    ``default_suffix`` when it has none."""
    path = Path(text).expanduser()
    if not text.strip():
        raise ValueError("expected a file name such as samples.png")
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give a file name such as {path / ('samples' + default_suffix)}")
    if not path.suffix:
        path = path.with_name(path.name + default_suffix)
    elif path.suffix.lower().lstrip(".") not in formats:
        raise ValueError(f"cannot write {path.suffix} files; use one of: {', '.join(formats)} (e.g. {path.with_suffix(default_suffix)})")
    parent = path.parent
    if not parent.is_dir():
        raise ValueError(f"folder {parent} does not exist; create it first")
    return path


OutPath = Annotated[str, AfterValidator(lambda value: str(output_path(value)))]
"""A ``CliInputs`` field type for an output figure path, validated by :func:`output_path`."""

JsonPath = Annotated[str, AfterValidator(lambda value: str(output_path(value, ".json", ("json",))))]
"""A ``CliInputs`` field type for a JSON report path (``.json`` added when missing)."""


def write_json(path: str | Path, data: Any) -> Path:
    """Write ``data`` as indented JSON (tensors and arrays as lists) and return the path."""
    import json

    def default(obj: Any) -> Any:
        if hasattr(obj, "tolist"):
            return obj.tolist()
        raise TypeError(f"not JSON serialisable: {type(obj).__name__}")

    path = Path(path)
    path.write_text(json.dumps(data, indent=1, default=default) + "\n")
    return path



def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (figures go to files, never to a screen)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Tight layout, write ``fig`` to ``path`` (creating its folder) at ``dpi``, close it; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path

class SamplesCli(CliInputs):
    """``zoo run NAME --n 2000 --out samples.png``: how many samples, and an optional picture of them."""

    n: Rows = Field(2000, description="number of samples")
    out: OutPath | None = Field(None, description="PNG: the samples over the data density (.png added when missing)")
