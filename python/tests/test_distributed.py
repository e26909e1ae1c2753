"""`CellDataset` in real distributed runs on 127.0.0.1: two processes under
`torchrun` (gloo), and a Lightning `Trainer` with two CPU processes
(`strategy="ddp"`). Each run is a process group of its own, bounded by a
timeout, and every process of it is stopped before the test ends."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from conftest import loader_order  # noqa: E402
from deltacells.torch import CellDataset  # noqa: E402

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 420


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_group(cmd, port):
    """Runs `cmd` in a new session (its own process group) with the process
    group's address on 127.0.0.1; kills the whole group on timeout, and
    whatever of it is left once it returns."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    proc = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{cmd[0]} ran past {TIMEOUT_S} s:\n{out[-4000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, out[-4000:]
    return out


def ranks(out_dir, world):
    results = [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world)]
    assert [r["rank"] for r in results] == list(range(world))
    assert all(r["world"] == world for r in results)
    return results


def single_process(path, epoch, rank=None, world_size=None, **kwargs):
    """The batches' cells of one epoch, iterated in this process."""
    ds = CellDataset(path, batch_size=48, seed=11, rank=rank, world_size=world_size, **kwargs)
    ds.set_epoch(epoch)
    return [b["cells"].tolist() for b in ds]


def check_epochs(path, results, n_obs, **kwargs):
    """Each epoch's ranks hold equal batch counts, disjoint cells that cover
    the epoch exactly once, each rank the batches a single process computes
    for it, and together, in rank order, the single-process epoch."""
    for epoch in range(2):
        per_rank = [r["epochs"][epoch] for r in results]
        assert len({len(b) for b in per_rank}) == 1, [len(b) for b in per_rank]
        every = [c for batches in per_rank for b in batches for c in b]
        assert sorted(every) == list(range(n_obs))
        for rank, batches in enumerate(per_rank):
            assert batches == single_process(path, epoch, rank, len(results), **kwargs)
        assert every == [c for b in single_process(path, epoch, **kwargs) for c in b]
    assert results[0]["epochs"][0] != results[0]["epochs"][1]


@pytest.mark.parametrize("workers", [0, 2])
def test_torchrun_two_gloo_ranks(small, tmp_path, workers):
    path = str(small[0])
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    assert torchrun, "torchrun is installed with torch"
    port = free_port()
    run_group([torchrun, "--nnodes", "1", "--nproc-per-node", "2", "--max-restarts", "0",
               "--master-addr", "127.0.0.1", "--master-port", str(port),
               str(HERE / "ddp_torchrun.py"), path, str(tmp_path), str(workers)], port)
    results = ranks(tmp_path, 2)
    assert all(r["len"] == r["most"] == len(r["epochs"][0]) for r in results)
    if workers:
        # Loader workers deliver a rank's batches in turns; the batches are the same.
        for r in results:
            for epoch in range(2):
                rank_batches = single_process(path, epoch, r["rank"], 2)
                assert r["epochs"][epoch] == loader_order(rank_batches, workers)
                r["epochs"][epoch] = rank_batches
    check_epochs(path, results, 1000)


def test_lightning_trainer_with_two_cpu_processes(small, tmp_path):
    pytest.importorskip("lightning")
    path = str(small[0])
    port = free_port()
    run_group([sys.executable, str(HERE / "ddp_lightning.py"), path, str(tmp_path)], port)
    results = ranks(tmp_path, 2)
    assert [r["rank_world"] for r in results] == [[0, 2], [1, 2]]
    check_epochs(path, results, 1000, output="dense")
    # DDP kept the model the same on both ranks, trained on different cells.
    assert results[0]["weights"] == results[1]["weights"]
