"""Offline text corpora that ship inside pip packages (no network).

The default corpus is gensim's ``lee_background.cor``: 300 ABC-news documents (Lee, Pincombe &
Welsh 2005), shipped in ``gensim/test/test_data/``. gensim is located with ``importlib`` and
never imported (its import is slow and not needed to read a text file).
"""
from __future__ import annotations

import importlib.util
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["gensim_test_data", "lee_background", "mini_newsgroup", "passages", "split_sentences"]


def gensim_test_data(name: str) -> Path:
    """Path of a file in gensim's bundled test data (raises a clear error if gensim is missing)."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the offline text corpus ships with the 'gensim' package: pip install gensim==4.4.0"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "test" / "test_data" / name
    if not path.exists():
        raise FileNotFoundError(f"{path} not found in the installed gensim")
    return path


@lru_cache(maxsize=4)
def _read_lines(name: str) -> tuple[str, ...]:
    text = gensim_test_data(name).read_text(encoding="latin-1")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def lee_background(n_docs: int | None = None) -> list[str]:
    """The 300 documents of ``lee_background.cor`` (first ``n_docs`` if given), in file order."""
    docs = list(_read_lines("lee_background.cor"))
    return docs if n_docs is None else docs[:n_docs]


_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def split_sentences(text: str) -> list[str]:
    """A simple regex sentence splitter (punctuation followed by space and a capital)."""
    return [s.strip() for s in _SENT.split(text) if s.strip()]


def passages(docs: list[str], sentences_per_passage: int = 2, min_words: int = 8) -> list[str]:
    """Split documents into consecutive passages of ``sentences_per_passage`` sentences
    (the SAE-TM CPU recipe trains its SAE on short passages, one embedding each)."""
    out: list[str] = []
    for doc in docs:
        sents = split_sentences(doc)
        for i in range(0, len(sents), sentences_per_passage):
            p = " ".join(sents[i : i + sentences_per_passage])
            if len(p.split()) >= min_words:
                out.append(p)
    return out


def mini_newsgroup(strip_headers: bool = True) -> tuple[list[str], list[int], list[str]]:
    """gensim's ``mini_newsgroup`` test file: 200 raw 20-Newsgroups posts (alt.atheism / sci.space,
    100 each) as ``(texts, labels, target_names)``.

    The file is a zlib-compressed pickle of an old scikit-learn ``Bunch``; it is read with a
    restricted unpickler that only admits the handful of builtins / numpy reconstructors the file
    needs (the Bunch becomes a dict), so no other code can run."""
    import io
    import pickle
    import zlib

    allowed = {
        ("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor"),
        ("__builtin__", "dict"), ("builtins", "dict"), ("__builtin__", "object"), ("builtins", "object"),
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"),
    }

    class _Restricted(pickle.Unpickler):
        def find_class(self, module: str, name: str):  # type: ignore[override]
            if name == "Bunch" and module.startswith("sklearn."):
                return dict
            if (module, name) in allowed:
                if module == "numpy.core.multiarray":
                    module = "numpy._core.multiarray" if importlib.util.find_spec("numpy._core") else module
                return super().find_class(module, name)
            raise pickle.UnpicklingError(f"mini_newsgroup: refusing to load {module}.{name}")

    raw = zlib.decompress(gensim_test_data("mini_newsgroup").read_bytes())
    bunch = _Restricted(io.BytesIO(raw), encoding="latin-1").load()
    texts = [t.decode("latin-1") if isinstance(t, bytes) else str(t) for t in bunch["data"]]
    if strip_headers:  # the headers name the newsgroup: drop everything before the first blank line
        texts = [t.split("\n\n", 1)[1] if "\n\n" in t else t for t in texts]
    labels = [int(v) for v in bunch["target"]]
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in bunch["target_names"]]
    return texts, labels, names
