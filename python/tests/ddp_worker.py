"""One rank of the real torch.distributed test (started by torch.multiprocessing.spawn)."""

import json
import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from deltacells.torch import CellDataset


def run(rank, world_size, path, port, out_dir):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world_size)
    try:
        ds = CellDataset(path, batch_size=48, seed=11, obs_columns=["cell_type"])
        assert ds.rank_world() == (rank, world_size)
        loader = DataLoader(ds, batch_size=None, num_workers=2,
                            multiprocessing_context="spawn")
        batches = [b["cells"].tolist() for b in loader]
        counts = torch.tensor([len(batches)])
        dist.all_reduce(counts, op=dist.ReduceOp.MAX)
        gathered = [None] * world_size
        dist.all_gather_object(gathered, batches)
        if rank == 0:
            with open(os.path.join(out_dir, "result.json"), "w") as f:
                json.dump({"batches": gathered, "max_count": int(counts)}, f)
    finally:
        dist.destroy_process_group()
