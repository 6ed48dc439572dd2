"""2-D parallel training: tensor parallel inside a machine, FSDP across machines, on one device mesh.

The mesh is laid over the job's shape, read from torchrun's variables: one row per machine
(WORLD_SIZE / LOCAL_WORLD_SIZE rows, the "dp" dimension) and one column per process of a machine
(LOCAL_WORLD_SIZE columns, the "tp" dimension). Tensor parallelism splits every layer's matrices over
the processes of one machine, which talk on every layer (NVLink inside a machine is fast); FSDP
(`fully_shard`) shards what is left over the machines, which talk once per layer for the gathers and the
reduce-scatter of gradients. With 2 machines x 2 GPUs each process holds a quarter of every weight.

    torchrun --nproc_per_node=2 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 \\
        train.py --steps 4

The first step checks the 2-D model's loss against the same model unsplit on the whole batch. NCCL on
GPUs, gloo on CPU (the mesh on "cpu").
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

try:  # torch >= 2.6
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor
except ImportError:  # torch 2.4 and 2.5 keep them private
    from torch.distributed._composable.fsdp import fully_shard
    from torch.distributed._tensor import DTensor


class FeedForward(nn.Module):
    """A transformer's MLP: up-projection split by columns, down-projection by rows (Megatron's layout:
    one all-reduce per block in forward, one in backward)."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


class Model(nn.Module):
    def __init__(self, width: int, hidden: int, depth: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(FeedForward(width, hidden) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def job_mesh(device_type: str) -> DeviceMesh:
    """("dp", "tp") = (machines, processes per machine), from torchrun's WORLD_SIZE and LOCAL_WORLD_SIZE."""
    world_size = int(os.environ["WORLD_SIZE"])
    per_machine = int(os.environ["LOCAL_WORLD_SIZE"])
    if world_size % per_machine:
        raise SystemExit(
            f"error: WORLD_SIZE {world_size} is not a multiple of LOCAL_WORLD_SIZE {per_machine}"
        )
    return init_device_mesh(
        device_type, (world_size // per_machine, per_machine), mesh_dim_names=("dp", "tp")
    )


def parallelize(model: Model, mesh: DeviceMesh) -> None:
    """Tensor parallel over mesh["tp"] first (each block's two Linears), then FSDP over mesh["dp"]."""
    plan = {"up": ColwiseParallel(), "down": RowwiseParallel()}
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], plan)
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])


def make_batch(step: int, size: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(size, width, generator=generator)
    return x, (x.sum(dim=1, keepdim=True) > 0).float()


def full_sha256(model: nn.Module) -> str:
    """A checksum of the whole model, gathered from every shard (every rank must call it)."""
    digest = hashlib.sha256()
    for param in model.parameters():
        full = param.full_tensor() if isinstance(param, DTensor) else param
        digest.update(full.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def train(args: argparse.Namespace) -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")  # env:// rendezvous: torchrun set RANK, WORLD_SIZE, MASTER_*
        device, mesh = torch.device(f"cuda:{local_rank}"), job_mesh("cuda")
    else:
        dist.init_process_group("gloo")
        device, mesh = torch.device("cpu"), job_mesh("cpu")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    dp_rank, dp_size = mesh["dp"].get_local_rank(), mesh["dp"].size()
    tp_rank, tp_size = mesh["tp"].get_local_rank(), mesh["tp"].size()
    if args.hidden % tp_size:
        raise SystemExit(f"error: --hidden {args.hidden} does not split over {tp_size} tensor-parallel ranks")

    torch.manual_seed(args.seed)  # the same full model everywhere before it is split
    model = Model(args.width, args.hidden, args.depth).to(device)
    reference = copy.deepcopy(model)
    parallelize(model, mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = nn.BCEWithLogitsLoss()

    per_group = args.batch_size // dp_size  # each machine (dp rank) trains on its slice of the batch;
    mine = slice(dp_rank * per_group, (dp_rank + 1) * per_group)  # its tp ranks see the same slice
    loss_error = float("nan")
    for step in range(args.steps):
        x, y = make_batch(step, args.batch_size, args.width, args.seed)
        optimizer.zero_grad()
        loss = criterion(model(x[mine].to(device)), y[mine].to(device))
        loss.backward()
        optimizer.step()
        # The job's loss: the mean over the machines' slices (the tp ranks of a machine agree).
        job_loss = loss.detach().clone()
        dist.all_reduce(job_loss)
        job_loss /= world_size
        if step == 0:
            with torch.no_grad():
                expected = criterion(reference(x.to(device)), y.to(device))
            loss_error = abs(float(job_loss) - float(expected))
        if rank == 0:
            print(f"Step {step}, loss {float(job_loss):.6f}", flush=True)

    held = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in model.parameters())
    total = sum(p.numel() for p in model.parameters())
    shape = {n: tuple(p.to_local().shape) for n, p in model.named_parameters() if n == "blocks.0.up.weight"}
    checksum = full_sha256(model)
    print(
        f"rank {rank}/{world_size} (node {os.environ.get('GROUP_RANK', '0')}, local rank {local_rank}/"
        f"{os.environ.get('LOCAL_WORLD_SIZE', '1')}): done,"
        f" mesh dp {dp_rank}/{dp_size} tp {tp_rank}/{tp_size},"
        f" holds {held} of {total} parameters, blocks.0.up.weight shard {shape['blocks.0.up.weight']},"
        f" first-step loss error {loss_error:.2e}, full parameters sha256 {checksum}",
        flush=True,
    )
    dist.barrier()  # every rank gets here before any tears the group down
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    train(parser.parse_args())


if __name__ == "__main__":
    main()
