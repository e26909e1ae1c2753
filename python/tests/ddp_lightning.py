"""The Lightning test (`test_distributed.py`): a `Trainer` with 2 CPU
processes (`strategy="ddp"`) trains a linear model for two epochs on a
`CellDataset` built from an open `Dataset`.

    python ddp_lightning.py DATASET OUT_DIR

Lightning starts the second process by running this script again. Each rank
writes the cells of its batches per epoch, and its final weights (which DDP
keeps equal on every rank), to `OUT_DIR/rank<r>.json`."""

import json
import os
import sys

import lightning as L
import torch
from torch.utils.data import DataLoader

import deltacells
from deltacells.torch import CellDataset


class Model(L.LightningModule):
    def __init__(self, data, n_vars, out_dir):
        super().__init__()
        self.data = data
        self.out_dir = out_dir
        self.layer = torch.nn.Linear(n_vars, 1)
        self.seen = {}

    def train_dataloader(self):
        return DataLoader(self.data, batch_size=None, num_workers=0)

    def on_train_epoch_start(self):
        self.data.set_epoch(self.current_epoch)

    def training_step(self, batch, _):
        self.seen.setdefault(self.current_epoch, []).append(batch["cells"].tolist())
        return self.layer(batch["X"]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=1e-4)

    def on_train_end(self):
        result = {"rank": self.global_rank, "world": self.trainer.world_size,
                  "rank_world": list(self.data.rank_world()),
                  "epochs": [self.seen[e] for e in sorted(self.seen)],
                  "weights": self.layer.weight.detach().flatten().tolist()}
        with open(os.path.join(self.out_dir, f"rank{self.global_rank}.json"), "w") as f:
            json.dump(result, f)


def main(path, out_dir):
    ds = deltacells.open(path, threads=1)
    data = CellDataset(ds, batch_size=48, seed=11, output="dense")
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=2,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(Model(data, ds.n_vars, out_dir))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
