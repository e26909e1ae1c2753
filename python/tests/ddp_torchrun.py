"""One rank of the torchrun test (`test_distributed.py`), started by
`torchrun --nproc-per-node 2 ddp_torchrun.py DATASET OUT_DIR WORKERS`.

Each rank iterates two epochs of a `CellDataset` whose rank and world come
from the process group, checks every batch's rows against a plain read, and
writes what it saw to `OUT_DIR/rank<r>.json`."""

import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

import deltacells
from deltacells.torch import CellDataset


def main(path, out_dir, workers):
    dist.init_process_group("gloo")  # rank, world and address from torchrun's environment
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        ds = CellDataset(path, batch_size=48, seed=11, obs_columns=["cell_type"])
        dense = deltacells.open(path).read(slice(None), format="numpy")
        epochs = []
        for epoch in range(2):
            ds.set_epoch(epoch)
            loader = DataLoader(ds, batch_size=None, num_workers=workers,
                                multiprocessing_context="spawn" if workers else None)
            batches = []
            for b in loader:
                cells = b["cells"].numpy()
                assert np.array_equal(b["X"].to_dense().numpy(), dense[cells])
                assert len(b["cell_type"]) == len(cells)
                batches.append(cells.tolist())
            epochs.append(batches)
        # The ranks agree on the batch count: the most any rank saw.
        most = torch.tensor([len(epochs[0])])
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        result = {"rank": rank, "world": world, "len": len(ds), "most": int(most),
                  "epochs": epochs}
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(result, f)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
