"""Shared fixtures: the golden datasets and small synthetic count matrices."""

import json
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

import deltacells

# python/tests -> repository root -> ../shared/testdata (where CI lays it too).
TESTDATA = pathlib.Path(__file__).resolve().parents[2] / ".." / "shared" / "testdata"
GOLDEN = TESTDATA / "deltacells" / "datasets"


def golden_index():
    return json.loads((GOLDEN / "index.json").read_text())


def counts(n_obs, n_vars, density=0.05, seed=0, dtype=np.float32):
    """A random count matrix with a few large values (above 65535)."""
    rng = np.random.default_rng(seed)
    m = sp.random(n_obs, n_vars, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.geometric(0.3, size=k)).astype(dtype)
    if m.nnz:
        m.data[rng.integers(0, m.nnz, size=max(1, m.nnz // 1000))] = 70_000
    return m


def loader_order(batches, workers):
    """A rank's batches as a loader with `workers` workers delivers them:
    split into contiguous spans (longer spans first), one batch from each
    span in turn."""
    base, extra = divmod(len(batches), workers)
    spans, at = [], 0
    for w in range(workers):
        n = base + (w < extra)
        spans.append(list(batches[at:at + n]))
        at += n
    out = []
    while any(spans):
        for span in spans:
            if span:
                out.append(span.pop(0))
    return out


@pytest.fixture(scope="session")
def small(tmp_path_factory):
    """A written dataset of 1,000 cells x 300 genes with obs and var, and its source."""
    import pandas as pd

    X = counts(1000, 300, seed=1)
    rng = np.random.default_rng(2)
    obs = pd.DataFrame({
        "cell_type": pd.Categorical(rng.choice(["T", "B", "NK"], size=1000)),
        "n_counts": np.asarray(X.sum(axis=1)).ravel().astype(np.int64),
        "score": rng.random(1000),
        "passed": rng.random(1000) > 0.2,
    })
    var = pd.DataFrame({"kind": pd.Categorical(["gene"] * 290 + ["spike"] * 10)},
                       index=pd.Index([f"G{i}" for i in range(300)], name="gene_ids"))
    out = tmp_path_factory.mktemp("small") / "ds"
    deltacells.write(X, out, obs=obs, var=var, tile_size=128, level=3)
    return out, X, obs, var
