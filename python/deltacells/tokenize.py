"""Tokenizers for single-cell foundation models, fused into decode.

    import deltacells
    from deltacells.tokenize import Geneformer, ScGPT
    ds = deltacells.open("pbmc_dc")
    tok = Geneformer("tokens.tsv", "medians.tsv", special_tokens=True)
    batch = ds.read(range(256), tokenizer=tok)   # {"input_ids", "attention_mask"}
    batch = ds.read(range(256), tokenizer=ScGPT({"<pad>": 0, "<cls>": 1, "CD3E": 2}))
    # {"input_ids", "values", "attention_mask"}, each [cells, max_len]

`tokens` and `medians` are mappings, or two-column files (TSV or CSV:
gene key, value; a header line is allowed), keyed by the dataset's gene key:
its var names, or the `var` column `gene_key`. `medians` may also be a
`gene_stats.parquet` (what `deltacells stats` and `deltacells.gene_stats`
write): its `norm_median` column, genes without one (never expressed) left
out. `<pad>`, `<cls>` and `<eos>`
are entries of `tokens`. A key that two of the dataset's tokenized genes
share (gene symbols before `var_names_make_unique`) is an error: both would
take its token. Match such genes by a `var` column of unique keys
(`gene_key="gene_ids"`). The exact semantics (formulas, the order of
floating-point operations, how ties and sampling go) are those of the
library's `deltacells::tokenize` module, documented there.
"""

import operator
import os
from typing import Any, Callable, Mapping, Optional, Union

from . import _deltacells
from ._settings import positive, unsigned
from .errors import InputError

__all__ = ["Geneformer", "ScGPT", "Tokenizer"]

_Map = Union[Mapping[str, Any], str, "os.PathLike[str]"]


def _mapping(m: _Map, what: str, value: Callable[[Any], Any], kind: str) -> Any:
    """A path as text, or the mapping as a dict of gene keys (strings) to
    `value(v)` (what the extension takes); a key, or a value that is not
    `kind`, raises an `InputError` naming the gene."""
    if isinstance(m, (str, os.PathLike)):
        return os.fspath(m)
    out = {}
    for k, v in dict(m).items():
        if not isinstance(k, str):
            raise InputError(f"{what}: gene keys are strings, not {k!r}")
        try:
            out[k] = value(v)
        except (TypeError, ValueError) as e:
            raise InputError(f"{what} of gene {k!r}: {v!r} is not {kind}") from e
    return out


def _token(v: Any) -> int:
    """A token id: an int (numpy's too), never a float."""
    return operator.index(v)


def _median(v: Any) -> float:
    """A median: a number, never text (which `float` would parse)."""
    if isinstance(v, (str, bytes)):
        raise TypeError(v)
    return float(v)


class Tokenizer:
    """What `Dataset.read(..., tokenizer=)` takes: one of the classes below.
    Tokenizers pickle (as their settings), so a `CellDataset` holding one
    goes to spawned DataLoader workers."""

    _t: _deltacells.Tokenizer
    _args: tuple

    def _make(self, *args: Any) -> None:
        raise NotImplementedError

    def __getstate__(self) -> dict:
        return {"args": self._args}

    def __setstate__(self, state: dict) -> None:
        self._make(*state["args"])

    @property
    def max_len(self) -> int:
        """Tokens per row."""
        return self._t.max_len


class Geneformer(Tokenizer):
    """Geneformer's rank-value tokens: each cell's genes that have a token
    and a median, by decreasing `((count / n_counts) * 10_000) / median`
    (float64, in that order; `n_counts` the cell's total over all its
    genes), ties by increasing token id; the first `max_len` of them, or with
    `special_tokens` `<cls>`, the first `max_len - 2`, then `<eos>`; then
    `<pad>`. Rows have `input_ids` and `attention_mask`."""

    def __init__(self, tokens: _Map, medians: _Map, max_len: int = 2048,
                 special_tokens: bool = False, gene_key: Optional[str] = None) -> None:
        self._make(_mapping(tokens, "tokens", _token, "an integer token id"),
                   _mapping(medians, "medians", _median, "a number"),
                   unsigned("max_len", max_len), bool(special_tokens), gene_key)

    def _make(self, *args: Any) -> None:
        self._t = _deltacells.Tokenizer.geneformer(*args)
        self._args = args


class ScGPT(Tokenizer):
    """scGPT's binned values: `<cls>` (value 0), then each cell's nonzero
    genes in `tokens` (column order), valued by their bin
    `np.digitize(x, np.quantile(x, np.linspace(0, 1, n_bins - 1)))` over the
    cell's values `x` (counts, or `count / n_counts * normalize` when
    `normalize` is a target sum, then `log1p` when asked); then `<pad>`
    (value -2). A cell with more than `max_len - 1` such genes keeps
    `max_len - 1` of them drawn without replacement, deterministically in
    `(seed, epoch, cell)`, in column order, binned over all of them
    (`seed` and `epoch` are the read's; batches draw by their own, so that
    each epoch draws anew). `n_bins` is 2 to 65,536."""

    def __init__(self, tokens: _Map, n_bins: int = 51, max_len: int = 1200, log1p: bool = False,
                 normalize: Optional[float] = None, gene_key: Optional[str] = None,
                 seed: int = 0, epoch: int = 0) -> None:
        self._make(_mapping(tokens, "tokens", _token, "an integer token id"), unsigned("n_bins", n_bins),
                   unsigned("max_len", max_len), bool(log1p),
                   None if normalize is None else positive("normalize", normalize), gene_key,
                   unsigned("seed", seed), unsigned("epoch", epoch))

    def _make(self, *args: Any) -> None:
        self._t = _deltacells.Tokenizer.scgpt(*args)
        self._args = args
