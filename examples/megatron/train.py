"""Train a small GPT with Megatron-Core: tensor and pipeline parallel sizes from the command line.

Megatron-Core (`pip install megatron-core`) lays the job's processes out in groups: each layer's matrices
split over --tensor-model-parallel-size processes (keep them inside one machine: they talk on every layer),
the layers split over --pipeline-model-parallel-size stages, and what is left of WORLD_SIZE is the
data-parallel size. TP x PP must divide WORLD_SIZE. Written for torchrun (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR/PORT):

    torchrun --nproc_per_node=4 --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 \\
        train.py --tensor-model-parallel-size 4 --pipeline-model-parallel-size 2

GPUs only: Megatron-Core's training schedules allocate their tensors on CUDA (device="cuda"), and its
random-number tracker is CUDA's. Without a GPU this script builds the parallel groups and its own part of
the model (that much runs on CPU, over gloo), prints the layout, and stops with an error saying so.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
import torch.distributed as dist

SEQUENCE = 32
VOCAB = 128


def initialize(tp: int, pp: int) -> torch.device:
    from megatron.core import parallel_state

    world_size = int(os.environ["WORLD_SIZE"])
    if world_size % (tp * pp):
        sys.exit(
            f"error: --tensor-model-parallel-size {tp} x --pipeline-model-parallel-size {pp} = {tp * pp}"
            f" does not divide WORLD_SIZE {world_size}"
        )
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")  # env:// rendezvous: torchrun set RANK, WORLD_SIZE, MASTER_*
        device = torch.device(f"cuda:{local_rank}")
    else:
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp)
    return device


def build_model(args: argparse.Namespace) -> torch.nn.Module:
    """This rank's part of the GPT: its tensor-parallel slice of its pipeline stage's layers."""
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=args.layers,
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        tensor_model_parallel_size=args.tensor_model_parallel_size,
        pipeline_model_parallel_size=args.pipeline_model_parallel_size,
        use_cpu_initialization=True,
        pipeline_dtype=torch.float32,
        hidden_dropout=0.0,
        attention_dropout=0.0,
    )
    return GPTModel(
        config=config,
        transformer_layer_spec=get_gpt_layer_local_spec(),
        vocab_size=VOCAB,
        max_sequence_length=SEQUENCE,
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
    )


def layout(model: torch.nn.Module) -> str:
    from megatron.core import parallel_state as ps

    held = sum(p.numel() for p in model.parameters())
    return (
        f"tensor parallel {ps.get_tensor_model_parallel_rank()}/{ps.get_tensor_model_parallel_world_size()},"
        f" pipeline stage {ps.get_pipeline_model_parallel_rank()}/"
        f"{ps.get_pipeline_model_parallel_world_size()}, data parallel {ps.get_data_parallel_rank()}/"
        f"{ps.get_data_parallel_world_size()}, holds {held} parameters"
    )


def batches(micro_batch: int, seed: int, device: torch.device) -> Iterator[dict[str, torch.Tensor]]:
    """Synthetic next-token data: every data-parallel replica draws its own stream."""
    from megatron.core import parallel_state

    generator = torch.Generator().manual_seed(seed + parallel_state.get_data_parallel_rank())
    mask = torch.tril(torch.ones(1, 1, SEQUENCE, SEQUENCE)) < 0.5  # True where attention is masked
    while True:
        tokens = torch.randint(0, VOCAB, (micro_batch, SEQUENCE), generator=generator)
        yield {
            "tokens": tokens.to(device),
            "labels": torch.roll(tokens, -1, dims=1).to(device),
            "position_ids": torch.arange(SEQUENCE).repeat(micro_batch, 1).to(device),
            "attention_mask": mask.to(device),
        }


def forward_step(data: Iterator[dict[str, torch.Tensor]], model: torch.nn.Module) -> tuple[Any, Callable]:
    batch = next(data)
    output = model(batch["tokens"], batch["position_ids"], batch["attention_mask"], labels=batch["labels"])

    def loss_func(per_token: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss = per_token.float().mean()
        return loss, {"lm loss": loss.detach()}

    return output, partial(loss_func)


def train(args: argparse.Namespace) -> None:
    device = initialize(args.tensor_model_parallel_size, args.pipeline_model_parallel_size)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    where = (
        f"rank {rank}/{world_size} (node {os.environ.get('GROUP_RANK', '0')}, local rank"
        f" {os.environ['LOCAL_RANK']}/{os.environ.get('LOCAL_WORLD_SIZE', '1')})"
    )
    model = build_model(args)
    print(f"{where}: {layout(model)}", flush=True)
    if device.type != "cuda":
        dist.barrier()
        dist.destroy_process_group()
        sys.exit(
            "error: Megatron-Core trains on CUDA GPUs only (its pipeline schedules allocate on"
            ' device="cuda"); the parallel groups and the model above were built, training needs GPUs'
        )

    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.distributed.finalize_model_grads import finalize_model_grads
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    model_parallel_cuda_manual_seed(args.seed)
    model.to(device)
    ddp_config = DistributedDataParallelConfig(overlap_grad_reduce=False, use_distributed_optimizer=False)
    model = DistributedDataParallel(config=model.config, ddp_config=ddp_config, module=model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    data = batches(args.micro_batch_size, args.seed, device)
    forward_backward = get_forward_backward_func()
    for step in range(args.steps):
        optimizer.zero_grad()
        model.zero_grad_buffer()
        losses = forward_backward(
            forward_step_func=forward_step,
            data_iterator=data,
            model=model,
            num_microbatches=args.microbatches,
            seq_length=SEQUENCE,
            micro_batch_size=args.micro_batch_size,
            forward_only=False,
        )
        finalize_model_grads([model])  # all-reduce over data parallel (and shared layers over TP)
        optimizer.step()
        if parallel_state.is_pipeline_last_stage() and parallel_state.get_tensor_model_parallel_rank() == 0:
            mean = sum(float(item["lm loss"]) for item in losses) / max(len(losses), 1)
            print(f"{where}: step {step}, lm loss {mean:.4f}", flush=True)
    print(f"{where}: done, {layout(model.module)}", flush=True)
    dist.barrier()  # every rank gets here before any tears the group down
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Megatron-LM's own flag names, so a Megatron-LM command line reads the same.
    parser.add_argument("--tensor-model-parallel-size", type=int, default=1)
    parser.add_argument("--pipeline-model-parallel-size", type=int, default=1)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    train(parser.parse_args())


if __name__ == "__main__":
    main()
