"""Pipeline-parallel training with torch.distributed.pipelining: one stage of the model per process.

The model is a stack of blocks cut into WORLD_SIZE stages, stage i on rank i: with 2 machines x 2 GPUs,
stages 0-1 run on the first machine and 2-3 on the second, and activations (forward) and their gradients
(backward) go from rank to rank. The batch is split into micro-batches that flow through the stages one
after another, on one of two schedules (--schedule):

- gpipe: every micro-batch forward, then every micro-batch backward (activations of all kept alive);
- 1f1b:  after a warm-up, each stage alternates one forward and one backward (fewer kept alive).

Both give the same gradients as the unsplit model on the whole batch; the first step checks that on every
stage against the unsplit model, which each rank can build (it is small). Written for torchrun:

    torchrun --nproc_per_node=2 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 \\
        train.py --schedule 1f1b

NCCL on GPUs, gloo on CPU. Each rank saves its own stage to --model-dir (default: $AIP_MODEL_DIR).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


def local_path(uri: str) -> Path:
    """Where gs://BUCKET/path is for the script: Vertex mounts every bucket at /gcs/BUCKET (Cloud Storage
    FUSE), so gs://BUCKET/path is the file path /gcs/BUCKET/path. A plain path stays as it is."""
    return Path(uri.replace("gs://", "/gcs/", 1) if uri.startswith("gs://") else uri)


class Block(nn.Module):
    """One stage's share of the model: a residual MLP block (the last stage also has the output head)."""

    def __init__(self, width: int, head: bool) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))
        self.head = nn.Linear(width, 1) if head else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.mlp(x)
        return self.head(x) if self.head is not None else x


def make_blocks(stages: int, width: int, seed: int) -> list[Block]:
    """Every stage's block, the same on every rank (one seed): rank i keeps block i."""
    torch.manual_seed(seed)
    return [Block(width, head=i == stages - 1) for i in range(stages)]


def make_batch(step: int, size: int, width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    x = torch.randn(size, width, generator=generator)
    return x, (x.sum(dim=1, keepdim=True) > 0).float()


def sha256(module: nn.Module) -> str:
    digest = hashlib.sha256()
    for tensor in module.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def reference_gradients(
    blocks: list[Block], x: torch.Tensor, y: torch.Tensor, stage: int
) -> list[torch.Tensor]:
    """The unsplit model's gradients of `stage`'s parameters on the whole batch (mean loss)."""
    import copy

    model = nn.Sequential(*copy.deepcopy(blocks)).cpu()
    nn.functional.binary_cross_entropy_with_logits(model(x), y).backward()
    return [p.grad.detach().clone() for p in model[stage].parameters()]


def train(args: argparse.Namespace) -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device(f"cuda:{local_rank}")
        dist.init_process_group("nccl")  # env:// rendezvous: torchrun set RANK, WORLD_SIZE, MASTER_*
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if args.batch_size % args.microbatches:
        raise SystemExit(
            f"error: --batch-size {args.batch_size} is not a multiple of --microbatches {args.microbatches}"
        )

    blocks = make_blocks(world_size, args.width, args.seed)
    block = blocks[rank].to(device)
    stage = PipelineStage(block, stage_index=rank, num_stages=world_size, device=device)
    last = rank == world_size - 1

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.binary_cross_entropy_with_logits(output, target)

    # The schedule scales each micro-batch's loss by 1/microbatches: the gradients are the whole batch's.
    schedule = SCHEDULES[args.schedule](stage, n_microbatches=args.microbatches, loss_fn=loss_fn)
    optimizer = torch.optim.SGD(block.parameters(), lr=args.lr)

    max_error = 0.0
    loss = float("nan")
    for step in range(args.steps):
        x, y = make_batch(step, args.batch_size, args.width, args.seed)
        optimizer.zero_grad()
        losses: list[torch.Tensor] = []
        if rank == 0:
            schedule.step(x.to(device))  # feeds the micro-batches in
        elif last:
            schedule.step(target=y.to(device), losses=losses)  # computes the loss of each
        else:
            schedule.step()  # passes activations forward and gradients back
        if step == 0:  # the pipeline's gradients are the unsplit model's
            expected = reference_gradients(blocks, x, y, rank)
            pairs = zip(block.parameters(), expected, strict=True)
            max_error = max(float((p.grad.cpu() - e).abs().max()) for p, e in pairs)
        optimizer.step()
        if last:
            loss = float(torch.stack(losses).mean())
            print(f"Step {step}, loss {loss:.6f}", flush=True)

    # The last stage reports its final loss to everyone, so each rank's line says what the pipeline ended at.
    final = torch.tensor([loss if last else 0.0])
    dist.broadcast(final, src=world_size - 1)

    model_dir = local_path(args.model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    torch.save(block.state_dict(), model_dir / f"stage{rank}.pt")
    print(
        f"rank {rank}/{world_size} (node {os.environ.get('GROUP_RANK', '0')}, local rank {local_rank}/"
        f"{os.environ.get('LOCAL_WORLD_SIZE', '1')}): done, stage {rank} of {world_size}, schedule"
        f" {args.schedule}, {args.microbatches} micro-batches, gradient error {max_error:.2e},"
        f" final loss {float(final):.6f}, stage sha256 {sha256(block)}",
        flush=True,
    )
    dist.barrier()  # every rank gets here before any tears the group down
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedule", choices=sorted(SCHEDULES), default="1f1b")
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    # Vertex sets AIP_MODEL_DIR (under the job's base output directory) on every replica.
    parser.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR", "models"))
    train(parser.parse_args())


if __name__ == "__main__":
    main()
