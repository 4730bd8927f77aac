"""What ``zoo bench`` and ``zoo train`` run: the engine owns their command line, their output folder and
their reports, so every method's benchmark takes the same flags and writes only inside ``--out-dir``.

* :func:`run_bench`: ``zoo bench NAME [--quick] [--json] [--out-dir DIR] [--seed N] [--<option> VALUE ...]``
  for a ``@benchmark(options=Model)`` ``fn(ctx, opts) -> dict``: options parsed from the model's
  fields (validated by it; ``--quick`` fills the unset ones from ``Model.quick``), a
  :class:`~registry.context.Context` with the seed, the quick flag and the output folder (default
  ``./zoo-bench-NAME/``), the returned dict written as ``<NAME>-bench.json`` (and printed with ``--json``).
  A benchmark of the older shape, ``main(argv) -> int``, gets its arguments unchanged.
* :func:`run_train`: ``zoo train NAME [--check] [--out-dir DIR] [--only ENTRY]`` for the spec's
  ``training:`` entries: each ``@trainer`` ``fn(ctx, opts)`` writes its produced files into the output
  folder, then each file's sha256 is compared with the spec's declaration of it.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .errors import Location, ParamError, RunError, ZooError

ENGINE_HELP = {
    "quick": "a reduced run (seconds to a minute) that still prints the table: the options marked 'quick' below take "
             "those values unless given",
    "json": "print the result as one JSON document on stdout (the table goes to stderr); it is also written as "
            "NAME-bench.json in the output folder",
    "out_dir": "the folder every file of the run goes to (created; default ./zoo-bench-NAME/ under the current folder)",
    "seed": "the run's seed, ctx.seed (default 0)",
}


def _one_line(exc: BaseException, limit: int = 300) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:limit] or '(no message)'}"


# ----------------------------------------------------------------------------- options <-> flags
def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _shape(annotation: Any) -> tuple[str, list[Any] | None, bool]:
    """``(kind, choices, optional)`` of a field type: kind is ``bool``, ``list`` or ``value``."""
    optional = False
    tp = annotation
    origin = typing.get_origin(tp)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        tp = args[0] if len(args) == 1 else tp
        origin = typing.get_origin(tp)
    if tp is bool:
        return "bool", None, optional
    if origin in (list, tuple, set):
        inner = typing.get_args(tp)[:1]
        choices = list(typing.get_args(inner[0])) if inner and typing.get_origin(inner[0]) is typing.Literal else None
        return "list", choices, optional
    if origin is typing.Literal:
        return "value", list(typing.get_args(tp)), optional
    return "value", None, optional


def options_parser(prog: str, options: type[BaseModel], description: str | None = None) -> argparse.ArgumentParser:
    """The command line of one benchmark: the engine's flags, then one flag per options field (unset fields are
    absent from the parsed namespace, so ``--quick`` and the defaults can tell them apart)."""
    ap = argparse.ArgumentParser(prog=prog, description=description, add_help=False, allow_abbrev=False,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    eng = ap.add_argument_group("engine options (the same for every benchmark)")
    eng.add_argument("-h", "--help", action="help", help="show this help and exit")
    name = prog.split()[-1]
    eng.add_argument("--quick", action="store_true", help=ENGINE_HELP["quick"])
    eng.add_argument("--json", action="store_true", help=ENGINE_HELP["json"].replace("NAME", name))
    eng.add_argument("--out-dir", metavar="DIR", default=None, help=ENGINE_HELP["out_dir"].replace("NAME", name))
    eng.add_argument("--seed", metavar="N", type=int, default=0, help=ENGINE_HELP["seed"])
    quick = getattr(options, "quick", {}) or {}
    grp = ap.add_argument_group(f"{name} options")
    for name, info in options.model_fields.items():
        kind, choices, optional = _shape(info.annotation)
        text = (info.description or "").replace("%", "%%")
        extra = [f"default {info.get_default(call_default_factory=True)!r}" if not info.is_required() else "required"]
        if name in quick:
            extra.append(f"quick {quick[name]!r}")
        help_text = f"{text} ({'; '.join(extra)})" if text else f"({'; '.join(extra)})"
        kw: dict[str, Any] = {"dest": name, "default": argparse.SUPPRESS, "help": help_text}
        if kind == "bool":
            grp.add_argument(_flag(name), action=argparse.BooleanOptionalAction, **kw)
            continue
        if kind == "list":
            kw["nargs"] = "+"
        if choices:
            kw["choices"] = [str(c) for c in choices] + (["none"] if optional else [])
        kw["metavar"] = name.upper() if not choices else None
        if kw["metavar"] is None:
            del kw["metavar"]
        grp.add_argument(_flag(name), **kw)
    return ap


def _parsed_flag(info: Any, value: Any, name: str) -> Any:
    """A flag's command-line string(s) read as the field's type (``--rows 64`` -> 64): the one place a numeric
    string becomes a number (the options model itself is strict, for values a spec sets); bools come from
    argparse already."""
    if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
        return value
    from pydantic import TypeAdapter

    annotation = info.annotation
    _, choices, _ = _shape(annotation)
    if choices:  # a Literal's values need not be strings (``list[Literal[1, 2]]``): the flag's text picks the choice
        by_text = {str(c): c for c in choices}
        value = [by_text.get(v, v) for v in value] if isinstance(value, list) else by_text.get(value, value)
    try:
        return TypeAdapter(annotation).validate_python(value)
    except (ValidationError, TypeError) as exc:
        if isinstance(exc, ValidationError):
            err = exc.errors(include_url=False)[0]
            raise ParamError(f"{err['msg']} (got {value!r})", Location(None, None, None, _flag(name))) from None
        return value  # an annotation pydantic cannot adapt alone: the model validates the string


def parse_options(options: type[BaseModel], ns: argparse.Namespace, quick: bool) -> BaseModel:
    """The validated options: the flags given, then (with ``quick``) the model's quick values for the rest; a bad
    value is one :class:`ParamError` naming the flag."""
    given: dict[str, Any] = {}
    for name, info in options.model_fields.items():
        if name not in vars(ns):
            continue
        value = getattr(ns, name)
        _, _, optional = _shape(info.annotation)
        if optional and isinstance(value, str) and value.lower() in ("none", "null"):
            value = None
        given[name] = _parsed_flag(info, value, name)
    if quick:
        for name, value in (getattr(options, "quick", {}) or {}).items():
            given.setdefault(name, value)
    try:
        return options(**given)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        msg = err["msg"] if err["type"] != "extra_forbidden" else "unknown option"
        shown = f" (got {err.get('input')!r})" if "input" in err and err["type"] != "missing" else ""
        raise ParamError(f"{msg}{shown}", Location(None, None, None, _flag(name))) from None


# ----------------------------------------------------------------------------- zoo bench
def bench_usage(name: str = "NAME") -> str:
    return (f"usage: zoo bench {name} [--quick] [--json] [--out-dir DIR] [--seed N] [--<option> VALUE ...]\n"
            f"`zoo bench {name} --help` lists the benchmark's own options")


def run_bench(spec: Any, file: Any, argv: list[str]) -> int:
    """``zoo bench`` of ``spec`` (its ``bench:``, resolved through the allowlist) with the arguments after NAME."""
    from .loader import locate
    from .resolve import resolve

    if spec.bench is None:
        raise ZooError(f"{spec.name} declares no benchmark (spec field bench:); its metrics' command: lines say how they were measured")
    fn = resolve(spec.bench, locate(str(file) if file else None, "bench"), kind="benchmark")
    options = getattr(fn, "zoo_options", None)
    if options is None:  # the older shape: main(argv) -> int gets the arguments as they are
        argv = [a for a in argv if a != "--"]
        print(f"[zoo bench {spec.name}: {spec.bench}({argv})]", file=sys.stderr)
        return int(fn(argv) or 0)
    doc = (getattr(fn, "__doc__", None) or "").strip().split("\n\n")[0] or None
    ap = options_parser(f"zoo bench {spec.name}", options, doc)
    ns = ap.parse_args([a for a in argv if a != "--"])
    opts = parse_options(options, ns, ns.quick)
    from .limits import check_seed
    from .context import Context, jsonable

    seed = check_seed(ns.seed, "--seed")
    out_dir = Path(ns.out_dir).expanduser() if ns.out_dir else Path.cwd() / f"zoo-bench-{spec.name}"
    if out_dir.exists() and not out_dir.is_dir():
        raise ZooError(f"--out-dir {out_dir}: exists and is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    echo = sys.stderr if ns.json else sys.stdout
    ctx = Context(spec, file, seed=seed, quick=ns.quick, out_dir=out_dir, report_name=f"{spec.name}-bench.md", echo=echo)
    shown = ", ".join(f"{k}={v!r}" for k, v in opts.model_dump().items())
    print(f"[zoo bench {spec.name}: {spec.bench} seed={seed}{' quick' if ns.quick else ''} ({shown}) -> {out_dir}]",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        result = fn(ctx, opts)
    except ZooError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the benchmark; --debug shows the chained traceback
        raise RunError(f"benchmark {spec.bench} failed: {_one_line(exc)}", Location(str(file) if file else None, None, None, "bench")) from exc
    if not isinstance(result, Mapping):
        raise RunError(f"benchmark {spec.bench} returned a {type(result).__name__}, expected a dict of its numbers",
                       Location(str(file) if file else None, None, None, "bench"))
    document = {"spec": spec.name, "benchmark": spec.bench, "seed": seed, "quick": bool(ns.quick),
                "options": jsonable(opts.model_dump()), "seconds": round(time.perf_counter() - t0, 3),
                "result": jsonable(result)}
    ctx.write_json(f"{spec.name}-bench.json", document)
    if ns.json:
        print(json.dumps(document, indent=1))
    for path in ctx.written:
        if path.exists():
            print(f"wrote {path}", file=sys.stderr)
    print(f"[zoo bench {spec.name}: {document['seconds']:.1f}s]", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- zoo train
def run_train(spec: Any, file: Any, *, only: list[str] | None = None, check: bool = False, out_dir: str | None = None) -> int:
    """``zoo train``: run the spec's ``training:`` entries (or ``only`` those), then compare each produced file's sha256
    with the spec's declaration of it. Returns 0 if every file matches or (without ``check``) was written."""
    from .build import sha256_file
    from .context import Context, declared_files
    from .loader import locate
    from .resolve import resolve
    from .spec import normalized_file

    fname = str(file) if file else None
    if not spec.training:
        raise ZooError(f"{spec.name} declares no training (spec field training:): it ships no trained files, or they "
                       "come from elsewhere (see its card)")
    names = list(spec.training) if not only else only
    unknown = [n for n in names if n not in spec.training]
    if unknown:
        raise ParamError(f"{spec.name} has no training entry {unknown[0]!r} (entries: {', '.join(spec.training)})",
                         Location(None, None, None, "--only"))
    declared = {d.rel: d for d in declared_files(spec, file).values()}
    tmp = tempfile.TemporaryDirectory(prefix=f"zoo-train-{spec.name}-") if check and out_dir is None else None
    folder = Path(tmp.name) if tmp is not None else (Path(out_dir).expanduser() if out_dir else Path.cwd() / f"zoo-train-{spec.name}")
    folder.mkdir(parents=True, exist_ok=True)
    from .hardware import cpu_kernel_signature

    signature = cpu_kernel_signature()
    results: list[tuple[str, Path, str, str, str | None, str]] = []  # (rel, written, sha, declared, this CPU's recorded, entry)
    try:
        for tname in names:
            entry = spec.training[tname]
            fn = resolve(entry.trainer, locate(fname, f"training.{tname}.trainer"), kind="trainer")
            options = getattr(fn, "zoo_options", None)
            try:
                opts = options(**entry.params)  # type: ignore[misc]
            except ValidationError as exc:
                err = exc.errors(include_url=False)[0]
                field = ".".join(str(p) for p in err["loc"])
                raise ParamError(f"{err['msg']} (got {err.get('input')!r})" if err["type"] != "extra_forbidden"
                                 else f"unknown option of {entry.trainer}; options: {', '.join(options.model_fields) or 'none'}",  # type: ignore[union-attr]
                                 locate(fname, f"training.{tname}.params.{field}")) from None
            ctx = Context(spec, file, out_dir=folder, use_cache=False)
            print(f"[zoo train {spec.name}: {tname} ({entry.trainer}) -> {folder}]", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            try:
                fn(ctx, opts)
            except ZooError:
                raise
            except Exception as exc:  # noqa: BLE001
                raise RunError(f"trainer {entry.trainer} failed: {_one_line(exc)}", locate(fname, f"training.{tname}")) from exc
            print(f"[zoo train {spec.name}: {tname} {time.perf_counter() - t0:.1f}s]", file=sys.stderr)
            for rel in entry.produces:
                written = folder / normalized_file(rel).rsplit("/", 1)[-1]
                if not written.is_file():
                    raise RunError(f"trainer {entry.trainer} did not write {written.name} (training.{tname}.produces names {rel})",
                                   locate(fname, f"training.{tname}.produces"))
                recorded = entry.elsewhere.get(signature, {}).get(rel)
                results.append((rel, written, sha256_file(written), declared[normalized_file(rel)].sha256, recorded, tname))
        same = all(sha in (want, here) for _, _, sha, want, here, _ in results)
        for rel, written, sha, want, here, _ in results:
            if sha == want:
                mark, said = "OK  ", f"== spec {want}"
            elif sha == here:
                mark, said = "OK* ", f"== the digest recorded for this CPU (spec {want} was made on another CPU)"
            else:
                mark, said = ("FAIL" if check else "NEW "), f"!= spec {want}" + (f" and != this CPU's recorded {here}" if here else "")
            print(f"{mark} {rel}: sha256 {sha} {said}" + ("" if check and tmp is not None else f" ({written})"))
        if any(sha != want for _, _, sha, want, _, _ in results):
            import torch

            print(f"note: byte-exact digests depend on the CPU kernels torch {torch.__version__} dispatches to; this CPU's "
                  f"kernel signature is {signature}. A training entry's `elsewhere: {{SIGNATURE: {{file: sha256}}}}` records "
                  "what unchanged code writes on a CPU that rounds differently; --check accepts those digests only there")
            if not check:
                print("to ship a new file: copy it into the spec's folder and paste its sha256 into the spec entry that declares it")
        return 0 if (same or not check) else 1
    finally:
        if tmp is not None:
            tmp.cleanup()
