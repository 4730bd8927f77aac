"""``--quick`` for a hand-written argparse tool (``tools/bench_sample.py``); method benchmarks get their flags from
the engine (``@benchmark(options=...)``)."""
from __future__ import annotations

import argparse
from typing import Any


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
