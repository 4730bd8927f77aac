"""``zoo sample``: rows ``0 .. N-1`` of a procedure's population written to disk in verified shards, resumable,
and spread over processes with ``torch.distributed`` (issue 42).

Row ``i`` of a run with base seed ``S`` is the one-row call
``proc(seed=row_seed(S, i), **proc.population_inputs(i, i + 1))`` (:mod:`registry.contract`), so its value depends
on ``(S, i)`` alone: never on the batch size, the shard, the number of processes or which process made it. A
procedure with ``per_row_seeds`` draws a batch of rows in one call from a list of seeds; any other batch-independent
sampler, and every sampler with ``exact=True`` (``--exact``), is called one row at a time. The one-row calls make a
row's bytes independent of ``--batch-size``; batched calls do so where the sampler's arithmetic is row-exact (per-row
loops, elementwise math: what conformance check ``per-row-seeds`` verifies bit for bit on the spec's CPU variant), while
a batched network (a convolution, a GPU matmul) may round row ``i`` differently for another batch size. So a batched
run records its batch size in its identity: the number of processes, the shard a row falls in and the process that
made it never change a byte, and a resume with another batch size is refused rather than mixing roundings.

The folder ``DIR``::

    manifest.json               the run: spec name and resolved-spec sha256, variant, sampler, final params, seed,
                                row-seed rule, shard size, device type, dtype; package versions; the output class and
                                how each of its fields is stored; one entry per shard (row range, files, sha256)
    shard-000000.safetensors    the shard's per-row tensor fields, rows along dim 0 (absent if it has none)
    shard-000000.jsonl          its per-row other fields (texts, token ids, stats): one JSON object per row
    .progress/shard-000000.json while the run is incomplete: the record of each finished shard

Every file is written under a temp name in ``DIR``, fsync'ed and renamed (``os.replace``), and a shard's record only
after its files, so a crash or Ctrl-C leaves at worst a finished shard without a record (redone) or a temp file
(never read; removed at the end of the next complete run). Re-running the same command keeps every shard whose
record exists and whose files hash to it and redoes the others; a folder whose manifest names another run (spec
hash, variant, sampler, params, seed, shard size, device type or dtype) is refused in one line. ``num_samples`` may
change between runs (shards with the same row range are kept).

Under ``torchrun`` (``RANK`` and ``WORLD_SIZE`` in the environment) the process group is initialised with gloo (CPU)
or NCCL (CUDA); rank ``r`` verifies shards ``r, r + W, ...``, the missing shards are gathered and dealt out
round-robin, and rank 0 writes the manifest after the last collective. ``DIR`` is one folder every rank sees (on
several machines: a shared filesystem). Nothing here launches processes or opens sockets itself.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .contract import ROW_SEED_STRIDE, SEED_MAX, Procedure, row_seed
from .errors import Location, ParamError, RunError, SampleError, ZooError
from .results import ProcedureOutput, is_per_call

__all__ = ["FORMAT", "SampleReport", "check_options", "refusal", "run_sample", "iter_samples", "read_samples",
           "read_manifest"]

FORMAT = "zoo-samples/1"
MANIFEST = "manifest.json"
PROGRESS = ".progress"
MAX_ROWS = 100_000_000
MAX_BATCH = 1_000_000
MAX_JSON_BYTES = 256 << 20
ROW_SEED_RULE = f"seed * {ROW_SEED_STRIDE} + i"
_SHARD_FILE = re.compile(r"shard-(\d{6,})\.(safetensors|jsonl)")
_RECORD_FILE = re.compile(r"shard-(\d{6,})\.json")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_TMP = ".tmp-"
_FLAGS = {"num_samples": "--num-samples", "batch_size": "--batch-size", "shard_size": "--shard-size", "seed": "--seed",
          "out": "--out"}
#: the run's identity: a manifest that differs in any of these holds another run
IDENTITY = ("spec", "spec_sha256", "variant", "sampler", "params", "seed", "row_seed", "shard_size", "batching", "device",
            "dtype")


def _flag(param: str, cli: bool) -> str:
    return _FLAGS.get(param, param) if cli else param


# ----------------------------------------------------------------------------- options and refusals
def check_options(num_samples: Any, batch_size: Any, shard_size: Any, seed: Any, *, cli: bool = False) -> None:
    """One-line :class:`ParamError` naming the option (``--num-samples`` when ``cli``) for a count that is not an
    integer in range, or a base seed whose row seeds ``seed * 1000003 + i`` would pass ``2**63 - 1``."""
    for param, value, hi in (("num_samples", num_samples, MAX_ROWS), ("batch_size", batch_size, MAX_BATCH),
                             ("shard_size", shard_size, MAX_ROWS)):
        if param == "shard_size" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
            raise ParamError(f"expected an integer in [1, {hi:,}], got {value!r}", Location(field=_flag(param, cli)))
    top = (SEED_MAX - (num_samples - 1)) // ROW_SEED_STRIDE
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= top:
        raise ParamError(f"expected an integer in [0, {top}] (row i is seeded seed * {ROW_SEED_STRIDE} + i < 2**63), "
                         f"got {seed!r}", Location(field=_flag("seed", cli)))


def refusal(spec: Any, name: str) -> str | None:
    """Why ``zoo sample`` cannot draw from procedure ``name`` of ``spec`` (one line), or ``None``."""
    from .resolve import resolve

    if name in spec.recipes:
        return f"{name} is a recipe (spec section recipes:), not a sampler: zoo sample draws a sampler's rows"
    cls = resolve(spec.procedure(name)[1].target, kind="procedure")
    if not getattr(cls, "batch_independent", False):
        return (f"{name} is not batch-independent (it does not declare batch_independent: its rows may depend on the "
                "rest of the batch), so a row's value would depend on --batch-size and the number of processes")
    if getattr(cls, "population_inputs", None) is Procedure.population_inputs:
        return (f"{name} ({cls.__name__}) defines no population_inputs (registry.contract.Procedure), so zoo sample "
                "cannot tell what its row i is")
    return None


# ----------------------------------------------------------------------------- files
def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    """``data`` under ``path``: written to a temp name in the same folder, fsync'ed, then renamed over ``path``."""
    tmp = path.with_name(f".{path.name}{_TMP}{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    _fsync_dir(path.parent)


def _read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of a regular file (a symlink, folder or device is refused), at most ``limit`` bytes."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise SampleError(f"{path}: not a regular file")
    if limit is not None and st.st_size > limit:
        raise SampleError(f"{path}: {st.st_size} bytes, more than the {limit >> 20} MiB a zoo sample JSON file may have")
    with open(path, "rb") as f:
        return f.read()


def _load_json(path: Path) -> Any:
    data = _read_regular(path, MAX_JSON_BYTES)
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise SampleError(f"{path}: not valid JSON ({' '.join(str(exc).split())[:120]})") from None


def _dumps(value: Any) -> bytes:
    return (json.dumps(value, indent=1, sort_keys=True) + "\n").encode()


def read_manifest(out: str | os.PathLike[str]) -> dict[str, Any]:
    """``DIR/manifest.json``, checked for shape (the file is untrusted: nothing in it is imported or run)."""
    path = Path(out) / MANIFEST
    m = _load_json(path)
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise SampleError(f"{path}: not a zoo sample manifest (expected format {FORMAT!r})")
    run = m.get("run")
    if not isinstance(run, dict) or any(k not in run for k in IDENTITY):
        raise SampleError(f"{path}: run: expected an object with {', '.join(IDENTITY)}")
    n, shards = m.get("num_samples"), m.get("shards")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_ROWS or not isinstance(shards, list):
        raise SampleError(f"{path}: num_samples/shards: expected an integer in [1, {MAX_ROWS}] and a list")
    size = run.get("shard_size")
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_ROWS:
        raise SampleError(f"{path}: run.shard_size: expected an integer in [1, {MAX_ROWS}], got {size!r}")
    if not isinstance(m.get("complete"), bool):
        raise SampleError(f"{path}: complete: expected true or false")
    return m


def inspect_out(out: Path, cli: bool = False) -> dict[str, Any] | None:
    """The manifest of an existing run in ``out``, ``None`` for a new or empty folder; a file, or a folder that
    holds something else, is a one-line :class:`ParamError` naming ``--out``."""
    where = Location(field=_flag("out", cli))
    if not os.path.lexists(out):
        return None
    if not out.is_dir():
        raise ParamError(f"{out} is a file; expected a folder (new, empty, or holding this run)", where)
    if os.path.lexists(out / MANIFEST):
        return read_manifest(out)
    if any(True for _ in out.iterdir()):
        raise ParamError(f"{out} is not empty and holds no zoo sample run (no {MANIFEST}); use a new or empty folder", where)
    return None


def _shard_name(k: int, ext: str) -> str:
    return f"shard-{k:06d}.{ext}"


def _plan(num_samples: int, shard_size: int) -> list[tuple[int, int]]:
    return [(a, min(num_samples, a + shard_size)) for a in range(0, num_samples, shard_size)]


def _clean_record(raw: Any, k: int, rows: tuple[int, int]) -> dict[str, Any] | None:
    """A shard record read from disk (untrusted), if it is well-formed and for shard ``k`` with ``rows``."""
    if not isinstance(raw, dict) or raw.get("index") != k or raw.get("rows") != list(rows):
        return None
    files = raw.get("files")
    if not isinstance(files, list) or not 1 <= len(files) <= 2:
        return None
    for f in files:
        if not isinstance(f, dict) or not isinstance(f.get("file"), str) or not isinstance(f.get("sha256"), str):
            return None
        m = _SHARD_FILE.fullmatch(f["file"])
        if m is None or int(m[1]) != k or not _HEX64.fullmatch(f["sha256"]):
            return None
        if isinstance(f.get("bytes"), bool) or not isinstance(f.get("bytes"), int):
            return None
    return raw


def _verify(out: Path, rec: Mapping[str, Any]) -> bool:
    """Whether every file of a shard record is a regular file of the recorded size and sha256."""
    from .weights import sha256_file

    for f in rec["files"]:
        path = out / f["file"]
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_size != f["bytes"] or sha256_file(path) != f["sha256"]:
            return False
    return True


# ----------------------------------------------------------------------------- outputs <-> shard files
def output_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


@dataclass
class _Rows:
    """The rows of one call (or of several, merged), split by field: ``kinds[f]`` is ``tensor`` (a tensor, rows
    along dim 0), ``tensors`` (a list of tensors, one a row), ``json`` / ``tuple`` (a list / tuple, one JSON
    value a row) or ``call`` (one JSON value for the whole call: a :func:`~registry.results.per_call` field, a
    scalar, or ``None``)."""

    n: int
    output: str
    kinds: dict[str, str]
    values: dict[str, Any]


def _jsonable(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise SampleError(f"{what} is not a JSON value ({exc}); zoo sample writes non-tensor fields as JSON Lines") from None


def split_rows(out: Any, n: int, proc: Any = None) -> _Rows:
    """The fields of a call's typed output ``out`` (``n`` rows) sorted into per-row and per-call values.

    A tensor whose first dimension is ``n`` and a list/tuple of length ``n`` are per-row unless the field is
    declared :func:`~registry.results.per_call`; other tensors or lists are an error naming the field. When
    ``proc.output_rows`` hands every row the field's whole value (``n >= 2``), the field is per-call and must be
    declared so (one line saying so)."""
    import torch

    who = type(proc).__name__ if proc is not None else "the sampler"
    if not (isinstance(out, ProcedureOutput) and dataclasses.is_dataclass(out)):
        raise SampleError(f"zoo sample needs a typed output (a registry.results.ProcedureOutput dataclass); {who} "
                          f"returned {type(out).__name__}")
    cls = type(out)
    split = proc.output_rows(out) if proc is not None else None
    if split is not None and len(split) != n:
        raise SampleError(f"{who} returned {len(split)} rows for {n} (its output_rows)")
    kinds: dict[str, str] = {}
    values: dict[str, Any] = {}
    for f in dataclasses.fields(out):
        if not f.init:
            continue
        v = getattr(out, f.name)
        what = f"field {f.name!r} of {cls.__name__}"
        if v is None or is_per_call(f):
            kinds[f.name], values[f.name] = "call", _jsonable(v, what)
            continue
        if isinstance(v, torch.Tensor):
            if v.dim() == 0 or v.shape[0] != n:
                raise SampleError(f"{what}: a tensor of shape {tuple(v.shape)} for {n} rows is neither one row per "
                                  "entry of dim 0 nor declared registry.results.per_call")
            kind, row_value = "tensor", v.detach().cpu()
        elif isinstance(v, (list, tuple)):
            if len(v) == 0 and n != 0:
                kinds[f.name], values[f.name] = "call", _jsonable(v, what)
                continue
            if len(v) != n:
                raise SampleError(f"{what}: {len(v)} entries for {n} rows; declare it registry.results.per_call if it "
                                  "is one value per call")
            if all(isinstance(x, torch.Tensor) for x in v):
                kind, row_value = "tensors", [x.detach().cpu() for x in v]
            else:
                kind = "tuple" if isinstance(v, tuple) else "json"
                row_value = [_jsonable(x, f"a row of {what}") for x in v]
        else:
            kinds[f.name], values[f.name] = "call", _jsonable(v, what)
            continue
        if n >= 2 and split is not None and all(_is_whole(getattr(r, f.name, None), v) for r in split):
            raise SampleError(f"{what}: {who}.output_rows gives every row the whole value, so it is one value per call; "
                              "declare the field with registry.results.per_call()")
        kinds[f.name], values[f.name] = kind, row_value
    return _Rows(n, output_name(cls), kinds, values)


def row_of(rows: _Rows, j: int) -> dict[str, Any]:
    """Row ``j`` of a split output: each per-row field's entry ``j`` (a tensor keeps its row dimension: ``[j:j+1]``)
    and each per-call field's value: what conformance compares between a batched call and a one-row call."""
    out: dict[str, Any] = {}
    for f, kind in rows.kinds.items():
        v = rows.values[f]
        out[f] = v[j:j + 1] if kind == "tensor" else v if kind == "call" else v[j]
    return out


def _is_whole(part: Any, whole: Any) -> bool:
    import torch

    if part is whole:
        return True
    if isinstance(whole, torch.Tensor):
        return isinstance(part, torch.Tensor) and part.shape == whole.shape and bool(torch.equal(part, whole))
    return type(part) is type(whole) and len(part) == len(whole) and part == whole


def _merge(parts: Sequence[_Rows], where: str) -> _Rows:
    """Several calls' rows as one block (same output class, field kinds and per-call values)."""
    import torch

    first = parts[0]
    for p in parts[1:]:
        if p.output != first.output or p.kinds != first.kinds:
            raise SampleError(f"{where}: calls returned different outputs ({first.output} {first.kinds} vs {p.output} "
                              f"{p.kinds})")
        for f, kind in first.kinds.items():
            if kind == "call" and p.values[f] != first.values[f]:
                raise SampleError(f"{where}: per-call field {f!r} differs between calls ({first.values[f]!r} vs "
                                  f"{p.values[f]!r}), so the rows cannot form one output")
    values: dict[str, Any] = {}
    for f, kind in first.kinds.items():
        vals = [p.values[f] for p in parts]
        if kind == "tensor":
            try:
                values[f] = torch.cat(vals) if len(vals) > 1 else vals[0]
            except RuntimeError as exc:
                raise SampleError(f"{where}: field {f!r}: rows cannot be stacked ({' '.join(str(exc).split())[:160]})") from None
        elif kind == "call":
            values[f] = vals[0]
        else:
            values[f] = [x for v in vals for x in v]
    return _Rows(sum(p.n for p in parts), first.output, dict(first.kinds), values)


def _encode(rows: _Rows, run_sha: str, a: int, b: int) -> dict[str, bytes]:
    """The shard's files: ``{"safetensors": bytes, "jsonl": bytes}`` (either absent when it has no such field)."""
    from safetensors.torch import save

    tensors: dict[str, Any] = {}
    lines: list[dict[str, Any]] = [{} for _ in range(rows.n)]
    for f, kind in rows.kinds.items():
        v = rows.values[f]
        if kind == "tensor":
            tensors[f] = v.contiguous().clone()
        elif kind == "tensors":
            for j, t in enumerate(v):
                tensors[f"{f}/{j}"] = t.contiguous().clone()
        elif kind in ("json", "tuple"):
            for j, x in enumerate(v):
                lines[j][f] = x
    files: dict[str, bytes] = {}
    if tensors:
        # one metadata key: safetensors writes several in hash-map order, and the shard's bytes must not vary
        about = json.dumps({"format": FORMAT, "rows": [a, b], "run_sha256": run_sha}, sort_keys=True)
        files["safetensors"] = save(tensors, metadata={"zoo": about})
    if any(lines):
        files["jsonl"] = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return files


def _decode(blobs: Mapping[str, bytes], kinds: Mapping[str, str], n: int, where: str) -> dict[str, Any]:
    """The per-row field values of one shard from its files' bytes (already hash-verified)."""
    from safetensors.torch import load

    tensors: dict[str, Any] = {}
    if "safetensors" in blobs:
        try:
            tensors = load(blobs["safetensors"])
        except Exception as exc:  # noqa: BLE001 - a malformed file is one line
            raise SampleError(f"{where}: not a readable safetensors file ({' '.join(str(exc).split())[:120]})") from None
    lines: list[Any] = []
    if "jsonl" in blobs:
        try:
            lines = [json.loads(x) for x in blobs["jsonl"].decode().splitlines()]
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise SampleError(f"{where}: not JSON Lines ({' '.join(str(exc).split())[:120]})") from None
        if len(lines) != n or not all(isinstance(x, dict) for x in lines):
            raise SampleError(f"{where}: expected {n} JSON objects, one per row, got {len(lines)} lines")
    out: dict[str, Any] = {}
    for f, kind in kinds.items():
        if kind == "tensor":
            t = tensors.get(f)
            if t is None or t.dim() == 0 or t.shape[0] != n:
                raise SampleError(f"{where}: tensor {f!r} with {n} rows is missing or of another shape")
            out[f] = t
        elif kind == "tensors":
            ts = [tensors.get(f"{f}/{j}") for j in range(n)]
            if any(t is None for t in ts):
                raise SampleError(f"{where}: tensors {f!r}/0..{n - 1} are missing")
            out[f] = ts
        elif kind in ("json", "tuple"):
            if any(f not in x for x in lines):
                raise SampleError(f"{where}: field {f!r} is missing from a row")
            out[f] = [x[f] for x in lines]
    return out


# ----------------------------------------------------------------------------- processes
class _Group:
    """The ``torch.distributed`` process group of a ``torchrun`` launch (``RANK``/``WORLD_SIZE`` set), or one
    process. Collectives are ``all_gather_object`` (a barrier is a gather of ``None``)."""

    def __init__(self) -> None:
        self.rank, self.world, self.local_rank = 0, 1, int(os.environ.get("LOCAL_RANK", "0") or 0)
        self._dist: Any = None
        self._owned = False
        self._device: Any = None

    @staticmethod
    def launched() -> bool:
        return "RANK" in os.environ and "WORLD_SIZE" in os.environ

    def device_for(self, device: str | None) -> str | None:
        """``cuda`` under torchrun is this process's GPU, ``cuda:LOCAL_RANK``; anything else is kept."""
        return f"cuda:{self.local_rank}" if device == "cuda" and self.launched() else device

    def start(self, device: str) -> None:
        if not self.launched():
            return
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        dev = torch.device(device)
        if dev.type == "cuda":
            torch.cuda.set_device(dev.index if dev.index is not None else self.local_rank)
            self._device = torch.device("cuda", torch.cuda.current_device())
        if not dist.is_initialized():
            timeout = float(os.environ.get("ZOO_SAMPLE_TIMEOUT", 24 * 3600))
            dist.init_process_group("nccl" if dev.type == "cuda" else "gloo", timeout=timedelta(seconds=timeout))
            self._owned = True
        self._dist = dist
        self.rank, self.world = dist.get_rank(), dist.get_world_size()

    def gather(self, obj: Any) -> list[Any]:
        if self._dist is None:
            return [obj]
        got: list[Any] = [None] * self.world
        self._dist.all_gather_object(got, obj)
        return got

    def close(self) -> None:
        if self._owned and self._dist is not None and self._dist.is_initialized():
            try:
                self._dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - shutting down after an error: nothing more to do
                pass
        self._dist, self._owned = None, False


# ----------------------------------------------------------------------------- the run
@dataclass
class SampleReport:
    """What one ``zoo sample`` process reports: the folder, the plan, what was kept and written (all processes),
    and the generation rate (rows written by all processes over the time from the first to the last shard)."""

    out: Path
    spec: str
    variant: str
    sampler: str
    num_samples: int
    shards: int
    shards_kept: int
    shards_written: int
    rows_written: int
    seconds: float
    rows_per_s: float
    world_size: int
    rank: int
    batching: str

    def summary(self) -> str:
        how = self.batching
        rate = f"{self.rows_written} rows in {self.seconds:.2f} s = {self.rows_per_s:.1f} rows/s" if self.rows_written else "nothing to draw"
        return (f"zoo sample {self.spec} ({self.sampler}, variant {self.variant}): {self.num_samples} rows in {self.shards} "
                f"shards -> {self.out}; {self.shards_written} written, {self.shards_kept} kept (verified); {rate} over "
                f"{self.world_size} process{'es' if self.world_size > 1 else ''} ({how})")


def spec_sha256(spec: Any) -> str:
    """sha256 of the resolved spec (``extends`` applied, defaults filled) as canonical JSON."""
    return _sha256(json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode())


def batching(proc: Any, batch_size: int, exact: bool) -> str:
    """How rows are drawn: one call per row (``exact``, or a sampler without ``per_row_seeds``), else in calls of
    ``batch_size`` rows with per-row seeds. Part of a run's identity (see the module docstring)."""
    if exact or not getattr(proc, "per_row_seeds", False):
        return "one row per call"
    return f"{batch_size} rows per call (per-row seeds)"


def run_identity(pipe: Any, sampler: str, seed: int, shard_size: int, how: str) -> dict[str, Any]:
    import torch

    proc = pipe.procedures[sampler]
    return {"spec": pipe.spec.name, "spec_sha256": spec_sha256(pipe.spec), "variant": pipe.variant, "sampler": sampler,
            "params": json.loads(proc.params.model_dump_json()), "seed": seed, "row_seed": ROW_SEED_RULE,
            "shard_size": shard_size, "batching": how, "device": torch.device(pipe.device).type,
            "dtype": pipe.dtype or "default"}


def _run_sha(identity: Mapping[str, Any]) -> str:
    return _sha256(json.dumps(dict(identity), sort_keys=True, separators=(",", ":")).encode())


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _compare(there: Mapping[str, Any], here: Mapping[str, Any], out: Path, cli: bool) -> None:
    diffs: list[str] = []
    for k in IDENTITY:
        a, b = there.get(k), here.get(k)
        if a == b:
            continue
        if k == "params" and isinstance(a, dict) and isinstance(b, dict):
            diffs += [f"params.{p} {_short(a.get(p))} there, {_short(b.get(p))} here" for p in sorted(set(a) | set(b))
                      if a.get(p) != b.get(p)]
        else:
            diffs.append(f"{k} {_short(a)} there, {_short(b)} here")
    if diffs:
        raise SampleError(f"{out} holds another run ({'; '.join(diffs[:3])}{'; ...' if len(diffs) > 3 else ''}); use "
                          f"another {'--out' if cli else 'folder'} or the same options", Location(field=_flag("out", cli)))


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for pkg in ("zoo-icml2026", "torch", "numpy", "safetensors", "transformers", "diffusers"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def _progress_records(out: Path, plan: Sequence[tuple[int, int]], run_sha: str) -> dict[int, dict[str, Any]]:
    folder = out / PROGRESS
    found: dict[int, dict[str, Any]] = {}
    if not folder.is_dir() or folder.is_symlink():
        return found
    for path in folder.iterdir():
        m = _RECORD_FILE.fullmatch(path.name)
        if m is None or int(m[1]) >= len(plan):
            continue
        k = int(m[1])
        try:
            raw = _load_json(path)
        except (SampleError, OSError):
            continue
        rec = _clean_record(raw, k, plan[k])
        if rec is not None and raw.get("run_sha256") == run_sha and isinstance(raw.get("kinds"), dict):
            found[k] = rec
    return found


def _manifest_records(m: Mapping[str, Any] | None, plan: Sequence[tuple[int, int]]) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    if m is None or not isinstance(m.get("kinds"), dict):
        return found
    for raw in m["shards"]:
        k = raw.get("index") if isinstance(raw, dict) else None
        if isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(plan):
            rec = _clean_record(raw, k, plan[k])
            if rec is not None:
                found[k] = {**rec, "output": m.get("output"), "kinds": m["kinds"], "per_call": m.get("per_call", {})}
    return found


def _call(proc: Any, seed: Any, inputs: Mapping[str, Any], where: str) -> Any:
    try:
        return proc(seed=seed, **inputs)
    except ZooError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the rows; the cause stays chained
        raise RunError(f"{where} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from exc


def _check_first_call(proc: Any, seed: int, n: int, cli: bool) -> None:
    """The inputs of the run's largest call (``n`` rows) validated as the call validates them (types, the per-call
    limits of :mod:`registry.limits`), so a ``--batch-size`` above the rows limit is one line before anything is written."""
    from .inputs import validate_call

    seeds: Any = [row_seed(seed, i) for i in range(n)] if n > 1 else row_seed(seed, 0)
    try:
        validate_call(proc, seed=seeds, **proc.population_inputs(0, n))
    except ParamError as exc:
        raise ParamError(f"{n} rows per call: {exc}", Location(field=_flag("batch_size", cli))) from None


def _draw_shard(proc: Any, a: int, b: int, seed: int, step: int, bar: Any, where: str) -> _Rows:
    """Rows ``a .. b - 1`` in calls of ``step`` rows (1: the one-row calls; more: per-row seeds), merged."""
    parts: list[_Rows] = []
    for c in range(a, b, step):
        d = min(b, c + step)
        seeds: Any = [row_seed(seed, i) for i in range(c, d)] if step > 1 else row_seed(seed, c)
        out = _call(proc, seeds, proc.population_inputs(c, d), f"{where} rows {c}..{d - 1}")
        parts.append(split_rows(out, d - c, proc))
        if bar is not None:
            bar.update(d - c)
    return _merge(parts, f"{where} rows {a}..{b - 1}")


def _write_shard(out: Path, k: int, a: int, b: int, rows: _Rows, run_sha: str) -> dict[str, Any]:
    files = []
    for ext, data in _encode(rows, run_sha, a, b).items():
        name = _shard_name(k, ext)
        _atomic_write(out / name, data)
        files.append({"file": name, "sha256": _sha256(data), "bytes": len(data)})
    per_call = {f: rows.values[f] for f, kind in rows.kinds.items() if kind == "call"}
    rec = {"index": k, "rows": [a, b], "files": files, "output": rows.output, "kinds": rows.kinds, "per_call": per_call}
    (out / PROGRESS).mkdir(exist_ok=True)
    _atomic_write(out / PROGRESS / f"shard-{k:06d}.json", _dumps({**rec, "run_sha256": run_sha}))
    return rec


def _finish(out: Path, manifest: dict[str, Any], records: Mapping[int, Mapping[str, Any]], nshards: int) -> None:
    """Rank 0, after every shard is verified or written: the complete manifest, then the leftovers removed."""
    first = records[0]
    for k in range(nshards):
        rec = records[k]
        for key in ("output", "kinds", "per_call"):
            if rec.get(key) != first.get(key):
                raise SampleError(f"{out}: shard {k} and shard 0 differ in {key} ({_short(rec.get(key))} vs "
                                  f"{_short(first.get(key))}); the rows cannot form one output")
    manifest.update(complete=True, output=first["output"], kinds=first["kinds"], per_call=first["per_call"],
                    shards=[{"index": k, "rows": records[k]["rows"], "files": records[k]["files"]} for k in range(nshards)])
    _atomic_write(out / MANIFEST, _dumps(manifest))
    keep = {f["file"] for k in range(nshards) for f in records[k]["files"]}
    for path in out.iterdir():
        stale_shard = _SHARD_FILE.fullmatch(path.name) is not None and path.name not in keep
        if stale_shard or (path.name.startswith(".") and _TMP in path.name):
            path.unlink(missing_ok=True)
    progress = out / PROGRESS
    if progress.is_dir() and not progress.is_symlink():
        for path in progress.iterdir():
            if _RECORD_FILE.fullmatch(path.name) or (path.name.startswith(".") and _TMP in path.name):
                path.unlink(missing_ok=True)
        try:
            progress.rmdir()
        except OSError:
            pass


def run_sample(spec: Any, build: Callable[[str | None], Any], *, num_samples: int, out: str | os.PathLike[str],
               batch_size: int = 16, seed: int = 0, sampler: str | None = None, variant: str | None = None,
               device: str | None = None, shard_size: int | None = None, exact: bool = False, progress: bool = True,
               cli: bool = False) -> SampleReport:
    """Write rows ``0 .. num_samples - 1`` of the population of ``spec``'s procedure (``sampler`` or the variant's
    default) to ``out`` (see the module docstring). ``build(device)`` builds the pipeline (the facade passes
    ``zoo.load``'s arguments). ``exact``: one call per row even for a ``per_row_seeds`` sampler. Every process of
    a ``torchrun`` launch calls this with the same arguments."""
    check_options(num_samples, batch_size, shard_size, seed, cli=cli)
    guess = sampler or (spec.default_for(variant) if variant else None)
    if guess is None and len({spec.default_for(v) for v in spec.variants}) == 1:
        guess = spec.default
    if guess is not None and guess in {*spec.samplers, *spec.recipes} and (why := refusal(spec, guess)):
        raise SampleError(why)
    outdir = Path(out).expanduser()
    old = inspect_out(outdir, cli)
    if shard_size is None:
        shard_size = old["run"]["shard_size"] if old is not None else batch_size
    group = _Group()
    try:
        pipe = build(group.device_for(device))
        name = pipe.default
        if (why := refusal(spec, name)) is not None:
            raise SampleError(why)
        proc = pipe.procedures[name]
        how = batching(proc, batch_size, exact)
        step = 1 if how == "one row per call" else batch_size
        _check_first_call(proc, seed, min(step, num_samples), cli)
        identity = run_identity(pipe, name, seed, shard_size, how)
        if old is not None:
            _compare(old["run"], identity, outdir, cli)
        run_sha = _run_sha(identity)
        group.start(pipe.device)
        if len(set(group.gather(run_sha))) > 1:
            raise SampleError("the processes disagree on the run (spec, variant, params, seed, device or dtype differ "
                              "between ranks); give every rank the same command")
        plan = _plan(num_samples, shard_size)
        manifest: dict[str, Any] = {
            "format": FORMAT, "complete": False, "run": identity, "run_sha256": run_sha, "num_samples": num_samples,
            "batch_size": batch_size, "world_size": group.world,
            "versions": _versions(), "device": str(pipe.device),
            "shards": [s for s in (old or {}).get("shards", []) if isinstance(s, dict)],
        }
        for key in ("output", "kinds", "per_call"):
            if old is not None and key in old:
                manifest[key] = old[key]
        if group.rank == 0:
            outdir.mkdir(parents=True, exist_ok=True)
            _atomic_write(outdir / MANIFEST, _dumps(manifest))
        group.gather(None)
        known = [_progress_records(outdir, plan, run_sha), _manifest_records(old, plan)]
        mine: dict[int, dict[str, Any]] = {}
        missing = []
        for k in range(group.rank, len(plan), group.world):
            rec = next((r[k] for r in known if k in r and _verify(outdir, r[k])), None)
            if rec is None:
                missing.append(k)
            else:
                mine[k] = rec
        todo = sorted(k for part in group.gather(missing) for k in part)
        assigned = todo[group.rank::group.world]
        bar = None
        if progress and group.rank == 0:
            from tqdm.auto import tqdm

            bar = tqdm(total=sum(plan[k][1] - plan[k][0] for k in assigned), unit="row", file=sys.stderr, leave=False,
                       desc=f"{spec.name} {name}" + (f" (rank 0 of {group.world})" if group.world > 1 else ""))
        t0 = time.perf_counter()
        try:
            for k in assigned:
                a, b = plan[k]
                rows = _draw_shard(proc, a, b, seed, step, bar, f"{spec.name} ({name})")
                mine[k] = _write_shard(outdir, k, a, b, rows, run_sha)
        finally:
            if bar is not None:
                bar.close()
        gathered = group.gather(mine)
        seconds = time.perf_counter() - t0
        if group.rank == 0:
            records = {k: r for part in gathered for k, r in part.items()}
            _finish(outdir, manifest, records, len(plan))
        group.gather(None)
        rows_written = sum(plan[k][1] - plan[k][0] for k in todo)
        return SampleReport(outdir, spec.name, pipe.variant, name, num_samples, len(plan), len(plan) - len(todo), len(todo),
                            rows_written, seconds, rows_written / seconds if rows_written and seconds > 0 else 0.0,
                            group.world, group.rank, how)
    finally:
        group.close()


# ----------------------------------------------------------------------------- reading
def _output_class(name: Any, importer: Callable[[], None] | None) -> type:
    """The :class:`ProcedureOutput` subclass named ``module:qualname`` among the classes already imported; if absent,
    ``importer()`` (the facade: resolve the run's procedure through the catalog) and look again. A manifest never
    makes anything be imported by its own say."""
    def find() -> type | None:
        stack, seen = [ProcedureOutput], set()
        while stack:
            c = stack.pop()
            if c in seen:
                continue
            seen.add(c)
            if output_name(c) == name:
                return c
            stack.extend(c.__subclasses__())
        return None

    cls = find()
    if cls is None and importer is not None:
        importer()
        cls = find()
    if cls is None:
        raise SampleError(f"output class {_short(name, 120)} of this run is not a known registry.results.ProcedureOutput here "
                          "(its spec is not in the catalog: zoo.add_specs(its file or folder), or import its package first)")
    return cls


def iter_samples(out: str | os.PathLike[str], importer: Callable[[Mapping[str, Any]], None] | None = None
                 ) -> Iterator[tuple[range, ProcedureOutput]]:
    """``(rows, output)`` per shard of a complete run, in row order, each shard's files verified against the
    manifest's sha256 before they are parsed (one-line :class:`SampleError` otherwise). Memory: one shard.
    ``importer(manifest)`` is called when the output class is not imported yet (the facade resolves the run's
    procedure through the catalog)."""
    outdir = Path(out).expanduser()
    if not outdir.is_dir():
        raise SampleError(f"{outdir}: no such folder (expected the --out folder of zoo sample)")
    return _iter(outdir, read_manifest(outdir), importer)


def _iter(outdir: Path, m: Mapping[str, Any], importer: Callable[[Mapping[str, Any]], None] | None
          ) -> Iterator[tuple[range, ProcedureOutput]]:
    plan = _plan(m["num_samples"], m["run"]["shard_size"])
    if not m["complete"]:
        progress = outdir / PROGRESS
        done = sum(1 for p in progress.iterdir() if _RECORD_FILE.fullmatch(p.name)) if progress.is_dir() else 0
        raise SampleError(f"{outdir}: the run is incomplete ({max(done, len(m['shards']))} of {len(plan)} shards done); "
                          "re-run its zoo sample command to finish it")
    kinds, per_call = m.get("kinds"), m.get("per_call", {})
    kind_names = {"tensor", "tensors", "json", "tuple", "call"}
    if not isinstance(kinds, dict) or not all(isinstance(v, str) and v in kind_names for v in kinds.values()) \
            or not isinstance(per_call, dict) or any(kinds[f] == "call" and f not in per_call for f in kinds):
        raise SampleError(f"{outdir / MANIFEST}: kinds/per_call: expected the field layout of the output")
    if len(m["shards"]) != len(plan):
        raise SampleError(f"{outdir / MANIFEST}: {len(m['shards'])} shards for {len(plan)} planned")
    cls = _output_class(m.get("output"), (lambda: importer(m)) if importer is not None else None)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    if set(kinds) - names:
        raise SampleError(f"{outdir / MANIFEST}: fields {sorted(set(kinds) - names)} are not fields of {cls.__name__}")
    for k, (a, b) in enumerate(plan):
        rec = _clean_record(m["shards"][k], k, (a, b))
        if rec is None:
            raise SampleError(f"{outdir / MANIFEST}: shards[{k}]: expected rows [{a}, {b}] and its files with their sha256")
        blobs: dict[str, bytes] = {}
        for f in rec["files"]:
            path = outdir / f["file"]
            try:
                data = _read_regular(path)
            except OSError as exc:
                raise SampleError(f"{path}: cannot read ({exc.strerror or exc}); re-run the zoo sample command to redo it") from None
            if _sha256(data) != f["sha256"]:
                raise SampleError(f"{path}: sha256 differs from the manifest's (corrupt or changed); re-run the zoo sample "
                                  "command to redo it")
            blobs[f["file"].rsplit(".", 1)[1]] = data
        values = _decode(blobs, kinds, b - a, str(outdir / _shard_name(k, "*")))
        for f, kind in kinds.items():
            if kind == "call":
                values[f] = per_call[f]
            elif kind == "tuple":
                values[f] = tuple(values[f])
        yield range(a, b), cls(**values)


def read_samples(out: str | os.PathLike[str], importer: Callable[[Mapping[str, Any]], None] | None = None) -> ProcedureOutput:
    """Every row of a complete run in order, as one typed output with the fields a call returns (tensors
    concatenated along dim 0, lists joined, per-call fields once); every shard verified (see :func:`iter_samples`)."""
    import torch

    outdir = Path(out).expanduser()
    if not outdir.is_dir():
        raise SampleError(f"{outdir}: no such folder (expected the --out folder of zoo sample)")
    m = read_manifest(outdir)
    parts = list(_iter(outdir, m, importer))
    first = parts[0][1]
    kinds = m["kinds"]
    values: dict[str, Any] = {}
    for f, kind in kinds.items():
        vals = [getattr(o, f) for _, o in parts]
        if kind == "tensor":
            values[f] = torch.cat(vals) if len(vals) > 1 else vals[0]
        elif kind == "call":
            values[f] = vals[0]
        elif kind == "tuple":
            values[f] = tuple(x for v in vals for x in v)
        else:
            values[f] = [x for v in vals for x in v]
    return type(first)(**values)
