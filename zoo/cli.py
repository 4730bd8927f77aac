"""``zoo``: list, show, validate, run and conformance-check method specs.

User errors print one line (``file:line:col: field: message``) and exit 2; ``--debug``
shows the traceback instead.
"""
from __future__ import annotations

import argparse
import builtins
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import zoo
from registry.errors import Location, ParamError, RunError, SpecErrors, ZooDeprecationWarning, ZooError, printable

EPILOG = """examples:
  zoo list --task text-generation
  zoo show f-dpmsolver
  zoo run poe-bridge --prompt "12+34="
  zoo run f-dpmsolver --nfe 10 --out samples.png
  zoo validate my-method.yaml
  zoo new my-sampler --template sampler   # a plugin package that passes zoo check
  zoo check my-method.yaml          # conformance suite on one spec
  zoo check --all
  zoo metrics f-dpmsolver --plot metrics.png   # paper vs measured
  zoo bench f-dpmsolver --quick     # the method's benchmark (from an installed wheel too)
  zoo train robuq --check           # retrain the shipped files, compare with the spec's sha256
  zoo sample f-dpmsolver --num-samples 50000 --batch-size 500 --out samples/   # shards on disk, resumable
  torchrun --nproc-per-node 2 -m zoo sample f-dpmsolver --num-samples 50000 --batch-size 500 --out samples/
  zoo report --out site/            # a static HTML catalog: cards, variants, paper vs measured, figures
  zoo schema > zoo-spec.schema.json
"""


def _parse_value(text: str) -> Any:
    """``key=value`` values are YAML scalars (numbers, booleans, lists), else strings; a number YAML 1.1
    leaves a string (``5e-5``, ``1e6``: no dot, or an unsigned exponent) is read as the number it spells."""
    import yaml

    from registry.inputs import NUMERIC

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str) and NUMERIC.fullmatch(value.strip()):
        number = float(value.replace("_", ""))
        return int(number) if number.is_integer() and not any(c in value for c in ".eE") else number
    return text if isinstance(value, dict) else value


def _kv(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ZooError(f"--param: expected key=value, got {item!r}")
        out[key.replace("-", "_")] = _parse_value(value)
    return out


def _extra_options(extra: list[str]) -> dict[str, str]:
    """``--key value`` / ``--key=value`` / ``--flag`` pairs left over by argparse."""
    out: dict[str, str] = {}
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith("--") or tok == "--":
            raise ZooError(f"unexpected argument {tok!r}; method options look like --key value")
        key, sep, value = tok[2:].partition("=")
        if not sep:
            if i + 1 < len(extra) and not extra[i + 1].startswith("--"):
                value = extra[i + 1]
                i += 1
            else:
                value = "true"
        out[key.replace("-", "_")] = value
        i += 1
    return out


# ----------------------------------------------------------------------------- commands
def _variants_cell(header: dict[str, Any], limit: int = 4) -> str:
    """``zoo list``'s variants: every name with its status when there are at most ``limit``, else the runnable
    ones and a count per status (``toy, +6 declared-only``); ``zoo show NAME`` lists them all."""
    status = header.get("status") or {}
    variants = list(header["variants"])
    if len(variants) <= limit:
        return ", ".join(f"{v} ({status[v]})" if v in status else v for v in variants)
    counts: dict[str, int] = {}
    for v in variants:
        if v in status:
            counts[status[v]] = counts.get(status[v], 0) + 1
    return ", ".join([v for v in variants if v not in status] + [f"+{n} {st}" for st, n in counts.items()])


def cmd_list(args: argparse.Namespace) -> int:
    from registry.catalog import FilterError

    cat = zoo.catalog()
    try:  # a filter no spec can match is a typo: one line with did-you-mean, exit 2
        cat.check_filters(task=args.task, tags=args.tag or None, fits=args.fits)
    except FilterError as exc:
        raise FilterError(exc.message, Location(None, None, None, f"--{exc.location.field}")) from None
    names = zoo.list(args.pattern, task=args.task, tags=args.tag or None, fits=args.fits)
    by_name = {e.name: e.header or {} for e in cat.entries()}  # the index's headers: no YAML parsed
    headers = [by_name[n] for n in names]
    if args.json:
        print(json.dumps([{k: h[k] for k in ("name", "task", "title", "tags", "variants")} for h in headers], indent=2))
    else:
        rows = [[h["name"], h["task"], _variants_cell(h), h["title"]] for h in headers]
        for line in _table(rows, header=["name", "task", "variants", "title"] if rows else None, stack_last=40):
            print(line)
    broken = cat.broken()
    for b in broken:
        print(printable(f"BROKEN {b.error}"), file=sys.stderr)
    if args.broken:  # also import every zoo.plugins package (listing itself never does)
        from registry.resolve import plugin_problems

        plugins = plugin_problems()
        for name, why in plugins.items():
            print(printable(f"BROKEN plugin {name}: {why}"), file=sys.stderr)
        broken = [*broken, *plugins]
    return 1 if broken and (args.strict or args.broken) else 0


def _tty() -> bool:
    """Colour only on a terminal (and never with NO_COLOR or TERM=dumb)."""
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


_STYLES = {"ok": "32", "bad": "31", "warn": "33", "dim": "2", "bold": "1"}


#: colour requests travel to :class:`_EscapingStdout` as private-use markers carrying a per-process
#: random nonce, which it alone turns into ANSI codes: text from a spec or a method (escaped, and
#: unable to guess the nonce) can never produce one.
_NONCE = os.urandom(6).hex()
_MARK = re.compile("\ue000" + _NONCE + "([0-9;]+)\ue001")


def _paint(text: str, style: str) -> str:
    """``text`` (already escaped) in an ANSI colour when stdout is a terminal; unchanged otherwise."""
    if not _tty():
        return text
    return f"\ue000{_NONCE}{_STYLES[style]}\ue001{text}\ue000{_NONCE}0\ue001"


_SGR = re.compile("\x1b\\[([0-9;]*)m")


def _table(rows: list[list[str]], indent: str = "", styles: list[str | None] | None = None,
           header: list[str] | None = None, stack_last: int | None = None, no_wrap: tuple[int, ...] = (0,)) -> list[str]:
    """Rows as a table (:mod:`zoo.tables`): fitted to the terminal and coloured on a TTY, plain aligned
    columns in a pipe. Every cell is escaped with :func:`printable` before layout, so spec text can never
    inject control characters or codes; the colour codes rich emits become this process's markers."""
    from zoo.tables import render

    lines = render(rows, header=header, indent=indent, styles=styles, tty=_tty(), stack_last=stack_last, no_wrap=no_wrap)
    return [_SGR.sub(lambda m: f"\ue000{_NONCE}{m.group(1) or '0'}\ue001", line) for line in lines]


def _machine(args: argparse.Namespace) -> Any:
    """The machine for fit columns: None (--no-detect), torch's view (--detect), else the torch-free probe."""
    from registry.hardware import detect, probe

    if getattr(args, "no_detect", False):
        return None
    return detect() if getattr(args, "detect", False) else probe()


def _fit(s: Any, e: Any, v: str, machine: Any) -> tuple[str, str | None]:
    """A variant's fit here and its colour (:func:`zoo.report.fit_here`, shared with the HTML report)."""
    from zoo.report import fit_here

    return fit_here(s, e, v, machine)


def _default_mark(spec: Any, name: str) -> str:
    """`` (default)``, ``(default on full)`` … for ``zoo info``'s procedure table."""
    on = [v for v in spec.variants if spec.default_for(v) == name]
    if not on:
        return ""
    return " (default)" if len(on) == len(spec.variants) else f" (default on {', '.join(on)})"

def cmd_show(args: argparse.Namespace) -> int:
    e = zoo.entry(args.name)
    s = zoo.spec(args.name)

    def print(line: str = "") -> None:  # noqa: A001 - every line shows spec text: escape it
        builtins.print(printable(line))
    if args.yaml:
        import yaml

        builtins.print(yaml.safe_dump(s.model_dump(mode="json", exclude_defaults=True), sort_keys=False, width=110), end="")
        return 0
    machine = _machine(args)
    fit = {v: _fit(s, e, v, machine) for v in s.variants}
    if args.json:
        out = {"file": str(e.path), "origin": e.origin, "spec": s.model_dump(mode="json", exclude_defaults=True),
               "fit": {v: f for v, (f, _) in fit.items()},
               "machine": None if machine is None else {"describe": machine.describe(), "how": machine.how}}
        builtins.print(json.dumps(out, indent=2))  # json.dumps escapes control characters itself
        return 0
    print(f"{s.name}: {s.title}")
    print(f"  file:            {e.path}  ({e.origin})")
    if s.paper:
        print(f"  paper:           {s.paper.venue}" + (f", arXiv {s.paper.arxiv}" if s.paper.arxiv else "") + (f", code {s.paper.code}" if s.paper.code else ""))
    print(f"  task / tags:     {s.task} / {', '.join(s.tags) or '-'}")
    print(f"  implementation:  {s.implementation}")
    if s.summary:
        print(f"  summary:         {' '.join(s.summary.split())}")
    print("  models:")

    def where(src: Any) -> str:
        if src.source == "role":  # a derived role, or another spec's declaration (from_spec)
            origin = f"{src.from_spec}:{src.from_role}" + (f" ({src.from_variant})" if src.from_variant else "") if src.from_spec else src.from_role
            return f"from {origin}" + (f" + {src.transform}" if src.transform else "")
        return getattr(src, "id", None) or getattr(src, "factory", None) or getattr(src, "model_name", "") or ""

    rows = [[role, v, src.source, where(src)]
            for role, m in s.models.items() for v, src in m.variants.items()]
    for line in _table(rows, "    "):
        builtins.print(line)
    rows = []
    for section in ("samplers", "recipes"):
        for n, p in getattr(s, section).items():
            rows.append([section[:-1], n + _default_mark(s, n), p.target, json.dumps(p.params) if p.params else ""])
            rows += [["", "", f"on {v}:", json.dumps(extra)] for v, extra in p.params_by_variant.items()]
    for line in _table(rows, "  "):
        builtins.print(line)
    from zoo.options import option_lines

    by_target: dict[str, list[str]] = {}
    for n in [*s.samplers, *s.recipes]:
        by_target.setdefault(s.procedure(n)[1].target, []).append(n)
    for target, procs in by_target.items():
        print(f"  zoo run options of {target} ({', '.join(procs)}; defaults of the class, the spec's values above):")
        for line in option_lines(s, procs[0], indent="    ", spec_values=False):
            builtins.print(line)
    how = "" if machine is None else f" ({machine.describe()}; {'torch' if machine.how == 'torch' else 'probed without torch: ' + machine.how})"
    print(f"  variants (preference order) and fit here{how}:")
    rows, styles = [], []
    for v in s.variants:
        hw = s.hardware[v]
        rows.append([v, hw.accelerator + (f" ≥{hw.min_memory_gb:g} GB" if hw.min_memory_gb else ""), f"[{', '.join(hw.dtypes)}]", fit[v][0]])
        styles.append(fit[v][1])
    for line in _table(rows, "    ", styles):
        builtins.print(line)
    if s.metrics:
        print("  metrics:")
        from zoo.metrics_report import setting_text

        rows = [[m.kind, m.variant, m.dataset, m.name, setting_text(m.setting),
                 f"{m.value:g}" + (f" {m.unit}" if m.unit else "") + (f" ±{m.tolerance:g}" if m.tolerance is not None else ""),
                 f"$ {m.command}" if m.command else (m.source or "")] for m in s.metrics]
        for line in _table(rows, "    ", header=["kind", "variant", "dataset", "metric", "setting", "value", "command / source"]):
            builtins.print(line)
    if s.invariants:
        print(f"  invariants:      {', '.join(s.invariants)}")
    if s.bench:
        print(f"  benchmark:       zoo bench {s.name} [--quick] [--out-dir D] ({s.bench}; --help lists its options)")
    for tname, t in s.training.items():
        print(f"  training {tname}:  {t.trainer} -> {', '.join(t.produces)} (zoo train {s.name} --only {tname} [--check])")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from registry.lint import lint
    from registry.loader import load_spec_file

    bad = 0
    for path in args.paths:
        try:
            s = load_spec_file(path)
            problems = lint(s, path, resolve=True)
            if problems:
                raise SpecErrors(problems)
            print(printable(f"{path}: ok ({s.name})"))
        except SpecErrors as exc:
            bad += 1
            for line in exc.lines():
                print(line, file=sys.stderr)
        except ZooError as exc:
            bad += 1
            print(str(exc), file=sys.stderr)
    return 2 if bad else 0


def cmd_schema(args: argparse.Namespace) -> int:
    from registry.spec import json_schema

    print(json.dumps(json_schema(), indent=2, sort_keys=True))
    return 0


def run_help(args: argparse.Namespace) -> str:
    """``zoo run [NAME] --help``: the command's flags, and with a NAME the method's options and parameters
    (types, defaults, bounds) read from the method's params module (no torch import), and the per-call size limits."""
    from registry.limits import describe

    text = args.run_parser.format_help()
    if not args.name:
        return text
    s = zoo.spec(args.name)
    name = args.sampler or s.default
    lines = [f"{s.name} ({name}; --sampler NAME for another: {', '.join(n for n in [*s.samplers, *s.recipes] if n != name) or 'none'}):"]
    from zoo.options import option_lines

    lines += option_lines(s, name, import_fallback=True)
    lines.append("  per-call size limits (raise one deliberately with its variable):")
    lines += _table([[kind, f"<= {value}", env, what] for kind, value, env, what in describe()], "    ")
    return text + "\n" + "\n".join(printable(line) for line in lines) + "\n"


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    if args.help or any(tok in ("-h", "--help") for tok in extra):
        print(run_help(args), end="")
        return 0
    if not args.name:
        raise ZooError("zoo run: name a spec (or a spec file); zoo run NAME --help lists its options")
    params = _kv(args.param or [])
    options = _extra_options(extra)
    t0 = time.perf_counter()
    # everything the spec and the params module can tell is checked before torch is imported or anything built
    from zoo.options import precheck_run

    e = zoo.entry(args.name)
    precheck_run(zoo.spec(args.name), str(e.path), seed=args.seed, variant=args.variant, device=args.device,
                 dtype=args.dtype, sampler=args.sampler, params=params, options=options)
    pipe = zoo.load(args.name, variant=args.variant, device=args.device, dtype=args.dtype, sampler=args.sampler,
                    trust_remote_code=args.trust_remote_code, **params)
    proc = pipe.procedure
    inputs = None
    cli_cls = getattr(proc, "CliInputs", None)
    if cli_cls is not None:
        from registry.calls import cli_inputs

        inputs = cli_inputs(cli_cls, options, pipe.default)
    elif options:
        raise ZooError(f"{pipe.default} takes no options; got {', '.join('--' + k for k in options)}")
    try:
        text = pipe.run_cli(inputs, args.seed)
    except RunError as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError):  # an output file that cannot be written
            where = f": {cause.filename}" if getattr(cause, "filename", None) else ""
            raise ZooError(f"{pipe.default}: cannot write{where}: {cause.strerror or cause}") from None
        raise
    print(text)
    print(printable(f"[{pipe.spec.name} variant={pipe.variant} device={pipe.device} sampler={pipe.default} "
                    f"{time.perf_counter() - t0:.1f}s]"), file=sys.stderr)
    return 0


def _count(text: str | None, flag: str, required: bool = True) -> int | None:
    """An integer option given as text (one-line error otherwise; the range is checked by the caller)."""
    if text is None:
        if required:
            raise ParamError("required", Location(field=flag))
        return None
    try:
        return int(text.strip().replace("_", ""))
    except ValueError:
        raise ParamError(f"expected an integer, got {text!r}", Location(field=flag)) from None


def cmd_sample(args: argparse.Namespace) -> int:
    params = _kv(args.param or [])
    if not args.out:
        raise ParamError("required (the folder for manifest.json and the shards)", Location(field="--out"))
    n = _count(args.num_samples, "--num-samples")
    b = _count(args.batch_size, "--batch-size")
    shard = _count(args.shard_size, "--shard-size", required=False)
    seed = _count(args.seed, "--seed")
    report = zoo.sample(args.name, n, args.out, batch_size=b, seed=seed, variant=args.variant, sampler=args.sampler,
                        device=args.device, dtype=args.dtype, shard_size=shard, exact=args.exact, progress=not args.no_progress,
                        trust_remote_code=args.trust_remote_code, _cli=True, **params)
    if report.rank == 0:
        print(printable(report.summary()), file=sys.stderr)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from registry.conformance import Target, budget_seconds, run_checks

    targets: list[Any]
    if args.all:
        targets = [e for e in zoo.catalog().entries()] + zoo.catalog().broken()
    elif not args.names:
        raise ZooError("zoo check: name a spec (or a spec file), or pass --all")
    else:
        # a spec that does not validate stops here: its one-line error, exit 2 (see main)
        targets = [zoo.entry(n) for n in args.names]
    import contextlib

    if args.measure:
        if args.json or args.budget is not None or args.only:
            raise ZooError("zoo check --measure runs the metric checks only and prints YAML; it takes no --json, --budget or --only")
        return _measure(targets, args)
    results: list[dict[str, Any]] = []
    # --json: the human-readable lines go to stderr, stdout is one JSON document
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        ok = run_checks(targets, slow=args.slow, only=args.only, verbose=not args.quiet,
                        target=Target(args.device, args.dtype), allow_remote_code_stub=args.allow_remote_code_stub,
                        budget=None if args.budget is None else budget_seconds(None if args.budget < 0 else args.budget),
                        debug=args.debug, record=not args.no_record, results=results)
    if args.json:
        print(json.dumps({"ok": ok, "checks": results}, indent=2))
    return 0 if ok else 1


def _measure(targets: list[Any], args: argparse.Namespace) -> int:
    """``zoo check --measure``: re-measure every reproduced metric that has a ``check:`` (``--slow``: the slow ones
    too), report the checks on stderr and print on stdout each spec's reproduced metrics with the values measured
    here, as YAML ready to paste over the spec's entries. Exit 1 when a check crashed before it measured anything."""
    import contextlib
    import platform

    import yaml

    from registry.conformance import Target, run_checks
    from registry.metrics_store import record_key

    results: list[dict[str, Any]] = []
    with contextlib.redirect_stdout(sys.stderr):
        run_checks(targets, slow=args.slow, only="::metric[", verbose=not args.quiet, target=Target(args.device, args.dtype),
                   debug=args.debug, record=not args.no_record, results=results)
    by_id = {r["id"]: r for r in results}
    crashed = 0
    for e in targets:
        s = e.spec
        if s is None:
            continue
        print(f"# {s.name}: reproduced metrics measured on {platform.node()} ({args.device}"
              f"{', ' + args.dtype if args.dtype else ''}); paste over the spec's entries")
        print("metrics:")
        for m in s.metrics:
            if m.kind != "reproduced":
                continue
            r = by_id.get(f"{s.name}::metric[{record_key(m)}]")
            entry = m.model_dump(mode="json", exclude_defaults=True)
            if r is not None and "value" in r:
                entry["value"] = float(f"{r['value']:.6g}")
                note = "" if r["status"] == "PASS" else f"  # the spec said {m.value:g} ± {m.tolerance:g}"
                print("  - " + yaml.safe_dump(entry, default_flow_style=True, sort_keys=False, width=10**6, allow_unicode=True).strip() + note)
            else:
                crashed += r is not None and r["status"] == "FAIL"
                why = (r["message"].splitlines() or ["failed"])[0] if r else "not run"
                print(f"  # not measured: {m.name} on {m.dataset} ({why})")
    return 1 if crashed else 0


def cmd_metrics(args: argparse.Namespace) -> int:
    """Every metric of a spec: the paper's number beside ours (spec value and the last `zoo check`)."""
    from registry.metrics_store import rows
    from zoo.metrics_report import HEADER, plot, summary, table_rows

    names = [args.name] if args.name else zoo.list()
    if args.plot and len(names) != 1:
        raise ZooError("zoo metrics --plot: name one spec")
    report = []
    for n in names:
        e = zoo.entry(n)
        s = zoo.spec(n)
        spec_rows = rows(s, spec_file=e.path)  # only this file's measurements (path + sha256 of the resolved spec)
        if args.json:
            report.append({"spec": s.name, "metrics": [r.as_dict() for r in spec_rows]})
        else:
            print(f"{s.name}: {s.title}")
            for line in _table(table_rows(spec_rows), "  ", header=list(HEADER), no_wrap=()):
                print(line)
            print("  " + summary(spec_rows))
        if args.plot:
            print(f"wrote {plot(s, args.plot, spec_rows)}", file=sys.stderr)
    if args.json:
        print(json.dumps(report if not args.name else report[0], indent=2, default=str))
    return 0


def cmd_bench(args: argparse.Namespace, extra: list[str]) -> int:
    """Run the method's benchmark (the spec's ``bench:`` target, resolved through the allowlist) with the
    engine's flags and its options (:func:`registry.harness.run_bench`)."""
    from registry.harness import bench_usage, run_bench

    if args.name is None:
        asked = any(a in ("-h", "--help") for a in extra)
        print(bench_usage(), file=sys.stdout if asked else sys.stderr)
        print("engine options: --quick (a reduced run), --json (the result as JSON on stdout), --out-dir DIR "
              "(default ./zoo-bench-NAME/), --seed N (default 0)", file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    e = zoo.entry(args.name)
    return run_bench(zoo.spec(args.name), e.path, extra)


def cmd_train(args: argparse.Namespace) -> int:
    """Re-make a spec's shipped files with its registered trainers (:func:`registry.harness.run_train`)."""
    from registry.harness import run_train

    e = zoo.entry(args.name)
    return run_train(zoo.spec(args.name), e.path, only=args.only, check=args.check, out_dir=args.out_dir)


def cmd_new(args: argparse.Namespace) -> int:
    """Scaffold a third-party method package that passes `zoo check` as generated."""
    from zoo.scaffold import names, scaffold

    files = scaffold(args.name, args.template, args.dir)
    root = Path(args.dir) / args.name
    pkg = names(args.name)["__PKG__"]
    print(f"wrote {len(files)} files under {root}/")
    for f in files:
        print(f"  {f.relative_to(root)}")
    print(f"next: cd {root} && pip install -e . && zoo check {args.name}\n"
          f"  (or without installing: ZOO_ALLOWED_PACKAGES={pkg} PYTHONPATH=. zoo check {pkg}/specs/{args.name}.yaml)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """A static HTML catalog (:mod:`zoo.report`): index + one page per spec; no server, no network."""
    from zoo.report import build

    pages = build(args.out, args.names or None, machine=None if args.no_detect else "probe")
    print(f"wrote {len(pages)} pages to {Path(args.out)}/ (open {Path(args.out) / 'index.html'})")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Versions (from package metadata: nothing heavy imported), devices (torch-free probe unless
    --detect), offline state, which variants fit here, broken specs and plugins."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    from registry.hardware import fits, offline
    from registry.requirements import unmet

    versions = {}
    for pkg in ("zoo-icml2026", "torch", "transformers", "diffusers", "timm", "pydantic", "hypothesis", "safetensors"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    m = _machine(args)
    cat = zoo.catalog()
    broken = cat.broken()
    specs = []
    for e in cat.entries():
        s = e.spec
        if s is None:  # changed on disk since it was indexed
            broken.append(e)
            continue
        needs = [u.needs for u in unmet(s)]  # an optional extra not installed: nothing of the spec runs here
        specs.append({"name": s.name, "runs_here": [] if needs else [v for v in s.variants if fits(s.hardware[v], m)[0]],
                      "needs": needs, "origin": e.origin})
    from registry.resolve import plugin_problems

    plugins = plugin_problems()
    if args.json:
        builtins.print(json.dumps({
            "python": platform.python_version(), "executable": sys.executable, "packages": versions,
            "devices": m.describe(), "devices_from": m.how, "bf16_cuda": m.bf16_cuda,
            "offline": offline(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "specs": specs, "broken": [str(b.error) for b in broken],
            "broken_plugins": {n: str(w) for n, w in plugins.items()}}, indent=2))
        return 1 if broken or plugins else 0
    rows = [["python", f"{platform.python_version()} ({sys.executable})"]]
    rows += [[pkg, v or "not installed"] for pkg, v in versions.items()]
    rows.append(["devices", m.describe() + (" (bf16 ok)" if m.bf16_cuda else "")
                 + (" [torch]" if m.how == "torch" else f" [probed without torch: {m.how}; --detect asks torch]")])
    rows.append(["offline", f"{'yes' if offline() else 'no'} (HF_HUB_OFFLINE / ZOO_OFFLINE)"])
    rows.append(["threads", f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}"])
    for line in _table([[k.ljust(10), v] for k, v in rows]):
        builtins.print(line)
    builtins.print("specs:")
    rows = [[sp["name"], f"needs: {', '.join(sp['needs'])}" if sp["needs"] else f"runs here: {', '.join(sp['runs_here']) or 'nothing'}",
             f"({sp['origin']})"] for sp in specs]
    for line in _table(rows, "  ", ["ok" if sp["runs_here"] else "dim" for sp in specs]):
        builtins.print(line)
    for b in broken:
        builtins.print(_paint(printable(f"  BROKEN {b.error}"), "bad"))
    for name, why in plugins.items():
        builtins.print(_paint(printable(f"  BROKEN plugin {name}: {why}"), "bad"))
    return 1 if broken or plugins else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="zoo", description="Zoo: run and check ICML 2026 generative-modelling methods declared as YAML specs.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    p.add_argument("--specs", action="append", default=[], metavar="PATH", help="add a spec file or folder (repeatable; also ZOO_SPECS_PATH)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("list", help="list specs (never imports torch)")
    s.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern on names, e.g. '*dpm*'")
    s.add_argument("--task")
    s.add_argument("--tag", action="append", help="require this tag (repeatable)")
    s.add_argument("--fits", help="only specs with a variant for this accelerator (cpu, cuda)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--strict", action="store_true", help="exit 1 if any spec is broken")
    s.add_argument("--broken", action="store_true", help="also import every plugin package and list the broken ones (exit 1 if any)")

    s = sub.add_parser("show", help="a spec: models, samplers, variants and fit here, metrics paper vs reproduced")
    s.add_argument("name", help="spec name or spec file")
    s.add_argument("--no-detect", action="store_true", help="no fit column (no hardware probe)")
    s.add_argument("--detect", action="store_true", help="ask torch about the devices (slower: imports torch); default: a torch-free probe")
    s.add_argument("--yaml", action="store_true", help="print the resolved spec (extends applied, defaults omitted)")
    s.add_argument("--json", action="store_true", help="the resolved spec, fit per variant and the machine as JSON")

    s = sub.add_parser("validate", help="validate spec files; file:line:col errors, exit 2")
    s.add_argument("paths", nargs="+")

    s = sub.add_parser("run", help="build a spec's pipeline and run its default sampler/recipe; method options as --key value",
                       add_help=False,
                       epilog="zoo run NAME --help lists NAME's options (--key value) and parameters (--param) with types, "
                              "defaults and bounds; all are checked before anything is imported or built.")
    s.set_defaults(run_parser=s)
    s.add_argument("-h", "--help", action="store_true", help="show this help (with NAME: the method's options too) and exit")
    s.add_argument("name", nargs="?", help="spec name or spec file")
    s.add_argument("--variant")
    s.add_argument("--device", help="cpu, cuda, cuda:1, mps (default: what the variant needs)")
    s.add_argument("--dtype", choices=["float32", "float16", "bfloat16", "float64"])
    s.add_argument("--seed", type=int, default=0, help="0 .. 2**63 - 1 (default 0)")
    s.add_argument("--sampler", help="run this sampler/recipe instead of the default")
    s.add_argument("--param", action="append", metavar="KEY=VALUE", help="override a sampler parameter (repeatable)")
    s.add_argument("--trust-remote-code", action="store_true", help="allow remote code where the spec also allows it")

    s = sub.add_parser(
        "sample", help="write N samples to disk in verified shards (resumable; spread over processes with torchrun)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Rows 0..N-1 of a sampler's population, row i seeded from (--seed, i) alone, so the rows never depend "
                    "on the number of processes or on which process made them, nor on --batch-size for a row-exact sampler "
                    "(conformance check per-row-seeds) or with --exact. DIR gets manifest.json "
                    "(spec sha256, variant, sampler, params, seed, versions, device/dtype, one entry per shard with its "
                    "sha256) and shards: tensors as safetensors, other fields as JSON Lines, each written atomically. "
                    "Re-running the command resumes: verified shards are kept, missing or corrupt ones redone; a folder "
                    "holding another run is refused. Read it back with zoo.read_samples(DIR).",
        epilog="examples:\n"
               "  zoo sample f-dpmsolver --num-samples 50000 --batch-size 500 --out fdpm/\n"
               "  torchrun --nproc-per-node 2 -m zoo sample f-dpmsolver --num-samples 50000 --batch-size 500 --out fdpm/\n"
               "  torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 --rdzv-id run1 \\\n"
               "      -m zoo sample NAME --num-samples 50000 --batch-size 64 --device cuda --out /shared/run/   # on each node\n"
               "Under torchrun each process takes a disjoint set of shards (gloo on CPU, NCCL on CUDA); DIR must be a "
               "folder every process sees. Only batch-independent samplers with a population can be sampled.")
    s.add_argument("name", help="spec name or spec file")
    s.add_argument("--num-samples", metavar="N", help="rows to write (required)")
    s.add_argument("--out", metavar="DIR", help="output folder: new, empty, or holding this same run (required)")
    s.add_argument("--batch-size", metavar="B", default="16",
                   help="rows per sampler call (default 16); part of the run unless the sampler draws one row per call")
    s.add_argument("--exact", action="store_true",
                   help="one sampler call per row: a row's bytes never depend on --batch-size, even for a batched network (slower)")
    s.add_argument("--shard-size", metavar="R", help="rows per shard file (default: --batch-size, or the folder's when resuming)")
    s.add_argument("--seed", default="0", help="base seed S: row i is drawn with seed S * 1000003 + i (default 0)")
    s.add_argument("--variant")
    s.add_argument("--sampler", help="sample this sampler instead of the default")
    s.add_argument("--param", action="append", metavar="KEY=VALUE", help="override a sampler parameter (repeatable)")
    s.add_argument("--device", help="cpu, cuda (under torchrun: each process's own GPU), cuda:1 (default: what the variant needs)")
    s.add_argument("--dtype", choices=["float32", "float16", "bfloat16", "float64"])
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--trust-remote-code", action="store_true", help="allow remote code where the spec also allows it")

    s = sub.add_parser("check", help="conformance suite: validate, build, sampler contract, invariants, metrics")
    s.add_argument("names", nargs="*", help="spec names or spec files")
    s.add_argument("--all", action="store_true", help="every discovered spec (broken ones fail)")
    s.add_argument("--slow", action="store_true", help="also re-check slow metrics and use the nightly hypothesis profile")
    s.add_argument("--only", help="run only checks whose id contains this text")
    s.add_argument("--device", default="cpu", help="run the CPU variants on this device (e.g. cuda on a GPU machine)")
    s.add_argument("--dtype", choices=["float32", "float16", "bfloat16", "float64"], help="build the CPU variants in this dtype")
    s.add_argument("--allow-remote-code-stub", action="store_true",
                   help="load trust_remote_code roles from a code-free tiny checkpoint with trust_remote_code=True "
                        "(your consent; without it those checks SKIP). CI does not pass it")
    s.add_argument("--budget", nargs="?", type=float, const=-1.0, metavar="SECONDS",
                   help="fail a spec whose default (non-slow) checks cost more CPU seconds than this "
                        "(bare --budget: $ZOO_CHECK_BUDGET or 20)")
    s.add_argument("-q", "--quiet", action="store_true", help="print failures only (a progress bar on a terminal)")
    s.add_argument("--no-record", action="store_true", help="do not store re-measured metrics for `zoo metrics`")
    s.add_argument("--measure", action="store_true",
                   help="run only the reproduced metrics' checks and print them with the values measured here, as YAML "
                        "to paste into the spec's metrics: (a FAIL because the spec's value is a placeholder is expected)")
    s.add_argument("--json", action="store_true", help="stdout: one JSON document of every check's result (the report goes to stderr)")

    s = sub.add_parser("metrics", help="paper vs measured: every metric of a spec, paired by name + dataset + setting")
    s.add_argument("name", nargs="?", help="spec name or spec file (default: every spec)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--plot", metavar="OUT.png", help="write a PNG: paper, ours and the last measurement per metric")

    s = sub.add_parser("bench", add_help=False, usage="zoo bench NAME [--quick] [--json] [--out-dir DIR] [--seed N] [options]",
                       help="run a method's benchmark (its spec's bench:); `zoo bench NAME --help` lists its flags")
    s.add_argument("name", nargs="?", help="spec name or spec file")

    s = sub.add_parser("train", help="re-make a spec's shipped files with its registered trainers (spec field training:)",
                       epilog="e.g. zoo train robuq --check (retrain into a temporary folder and compare with the spec's sha256); "
                              "from a checkout, --out-dir specs/weights refreshes the shipped files")
    s.add_argument("name", help="spec name or spec file")
    s.add_argument("--check", action="store_true",
                   help="exit 1 unless every produced file is byte-identical to the spec's declaration (trains into a temporary folder "
                        "unless --out-dir is given)")
    s.add_argument("--out-dir", metavar="DIR", help="where the files go (default ./zoo-train-NAME/; never the installed package)")
    s.add_argument("--only", action="append", metavar="ENTRY", help="run only this training entry (repeatable)")

    s = sub.add_parser("new", help="scaffold a method package (spec, procedure, invariants, tests) that passes zoo check")
    s.add_argument("name", help="kebab-case spec name; the package is its snake_case form")
    s.add_argument("--template", choices=["sampler", "recipe"], default="sampler")
    s.add_argument("--dir", default=".", help="create NAME/ in this folder (default: here)")

    s = sub.add_parser("report", help="write a static HTML catalog: one page per spec (card, variants and fit, paper vs measured, figures) and an index",
                       epilog="e.g. zoo report --out site/ && xdg-open site/index.html (no server, no network; the last zoo check values come from the metrics store)")
    s.add_argument("names", nargs="*", help="only these specs (default: every discovered spec)")
    s.add_argument("--out", default="site", help="output folder (created; an earlier report there is replaced; default: site)")
    s.add_argument("--no-detect", action="store_true", help="no fit column (no hardware probe)")

    sub.add_parser("schema", help="print the spec JSON Schema")
    s = sub.add_parser("doctor", help="versions, devices, offline state, which variants fit here, broken specs")
    s.add_argument("--detect", action="store_true", help="ask torch about the devices (slower: imports torch); default: a torch-free probe")
    s.add_argument("--json", action="store_true")
    return p


class _EscapingStdout:
    """``sys.stdout`` for the commands: every character that is not printable, except newlines
    and tabs, is escaped (spec text in method or conformance output cannot drive the terminal)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        if not text.isprintable():
            parts = _MARK.split(text)  # [text, code, text, code, ...]: only our own colour markers survive
            text = "".join(f"\x1b[{part}m" if i % 2 else self._escape(part) for i, part in enumerate(parts))
        return self._stream.write(text)

    @staticmethod
    def _escape(text: str) -> str:
        return "\n".join("\t".join(printable(part) for part in line.split("\t")) for line in text.split("\n"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _show_deprecation(show: Any) -> Any:
    """``warnings.showwarning`` printing a :class:`ZooDeprecationWarning` as one ``warning: ...`` line on stderr."""

    def showwarning(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if issubclass(category, ZooDeprecationWarning):
            print(f"warning: {printable(' '.join(str(message).split()))}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return showwarning


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit status: 0 ok, 1 a check failed, 2 bad input (one line on stderr)."""
    stdout = sys.stdout
    sys.stdout = _EscapingStdout(stdout)  # type: ignore[assignment]
    try:
        with warnings.catch_warnings():  # a deprecated spec spelling: one `warning: file:line:col: ...` line each
            warnings.simplefilter("default", ZooDeprecationWarning)
            warnings.showwarning = _show_deprecation(warnings.showwarning)
            code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return code
    except BrokenPipeError:
        # the reader went away (`zoo show x | head`): stop quietly; point stdout at /dev/null so
        # the interpreter's final flush does not complain (the recipe of Python's signal docs)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    finally:
        sys.stdout = stdout


def _main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("run", "bench"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        for path in args.specs:
            zoo.add_specs(path)
        if args.command == "run":
            return cmd_run(args, extra)
        if args.command == "bench":
            return cmd_bench(args, extra)
        handler = {"list": cmd_list, "show": cmd_show, "validate": cmd_validate, "schema": cmd_schema, "train": cmd_train,
                   "check": cmd_check, "doctor": cmd_doctor, "metrics": cmd_metrics, "new": cmd_new,
                   "sample": cmd_sample, "report": cmd_report}[args.command]
        return handler(args)
    except ZooError as exc:
        if args.debug:
            raise
        located = exc.location.file is not None or exc.location.field is not None
        print(str(exc) if located else f"zoo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
