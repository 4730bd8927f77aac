"""What every method benchmark does last: print its table, write its PNG into ``--out-dir`` and,
with ``--json PATH``, every number as JSON."""
from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_outputs(res: dict[str, Any], text: str, plot: Callable[[dict[str, Any], Path], Path], out_dir: str,
                  png_name: str, json_path: str | None) -> None:
    """Print ``text``, ``plot(res, out_dir / png_name)``, then dump ``res`` to ``json_path`` if given."""
    print(text)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seconds = f"  ({res['seconds']:.1f}s)" if "seconds" in res else ""
    print(f"wrote {plot(res, out / png_name)}{seconds}")
    if json_path:
        Path(json_path).write_text(json.dumps(res, indent=1, default=str))
        print(f"wrote {json_path}")


def parse_with_quick(ap: argparse.ArgumentParser, argv: list[str] | None, quick: dict[str, Any],
                     help_text: str) -> argparse.Namespace:
    """Add ``--quick`` to ``ap`` and parse ``argv``; with ``--quick`` every option named in ``quick`` (by its
    ``dest``) that was left at its default takes the quick value instead (explicit options still win)."""
    ap.add_argument("--quick", action="store_true", help=help_text)
    args = ap.parse_args(argv)
    if args.quick:
        for dest, value in quick.items():
            if getattr(args, dest) == ap.get_default(dest):
                setattr(args, dest, value)
    return args
