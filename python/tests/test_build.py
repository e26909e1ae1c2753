"""deltacells.build: many anndata-written h5ad inputs into one dataset, on a
local process pool and on a real Dask cluster (worker processes on
127.0.0.1), compared with `anndata.concat` and, byte for byte, with the CLI's
`deltacells convert IN... OUT`; and the faults a cluster build must survive.

The S3 tests (marker `s3`) need the server that `.ci/s3` starts, which runs
them with `pytest -m s3`; a plain `pytest` deselects them."""

import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid

import anndata as ad
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import deltacells
from conftest import differently_named

REPO = pathlib.Path(__file__).resolve().parents[2]


# --- inputs ---------------------------------------------------------------

def gene_ids(ids):
    return [f"ENSG{g:05d}" for g in ids]


def counts(n_obs, n_vars, rng, dtype, density=0.05):
    m = sp.random(n_obs, n_vars, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.geometric(0.25, size=k))
    return m.astype(dtype)


def anndata_input(path, X, ids, symbols, obs):
    """An h5ad written by anndata: genes keyed by `gene_ids` in var, named by `symbols`."""
    var = pd.DataFrame({"gene_ids": gene_ids(ids)}, index=pd.Index(symbols))
    obs.index = [f"{path.stem}-{i}" for i in range(X.shape[0])]
    adata = ad.AnnData(X=X, obs=obs, var=var)
    adata.write_h5ad(path)
    return adata


def category(values, categories):
    return pd.Categorical(values, categories=categories)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Three h5ad inputs: different gene subsets in different orders (the
    var index disagrees on names, the `gene_ids` column agrees), different
    obs columns and category vocabularies, CSR and CSC, int and float."""
    d = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(7)
    ids_a = rng.permutation(120)
    ids_b = np.arange(200, 60, -1)
    ids_c = np.arange(0, 200, 3)
    a = anndata_input(d / "plate_a.h5ad", counts(700, len(ids_a), rng, np.float32), ids_a,
                      [f"GENE{g}" for g in ids_a], pd.DataFrame({
                          "cell_type": category(rng.choice(["T", "B"], 700), ["T", "B", "NK"]),
                          "phase": category(rng.choice(["G1", "S", "G2M"], 700), ["G1", "S", "G2M"]),
                          "n_counts": rng.integers(0, 5000, 700),
                          "batch": rng.choice(["x", "y"], 700).astype(object),
                      }))
    b = anndata_input(d / "plate_b.h5ad",
                      sp.csc_matrix(counts(500, len(ids_b), rng, np.int32)), ids_b,
                      [f"gene{g}" for g in ids_b], pd.DataFrame({
                          "cell_type": category(rng.choice(["B", "Mono", "T"], 500), ["B", "Mono", "T"]),
                          "donor": category(rng.choice(["d1", "d2"], 500), ["d2", "d1"]),
                          "score": rng.random(500),
                      }))
    c = anndata_input(d / "plate_c.h5ad", counts(300, len(ids_c), rng, np.int64), ids_c,
                      [f"GENE{g}" for g in ids_c], pd.DataFrame({
                          "cell_type": category(rng.choice(["NK", "T"], 300), ["NK", "T", "B"]),
                          "phase": category(rng.choice(["S", "G1"], 300), ["G2M", "G1", "S"]),
                          "n_counts": rng.integers(0, 5000, 300),
                      }))
    paths = [str(d / f"plate_{x}.h5ad") for x in "abc"]
    return paths, [a, b, c]


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """Two larger inputs (CSR float, CSC int) of many small write tasks, so
    that faults strike while tasks run."""
    d = tmp_path_factory.mktemp("large")
    rng = np.random.default_rng(11)
    ids_a, ids_b = np.arange(0, 1500), np.arange(2000, 500, -1)
    anndata_input(d / "large_a.h5ad", counts(12000, len(ids_a), rng, np.float32), ids_a,
                  [f"GENE{g}" for g in ids_a],
                  pd.DataFrame({"cell_type": category(rng.choice(["T", "B"], 12000), ["T", "B"])}))
    anndata_input(d / "large_b.h5ad", sp.csc_matrix(counts(8000, len(ids_b), rng, np.int32)),
                  ids_b, [f"GENE{g}" for g in ids_b],
                  pd.DataFrame({"cell_type": category(rng.choice(["B", "NK"], 8000), ["B", "NK"])}))
    return [str(d / "large_a.h5ad"), str(d / "large_b.h5ad")]


SMALL_OPTIONS = {"gene_key": "gene_ids", "tile_size": 128, "tiles_per_task": 2, "level": 3}
LARGE_OPTIONS = {"gene_key": "gene_ids", "tile_size": 256, "tiles_per_task": 1, "level": 9}


# --- the CLI and the outputs ----------------------------------------------

def cli_binary():
    """The command-line tool, built with the `hdf5` feature (`.ci/python`
    builds it and names it in DELTACELLS_CLI)."""
    path = pathlib.Path(os.environ.get("DELTACELLS_CLI", REPO / "target" / "debug" / "deltacells"))
    if not path.is_file():
        pytest.fail(f"no deltacells CLI at {path}: "
                    "cargo build -p deltacells-cli --features hdf5, or set DELTACELLS_CLI")
    return path


def cli_convert(inputs, out, options):
    args = [str(cli_binary()), "convert", "-q"]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    subprocess.run(args + list(inputs) + [str(out)], check=True, stdout=subprocess.DEVNULL)


def files(root):
    """Every object of the directory store at `root`, by key: its files but
    the hidden ones (the temporaries a killed writer leaves are no objects)."""
    root = pathlib.Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def assert_same_bytes(got, want):
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], key


@pytest.fixture(scope="module")
def large_reference(large, tmp_path_factory):
    out = tmp_path_factory.mktemp("large_cli") / "ds"
    cli_convert(large, out, LARGE_OPTIONS)
    return files(out)


@pytest.fixture(scope="module")
def client():
    """A real Dask cluster: two worker processes of one thread on 127.0.0.1."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as c:
        yield c


# --- what the dataset holds -----------------------------------------------

def cells(series):
    """A column's values, missing ones as None."""
    return [None if pd.isna(v) else v for v in series.astype(object)]


def assert_equals_concat(ds, adatas, stems, key="gene_ids"):
    keyed = []
    for a in adatas:
        a = a.copy()
        a.var_names = a.var[key].astype(str).values
        a.X = sp.csr_matrix(a.X, dtype=np.float64)
        keyed.append(a)
    want = ad.concat(keyed, join="outer", label="dataset_id", keys=stems)
    got = ds.to_anndata()
    keys = list(got.var[key]) if key in got.var.columns else list(got.var_names)
    assert sorted(keys) == sorted(want.var_names)
    want = want[:, keys]
    assert got.shape == want.shape
    assert list(got.obs_names) == list(want.obs_names)
    diff = sp.csr_matrix(got.X, dtype=np.float64) - sp.csr_matrix(want.X, dtype=np.float64)
    assert diff.count_nonzero() == 0
    assert sorted(got.obs.columns) == sorted(want.obs.columns)
    for name in want.obs.columns:
        expected, actual = want.obs[name], got.obs[name]
        if isinstance(expected.dtype, pd.CategoricalDtype):
            assert isinstance(actual.dtype, pd.CategoricalDtype), name
            assert list(actual.cat.categories) == list(expected.cat.categories), name
        assert cells(actual) == cells(expected), name


# --- builds ---------------------------------------------------------------

def test_a_build_of_h5ad_inputs_equals_anndata_concat_outer_joined_by_the_gene_key(inputs, tmp_path):
    paths, adatas = inputs
    summary = deltacells.build(paths, tmp_path / "ds", workers=2, **SMALL_OPTIONS)
    ds = deltacells.open(tmp_path / "ds")
    assert (summary.n_obs, summary.n_vars) == (1500, 201)
    assert summary.n_tiles == ds.n_tiles and summary.reused == 0
    assert summary.tasks == -(-summary.n_tiles // SMALL_OPTIONS["tiles_per_task"])
    assert_equals_concat(ds, adatas, ["plate_a", "plate_b", "plate_c"])
    assert ds.verify()["cells"] == 1500


def test_var_columns_keep_their_dtypes_through_a_build_of_h5ad_inputs(tmp_path):
    """Per-gene columns anndata wrote (flags, statistics, ordered levels)
    come back typed: each gene's values from the first input that has the
    gene and the column, a column some inputs lack missing elsewhere (a
    nullable dtype), float32 and float64 statistics as float64."""
    rng = np.random.default_rng(31)
    levels = ["low", "mid", "high"]

    def write(path, ids, var):
        var.insert(0, "gene_ids", gene_ids(ids))
        var.index = pd.Index([f"sym{g}" for g in ids], name="symbol")
        X = counts(40, len(ids), rng, np.int32)
        obs = pd.DataFrame(index=[f"{path.stem}-{i}" for i in range(40)])
        ad.AnnData(X=X, obs=obs, var=var).write_h5ad(path)
        return var

    ids_a, ids_b = np.arange(0, 10), np.arange(5, 15)
    a = write(tmp_path / "a.h5ad", ids_a, pd.DataFrame({
        "highly_variable": rng.random(10) > 0.5,
        "means": rng.random(10),
        "n_cells": rng.integers(0, 40, 10),
        "level": pd.Categorical(rng.choice(levels, 10), categories=levels, ordered=True),
        "note": [f"a{g}" for g in ids_a],
    }))
    b = write(tmp_path / "b.h5ad", ids_b, pd.DataFrame({
        "highly_variable": rng.random(10) > 0.5,
        "means": rng.random(10).astype(np.float32),
        "n_cells": rng.integers(0, 40, 10),
        "level": pd.Categorical(rng.choice(levels, 10), categories=levels, ordered=True),
        "extra": rng.integers(0, 9, 10),
    }))
    deltacells.build([str(tmp_path / "a.h5ad"), str(tmp_path / "b.h5ad")], tmp_path / "ds",
                     workers=1, **SMALL_OPTIONS)
    got = deltacells.open(tmp_path / "ds").var.set_index("gene_ids")
    ids = list(got.index)
    assert sorted(ids) == gene_ids(range(15))

    def first(name, dtype):
        """Each gene's value of column `name` from the first input with both."""
        values = []
        for key in ids:
            for frame in (a, b):
                if name in frame and key in set(frame["gene_ids"]):
                    values.append(frame.set_index("gene_ids")[name][key])
                    break
            else:
                values.append(None)
        return pd.Series(values, index=got.index, name=name).astype(dtype)

    want = pd.DataFrame({
        "highly_variable": first("highly_variable", bool),
        "means": first("means", np.float64),
        "n_cells": first("n_cells", np.int64),
        "level": first("level", pd.CategoricalDtype(levels, ordered=True)),
        "note": first("note", object).where(lambda s: s.notna(), None),
        "extra": first("extra", "Int64"),
    })
    pd.testing.assert_frame_equal(got[list(want.columns)], want, check_names=False)
    # The var index keeps its name, and matches genes by it.
    deltacells.build([str(tmp_path / "a.h5ad")], tmp_path / "by_symbol", workers=1,
                     **{**SMALL_OPTIONS, "gene_key": "symbol"})
    by_symbol = deltacells.open(tmp_path / "by_symbol").var
    assert by_symbol.index.name == "symbol"
    assert sorted(by_symbol.index) == sorted(a.index)
    # Genes are matched by text: a numeric column is no gene key.
    with pytest.raises(deltacells.InputError, match=r"a\.h5ad.*n_cells.*not a text column"):
        deltacells.build([str(tmp_path / "a.h5ad")], tmp_path / "by_number", workers=1,
                         **{**SMALL_OPTIONS, "gene_key": "n_cells"})


def test_genes_are_the_intersection_or_exactly_a_given_list(inputs, tmp_path):
    paths, adatas = inputs
    common = set(adatas[0].var["gene_ids"]).intersection(*(set(a.var["gene_ids"]) for a in adatas))
    deltacells.build(paths, tmp_path / "inter", genes="intersection", workers=2, **SMALL_OPTIONS)
    assert set(deltacells.open(tmp_path / "inter").var["gene_ids"]) == common
    listed = ["ENSG00150", "ENSG00003", "ENSG09999"]
    deltacells.build(paths, tmp_path / "listed", genes=listed, sort_genes=False, workers=2,
                     **SMALL_OPTIONS)
    ds = deltacells.open(tmp_path / "listed")
    # A gene no input has is named by its key.
    assert list(ds.var["gene_ids"])[:2] == listed[:2] and ds.var_names[2] == listed[2]
    X = ds.read(slice(None), format="csr_matrix").toarray()
    assert not X[:, 2].any()
    # ENSG00003 is gene 3: column 3 of plate_a's var order, cells of plates a and c.
    a = adatas[0]
    col = list(a.var["gene_ids"]).index("ENSG00003")
    assert np.array_equal(X[:700, 1], np.asarray(a.X[:, col].todense()).ravel())


def test_a_gene_key_no_input_has_is_refused_naming_the_input_and_leaves_no_manifest(inputs, tmp_path):
    paths, _ = inputs
    with pytest.raises(deltacells.InputError, match=r"plate_a\.h5ad.*no_such_column"):
        deltacells.build(paths, tmp_path / "ds", gene_key="no_such_column", workers=1)
    # Refused before anything was written there: the directory it made is
    # gone again (it had stayed, empty).
    assert not (tmp_path / "ds").exists()
    with pytest.raises(deltacells.InputError, match="genes must be"):
        deltacells.build(paths, tmp_path / "ds", genes="everything", workers=1)
    for name, value in [("tile_size", 0), ("n_chunks", 0), ("tiles_per_task", 0), ("workers", 0),
                        ("retries", -1), ("level", 23), ("level", "19"), ("source_column", ""),
                        ("gene_key", ""), ("client", object())]:
        with pytest.raises(deltacells.InputError, match=name):
            deltacells.build(paths, tmp_path / "zero", **{name: value})
    assert not (tmp_path / "zero").exists()


def test_a_build_into_a_dataset_is_refused(inputs, tmp_path):
    paths, _ = inputs
    deltacells.build(paths[:1], tmp_path / "ds", workers=1)
    with pytest.raises(deltacells.InputError, match="already holds a dataset"):
        deltacells.build(paths, tmp_path / "ds", workers=1)


def test_dask_the_local_pool_and_the_cli_write_the_same_bytes(inputs, client, tmp_path):
    paths, adatas = inputs
    cli_convert(paths, tmp_path / "cli", SMALL_OPTIONS)
    on_dask = deltacells.build(paths, tmp_path / "dask", client=client, **SMALL_OPTIONS)
    local = deltacells.build(paths, tmp_path / "local", workers=2, **SMALL_OPTIONS)
    assert on_dask == local._replace(location=on_dask.location)
    want = files(tmp_path / "cli")
    assert "manifest.json" in want and not any(k.startswith("_build") for k in want)
    assert_same_bytes(files(tmp_path / "dask"), want)
    assert_same_bytes(files(tmp_path / "local"), want)
    # One input: the single-input conversion.
    cli_convert(paths[1:2], tmp_path / "one_cli", {"tile_size": 128})
    deltacells.build(paths[1:2], tmp_path / "one_dask", client=client, tile_size=128)
    assert_same_bytes(files(tmp_path / "one_dask"), files(tmp_path / "one_cli"))


def executing_writes(dask_worker):
    """The build write tasks a worker is running now (run on the worker)."""
    return [str(ts.key) for ts in dask_worker.state.executing
            if str(ts.key).startswith("deltacells-write")]


def test_a_worker_killed_in_the_middle_of_its_task_is_retried_and_the_bytes_are_the_same(
        large, large_reference, client, tmp_path):
    pids = client.run(os.getpid)
    result = {}

    def run():
        try:
            result["summary"] = deltacells.build(large, tmp_path / "ds", client=client,
                                                 **LARGE_OPTIONS)
        except BaseException as e:  # handed to the test's thread
            result["error"] = e

    builder = threading.Thread(target=run)
    builder.start()
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and builder.is_alive() and time.monotonic() < deadline:
        try:
            running = client.run(executing_writes)
        except Exception:  # a worker is (re)starting
            running = {}
        for address, keys in running.items():
            if keys:
                os.kill(pids[address], signal.SIGKILL)
                killed = (address, keys[0])
                break
        time.sleep(0.01)
    builder.join(timeout=600)
    assert killed is not None, "no write task was seen running"
    assert not builder.is_alive()
    assert "error" not in result, result.get("error")
    with pytest.raises(ProcessLookupError):
        os.kill(pids[killed[0]], 0)
    assert_same_bytes(files(tmp_path / "ds"), large_reference)
    client.wait_for_workers(2, timeout=120)


def running_in_group(pgid: int) -> "list[int]":
    """The processes of process group `pgid` that have not exited (a zombie,
    exited but not reaped by a parent that is not waiting, has)."""
    running = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            running.append(int(entry))
    return running


DRIVER = """
import sys, json, deltacells
if __name__ == "__main__":
    inputs, out, options = json.loads(sys.argv[1])
    deltacells.build(inputs, out, workers=2, **options)
"""


def test_a_driver_killed_before_the_commit_leaves_no_manifest_and_a_rerun_reuses_finished_tasks(
        large, large_reference, tmp_path):
    import json

    out = tmp_path / "ds"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    driver = subprocess.Popen([sys.executable, str(script), json.dumps([large, str(out), LARGE_OPTIONS])],
                              start_new_session=True)
    reports = out / "_build" / "tasks"
    try:
        deadline = time.monotonic() + 300
        while not (reports.is_dir() and any(reports.glob("task_*.json"))):
            assert driver.poll() is None, "the build ended before a task reported"
            assert time.monotonic() < deadline, "no task reported"
            time.sleep(0.005)
        # The driver alone, as a job scheduler ends it: its pool's workers
        # follow it (they had waited for tasks forever).
        driver.terminate()
        driver.wait()
        while running_in_group(driver.pid):
            assert time.monotonic() < deadline, "the pool's workers outlived their driver"
            time.sleep(0.05)
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        driver.wait()
    assert not (out / "manifest.json").exists()
    finished = len(list(reports.glob("task_*.json")))
    summary = deltacells.build(large, out, workers=2, **LARGE_OPTIONS)
    assert summary.reused >= max(finished, 1)
    assert summary.reused < summary.tasks
    assert_same_bytes(files(out), large_reference)


# --- S3 (run by .ci/s3) ---------------------------------------------------

def s3_client(endpoint=None):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint or os.environ["AWS_ENDPOINT_URL"])


def s3_bucket():
    bucket = os.environ.get("DELTACELLS_S3_BUCKET")
    if not bucket:
        pytest.fail("DELTACELLS_S3_BUCKET is not set: the S3 tests need the server .ci/s3 starts")
    return bucket


def s3_files(s3, bucket, prefix):
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            out[key[len(prefix) + 1:]] = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return out


@pytest.mark.s3
def test_a_build_on_dask_into_s3_writes_the_cli_bytes(inputs, client, tmp_path):
    paths, _ = inputs
    bucket, prefix = s3_bucket(), f"build-{uuid.uuid4().hex}"
    cli_convert(paths, tmp_path / "cli", SMALL_OPTIONS)
    summary = deltacells.build(paths, f"s3://{bucket}/{prefix}", client=client, **SMALL_OPTIONS)
    assert summary.n_obs == 1500
    assert_same_bytes(s3_files(s3_client(), bucket, prefix), files(tmp_path / "cli"))


class Weed:
    """A SeaweedFS S3 server of the test's own, stopped and restarted on the same ports and data."""

    def __init__(self, root, bucket):
        import socket

        self.root, self.bucket = root, bucket
        # One port per component and one per gRPC service, all held open until
        # every one is chosen so none comes twice. The gRPC ports are named:
        # left out, the server derives each as its HTTP port + 10000 and
        # refuses an HTTP port that equals another component's derived one.
        socks = [socket.socket() for _ in range(10)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        self.ports = [s.getsockname()[1] for s in socks]
        for s in socks:
            s.close()
        self.endpoint = f"http://127.0.0.1:{self.ports[0]}"
        self.process = None

    def start(self):
        weed = os.environ.get("DELTACELLS_WEED")
        if not weed:
            pytest.fail("DELTACELLS_WEED is not set: the S3 tests need .ci/s3")
        components = ["s3", "master", "volume", "filer", "admin"]
        ports = [f"-{c}.port={p}" for c, p in zip(components, self.ports)]
        ports += [f"-{c}.port.grpc={p}" for c, p in zip(components, self.ports[5:])]
        self.process = subprocess.Popen(
            [weed, "mini", f"-dir={self.root}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
             *ports, "-admin.ui=false", "-webdav=false",
             "-s3.port.iceberg=0", "-s3.port.lance=0", f"-bucket={self.bucket}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:
            try:
                s3c = s3_client(self.endpoint)
                s3c.put_object(Bucket=self.bucket, Key=".ready", Body=b"")
                s3c.delete_object(Bucket=self.bucket, Key=".ready")
                return
            except Exception:
                assert time.monotonic() < deadline, "the S3 server did not start"
                time.sleep(0.5)

    def stop(self):
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


@pytest.mark.s3
def test_an_s3_server_stopped_and_restarted_during_a_build_ends_with_the_same_bytes(
        large, large_reference, tmp_path, monkeypatch):
    bucket = "restart"
    weed = Weed(tmp_path / "weed", bucket)
    monkeypatch.setenv("AWS_ENDPOINT_URL", weed.endpoint)
    url = f"s3://{bucket}/ds"
    weed.start()
    try:
        result = {}

        def run():
            try:
                result["summary"] = deltacells.build(large, url, workers=2, **LARGE_OPTIONS)
            except deltacells.DeltacellsError as e:
                result["error"] = e

        builder = threading.Thread(target=run)
        builder.start()
        s3 = s3_client(weed.endpoint)
        deadline = time.monotonic() + 300
        while s3.list_objects_v2(Bucket=bucket, Prefix="ds/_build/tasks/").get("KeyCount", 0) == 0:
            assert builder.is_alive(), f"the build ended before a task reported: {result}"
            assert time.monotonic() < deadline, "no task reported"
            time.sleep(0.01)
        weed.stop()
        time.sleep(2)
        weed.start()
        builder.join(timeout=900)
        assert not builder.is_alive()
        if "error" in result:
            # The build failed while the server was down: a rerun completes it.
            assert "manifest.json" not in s3_files(s3_client(weed.endpoint), bucket, "ds")
            deltacells.build(large, url, workers=2, **LARGE_OPTIONS)
        assert_same_bytes(s3_files(s3_client(weed.endpoint), bucket, "ds"), large_reference)
    finally:
        weed.stop()


def test_inputs_keeping_cell_ids_in_different_columns_keep_their_obs_names(tmp_path):
    """A build of inputs whose cell ids live in different obs columns (an
    h5ad's `cell_id`, a 10x folder's `barcode`, another index name, none)
    names every cell as `anndata.concat` of the inputs does: the cells after
    the first input's had read as "" from its column."""
    paths = differently_named(tmp_path, (6, 5, 4), seed=3)
    adatas = [deltacells.open(p).to_anndata() for p in paths]
    out = tmp_path / "built"
    deltacells.build([str(p) for p in paths], str(out), workers=1, tile_size=4)
    ds = deltacells.open(out)
    want = ad.concat(adatas, label="dataset_id", keys=[p.stem for p in paths])
    assert list(ds.obs_names) == list(want.obs_names)
    assert list(ds.obs.columns) == list(want.obs.columns)
    assert list(ds.read_obs("score", cells=[14, 2, 8]).index) == \
        [want.obs_names[i] for i in [14, 2, 8]]
    assert list(ds.to_anndata().obs_names) == list(want.obs_names)
    # Counts of cells per input that do not add up, or an obs index naming
    # no column: a FormatError (cells had read as "", or "0", "1", ...).
    import json
    import shutil

    manifest = json.loads((out / "manifest.json").read_text())
    for edit in (lambda m: m["metadata"]["sources"][0].update(n_obs=5),
                 lambda m: m["metadata"]["sources"][0].update(n_obs=-1),
                 lambda m: m["metadata"]["sources"][1].update(obs_index="no_such")):
        bad = tmp_path / "edited"
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(out, bad)
        edited = json.loads(json.dumps(manifest))
        edit(edited)
        (bad / "manifest.json").write_text(json.dumps(edited))
        with pytest.raises(deltacells.FormatError, match="obs_index|cell counts"):
            deltacells.open(bad).obs_names
