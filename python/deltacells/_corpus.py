"""The `Corpus` class: several datasets with different genes read as one,
with every read, obs and batch method of `Dataset`."""

from __future__ import annotations

import json
import os
from typing import Any, List, Optional, Sequence, Union

from . import _deltacells
from ._dataset import Dataset, engine_options, named_part
from ._tables import var_frame
from .errors import InputError

class Corpus(Dataset):
    """Several deltacells datasets read as one matrix over one gene
    vocabulary, nothing rewritten (the engine's `Corpus`).

    * `locations`: the members (directories or URLs), in cell order: the
      corpus's cells are the first member's, then the second's, ...
    * `genes`: "union" (every gene of any member, in the order first seen),
      "intersection" (the genes every member has, in the first member's
      order) or a list of gene keys (exactly those, in that order; a key no
      member has reads as a column of zeros).
    * `gene_key`: the `var` column whose values match genes across members
      (such as Ensembl ids); default the var names.
    * `source_column`: the categorical obs column naming each cell's member
      by its location's stem.

    Each member's genes are mapped into the vocabulary as its rows decode (a
    gene it lacks reads as zero, a gene outside the vocabulary is dropped),
    and its obs columns into the unified ones (category vocabularies merged
    as `anndata.concat` merges them, missing where a member lacks a column);
    `obs_names` are each member's own, as `anndata.concat` keeps them.
    Everything `Dataset` offers works over the whole corpus: `read`, `obs`,
    `read_obs`, `iter_tiles` (every member's tiles one after another),
    `batches` (a block shuffle mixes every tile of every member, equal
    batches per rank), `to_anndata` and `deltacells.torch.CellDataset`.
    Normalized values (`normalize=`), Geneformer's and scGPT's tokens and
    `deltacells.gene_stats` divide each cell by its total over all of its
    member's genes, as on the member itself, whichever genes the vocabulary
    or a selection keeps. `save(path)` writes a corpus file, which
    `deltacells.open` reads.
    """

    def __init__(self, locations: "Sequence[Union[str, os.PathLike[str]]]", *,
                 genes: "Union[str, Sequence[str]]" = "union", gene_key: Optional[str] = None,
                 source_column: str = "dataset_id", threads: Optional[int] = None,
                 pin: bool = False, cache_bytes: Optional[int] = None):
        if isinstance(locations, (str, os.PathLike)):
            raise InputError("a Corpus takes a list of dataset locations "
                             "(deltacells.open reads a corpus file)")
        if not isinstance(genes, str):
            genes = [str(g) for g in genes]
        self._spec: Optional[tuple] = (
            [os.fspath(loc) for loc in locations], genes, gene_key, source_column)
        self._init(None, engine_options(threads, pin, cache_bytes))

    @classmethod
    def from_file(cls, path: "Union[str, os.PathLike[str]]", *, threads: Optional[int] = None,
                  pin: bool = False, cache_bytes: Optional[int] = None) -> "Corpus":
        """The corpus the corpus file `path` describes (see `save`)."""
        corpus = object.__new__(cls)
        corpus._spec = None
        corpus._init(os.fspath(path), engine_options(threads, pin, cache_bytes))
        return corpus

    def _init(self, file: Optional[str], options: dict) -> None:
        self._location = file
        self._options = options
        self._handle = None
        self._pid = None
        self._loaded = {}
        self._h  # open now: a missing member fails here, not at the first read

    def _open_handle(self) -> Any:
        if self._spec is None:
            return _deltacells.Corpus.open(self._location, **self._options)
        locations, genes, gene_key, source_column = self._spec
        return _deltacells.Corpus(locations, genes, gene_key, source_column, **self._options)

    def __getstate__(self) -> dict:
        # The members as the corpus resolved them: a process opening the
        # state reads the same datasets, whatever its working directory.
        locations, (name, keys), gene_key, source_column = self._h.spec
        spec = (locations, name if keys is None else keys, gene_key, source_column)
        return {**super().__getstate__(), "spec": spec}

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._spec = state["spec"]

    def __repr__(self) -> str:
        return (f"deltacells.Corpus({len(self.members)} datasets, n_obs={self.n_obs}, "
                f"n_vars={self.n_vars})")

    # -- what a corpus is made of ----------------------------------------------

    @property
    def location(self) -> Optional[str]:
        """The corpus file it was opened from, or None."""
        return self._location

    @property
    def locations(self) -> List[str]:
        """The members' locations, in cell order (relative paths of a corpus
        file resolved against its directory)."""
        return list(self._h.spec[0])

    @property
    def genes(self) -> "Union[str, List[str]]":
        """The gene space: "union", "intersection" or the list of keys."""
        name, keys = self._h.spec[1]
        return name if keys is None else list(keys)

    @property
    def gene_key(self) -> Optional[str]:
        """The var column that matches genes across members (None: var names)."""
        return self._h.spec[2]

    @property
    def source_column(self) -> str:
        """The obs column naming each cell's member."""
        return self._h.spec[3]

    @property
    def members(self) -> List[dict]:
        """Each member's `name` (its value in the source column),
        `location`, `n_obs` and `n_vars`, in cell order."""
        return [{"name": name, "location": location, "n_obs": n_obs, "n_vars": n_vars}
                for name, location, n_obs, n_vars in self._h.members]

    @property
    def _parts(self) -> "list[tuple[int, Optional[str], bool]]":
        """Each member's cells, with the column of their ids as the member
        read alone takes it (see `Dataset._parts`)."""
        return self._once("parts", lambda: [
            named_part(m["n_obs"], json.loads(meta), [(n, k, None) for n, k in columns])
            for m, (meta, columns) in zip(self.members, self._h.member_obs)])

    @property
    def gene_order(self) -> None:
        """None: the columns are the vocabulary's, in its order."""
        return None

    @property
    def var(self) -> Any:
        """An empty frame indexed by `var_names` (the vocabulary's gene keys),
        as `anndata.concat` leaves `var` of datasets with different genes."""
        return self._once("var", lambda: var_frame(None, self.var_names))

    def save(self, path: "Union[str, os.PathLike[str]]") -> None:
        """Writes the corpus file `path` (a small JSON document; members below
        or beside its directory are written relative to it), which
        `deltacells.open` and the command line's `info`, `cat` and `bench`
        read. Adding a dataset to a corpus is converting it alone and saving a
        corpus that lists it too."""
        self._h.save(os.fspath(path))


def open_location(location: "Union[str, os.PathLike[str]]", **options: Any) -> Dataset:
    """The dataset at `location`, or the corpus when it is a corpus file (a
    dataset is a directory or a URL)."""
    if os.path.isfile(location):
        return Corpus.from_file(location, **options)
    return Dataset(location, **options)


__all__: Sequence[str] = ["Corpus"]
