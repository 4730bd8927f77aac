"""``zoo new NAME --template sampler|recipe``: a third-party method package that passes ``zoo check``
as generated (spec, model factory, procedure, invariants, metric check, tests, pyproject.toml with the
``zoo.specs`` and ``zoo.plugins`` entry points). Templates ship in ``zoo/templates`` (package data)."""
from __future__ import annotations

import re
from pathlib import Path

from registry.errors import ZooError

TEMPLATES = Path(__file__).parent / "templates"
KINDS = ("sampler", "recipe")
NAME_RE = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")


#: The project's own top-level packages: a plugin named like one would shadow it.
OWN_PACKAGES = frozenset({"zoo", "registry", "zoo_specs"})


def package_refusal(pkg: str) -> str | None:
    """Why ``pkg`` cannot be a new plugin's package name (None: it can): a Python keyword (soft keywords
    too), a standard-library module, a package the resolver denies, or one of the project's own."""
    import keyword
    import sys

    from registry.resolve import DENIED_PACKAGES

    if pkg in OWN_PACKAGES:
        return f"{pkg} is the project's own package name"
    if keyword.iskeyword(pkg) or keyword.issoftkeyword(pkg):
        return f"{pkg} is a Python keyword (it cannot be imported)"
    if pkg in sys.stdlib_module_names:
        return f"{pkg} is a standard library module (the plugin would shadow it)"
    if pkg in DENIED_PACKAGES or pkg.lower() in DENIED_PACKAGES:
        return f"{pkg} is a denied package name (a library that loads code or pickles can never be a plugin)"
    return None


def names(name: str) -> dict[str, str]:
    """Placeholders of one scaffold: spec name, Python package, class prefix, title."""
    if not NAME_RE.fullmatch(name):
        raise ZooError(f"zoo new: {name!r} is not a kebab-case name (e.g. my-sampler)")
    pkg = name.replace("-", "_")
    why = package_refusal(pkg)
    if why:
        raise ZooError(f"zoo new: {name!r} cannot be used: its package {why}; choose another name (e.g. my-{name})")
    return {"__NAME__": name, "__PKG__": pkg, "__CLASS__": "".join(p.capitalize() for p in name.split("-")),
            "__TITLE__": name.replace("-", " ").capitalize()}


def _fill(text: str, subs: dict[str, str]) -> str:
    for key, value in subs.items():
        text = text.replace(key, value)
    return text


def scaffold(name: str, template: str = "sampler", dest: str | Path = ".") -> list[Path]:
    """Write the package ``dest/NAME`` from ``common`` + ``template``; returns the files written.
    Refuses to overwrite an existing folder."""
    if template not in KINDS:
        raise ZooError(f"zoo new: --template must be one of {', '.join(KINDS)}, got {template!r}")
    subs = names(name)
    root = Path(dest) / name
    if root.exists():
        raise ZooError(f"zoo new: {root} already exists")
    written = []
    for base in (TEMPLATES / "common", TEMPLATES / template):
        for src in sorted(base.rglob("*.tmpl")):
            rel = _fill(str(src.relative_to(base)), subs)[: -len(".tmpl")]
            out = root / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(_fill(src.read_text(), subs))
            written.append(out)
    return written
