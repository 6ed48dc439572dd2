"""How the ranks share the model: `ddp` (every rank holds all of it) or `fsdp` (FSDP2 `fully_shard`).

Both take the same steps on the same global batches and write the same checkpoint: the full model state and
the full optimizer state, so a run resumes bit-for-bit under the strategy it ran with, and either strategy can
resume the other's checkpoint (at any world size, from the same sample).

ddp: the model, its gradients and Adam's state are whole on every rank. The gradients live in one flat buffer
(each parameter's `.grad` is a view into it) that one collective sums after backward; that is what
DistributedDataParallel does with a single bucket, which is all this model fills (a 2.7K-parameter MLP
against DDP's 25 MiB buckets). While the buffer is small the sum is an all-gather and a local sum in rank
order (one exchange; the ring all-reduce takes two rounds). DDP's own per-step bookkeeping (its forward
wrapper, the reducer's autograd hooks, the copies into and out of its bucket) cost more than the model's
forward on CPU, and autograd's graph as much as the arithmetic (profile in docs/trainer.md). So a step is
`model.loss_and_gradients` (this stack's backpropagation written out, the same operations autograd runs)
and one collective.

fsdp: each Linear is its own `fully_shard` unit under the root `layers`: parameters, gradients and Adam's
state are sharded over the ranks; forward all-gathers a unit's parameters, backward reduce-scatters its
gradients (the ZeRO-3 layout). Checkpoints gather the full state through torch.distributed.checkpoint's
state-dict API.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import torch
import torch.distributed as dist
import torch.nn.functional as F

from trainer_pkg.model import ChurnMLP, loss_and_gradients

STRATEGIES = ("ddp", "fsdp")
# Gradients summed by an all-gather up to this many gathered elements (world size x parameters), else by an
# all-reduce: for a small buffer the gather's one exchange beats the ring's two rounds (docs/trainer.md).
GATHER_LIMIT = 1 << 22
# torch 2.13 renamed all_gather_into_tensor (the old name now warns); older torch has the old name only.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def make_optimizer(model: torch.nn.Module, lr: float) -> torch.optim.Optimizer:
    """Adam, fused where torch has a fused kernel for the device (CPU since 2.4): 5x less optimizer time."""
    try:
        return torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(model.parameters(), lr=lr)


class Strategy(Protocol):
    name: str
    model: ChurnMLP
    optimizer: torch.optim.Optimizer

    def loss_scale(self, global_size: int, world_size: int) -> float:
        """What a rank's summed loss is multiplied by so that the synced gradient is the global batch mean."""
        ...

    def step(self, scaled: torch.Tensor, labels: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """One optimizer step on this rank's scaled features; returns the batch's summed loss (detached)."""
        ...

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """The model on raw features (under fsdp every rank calls it at the same time)."""
        ...

    def model_state(self) -> dict[str, Any]:
        """The whole model's state; every rank calls it (a collective under fsdp), rank 0's is complete."""
        ...

    def optimizer_state(self) -> dict[str, Any]:
        """The whole optimizer's state, like `model_state`."""
        ...

    def load(self, model_state: Mapping[str, Any], optimizer_state: Mapping[str, Any]) -> None:
        """Take a checkpoint's whole state (either strategy's optimizer form) on every rank."""
        ...

    def spread(self) -> float | None:
        """Largest parameter difference between ranks where each holds them all (ddp), else None."""
        ...


class Replicated:
    """DDP: the whole model on every rank; one all-reduce of one flat gradient buffer per step."""

    name = "ddp"

    def __init__(self, model: ChurnMLP, lr: float) -> None:
        self.model = model
        params = list(model.parameters())
        # Every rank starts from rank 0's weights, as DistributedDataParallel's constructor makes sure.
        with torch.no_grad():
            flat = torch.nn.utils.parameters_to_vector(params)
            dist.broadcast(flat, src=0)
            torch.nn.utils.vector_to_parameters(flat, params)
        self.grads = torch.zeros_like(flat)
        grads = []
        offset = 0
        for p in params:
            p.grad = view = self.grads[offset : offset + p.numel()].view_as(p)
            grads.append(view)
            offset += p.numel()
        self.linears = model.linears()
        if len(params) != 2 * len(self.linears):
            raise ValueError("the ddp strategy's backward covers Linear layers only")
        self.layer_grads = list(zip(grads[0::2], grads[1::2], strict=True))  # (weight, bias) per Linear
        world = dist.get_world_size()
        # Small gradients (this model's 11 KB): every rank gathers every rank's buffer and sums them in rank
        # order, one exchange instead of the ring all-reduce's two rounds; large ones: all-reduce.
        self.gathered = (
            torch.empty(world * flat.numel(), dtype=flat.dtype, device=flat.device)
            if world * flat.numel() <= GATHER_LIMIT
            else None
        )
        self.optimizer = make_optimizer(model, lr)

    def loss_scale(self, global_size: int, world_size: int) -> float:
        return 1.0 / global_size  # the all-reduce sums

    def step(self, scaled: torch.Tensor, labels: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        # The written-out backward overwrites every gradient (it does not accumulate): no zeroing needed.
        loss = loss_and_gradients(self.linears, scaled, labels, scale, self.layer_grads)
        self._sum_over_ranks()
        self.optimizer.step()
        return loss

    def _sum_over_ranks(self) -> None:
        if self.gathered is None:
            dist.all_reduce(self.grads)
            return
        _all_gather(self.gathered, self.grads)
        torch.sum(self.gathered.view(-1, self.grads.numel()), dim=0, out=self.grads)

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        return self.model(features)

    def model_state(self) -> dict[str, Any]:
        return self.model.state_dict()

    def optimizer_state(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load(self, model_state: Mapping[str, Any], optimizer_state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(model_state)
        self.optimizer.load_state_dict(_indexed_optimizer_state(optimizer_state, self.model))

    def spread(self) -> float:
        """Largest difference of any parameter between ranks: they must stay equal; anything else is a bug."""
        flat = torch.cat([p.detach().reshape(-1) for p in self.model.parameters()])
        high, low = flat.clone(), flat.clone()
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        return float((high - low).max())


class Sharded:
    """FSDP2: each Linear a `fully_shard` unit, `layers` the root; params, grads and Adam state sharded."""

    name = "fsdp"

    def __init__(self, model: ChurnMLP, lr: float) -> None:
        from torch.distributed.fsdp import fully_shard

        self.model = model
        for layer in model.layers:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model.layers)
        self.optimizer = make_optimizer(model, lr)

    def loss_scale(self, global_size: int, world_size: int) -> float:
        return world_size / global_size  # the reduce-scatter averages over the ranks

    def step(self, scaled: torch.Tensor, labels: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        self.optimizer.zero_grad()
        loss = F.binary_cross_entropy_with_logits(
            self.model.logits_of_scaled(scaled), labels, reduction="sum"
        )
        loss.backward(scale)
        self.optimizer.step()
        return loss.detach()

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        return self.model(features)

    def model_state(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(
            self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )

    def optimizer_state(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        whole = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return dict(get_optimizer_state_dict(self.model, self.optimizer, options=whole))

    def load(self, model_state: Mapping[str, Any], optimizer_state: Mapping[str, Any]) -> None:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        whole = StateDictOptions(full_state_dict=True)
        set_model_state_dict(self.model, dict(model_state), options=whole)
        named = _named_optimizer_state(optimizer_state, self.model)
        set_optimizer_state_dict(self.model, self.optimizer, named, options=whole)

    def spread(self) -> None:
        return None  # each rank holds its own shard: there is nothing to compare


def build_strategy(name: str, model: ChurnMLP, lr: float) -> Replicated | Sharded:
    if name == "fsdp":
        return Sharded(model, lr)
    return Replicated(model, lr)


def _parameter_names(model: torch.nn.Module) -> list[str]:
    return [name for name, _ in model.named_parameters()]


def _named_optimizer_state(state: Mapping[str, Any], model: torch.nn.Module) -> dict[str, Any]:
    """An optimizer state keyed by parameter name (torch.distributed.checkpoint's form), from either form."""
    names = _parameter_names(model)
    by_index = dict(enumerate(names))
    return {
        "state": {by_index.get(k, k) if isinstance(k, int) else k: v for k, v in state["state"].items()},
        "param_groups": [
            {**group, "params": [by_index.get(p, p) if isinstance(p, int) else p for p in group["params"]]}
            for group in state["param_groups"]
        ],
    }


def _indexed_optimizer_state(state: Mapping[str, Any], model: torch.nn.Module) -> dict[str, Any]:
    """An optimizer state keyed by parameter index (`Optimizer.state_dict()`'s form), from either form."""
    index = {name: i for i, name in enumerate(_parameter_names(model))}
    return {
        "state": {index.get(k, k) if isinstance(k, str) else k: v for k, v in state["state"].items()},
        "param_groups": [
            {**group, "params": [index.get(p, p) if isinstance(p, str) else p for p in group["params"]]}
            for group in state["param_groups"]
        ],
    }
