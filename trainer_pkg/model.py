"""The churn classifier: standardise the features, then an MLP that outputs one logit."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class ChurnMLP(nn.Module):
    """Feature scaling lives in buffers, so `model.pt` alone is enough to score raw rows."""

    feature_mean: torch.Tensor
    feature_std: torch.Tensor

    def __init__(self, in_features: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.in_features = in_features
        self.hidden = tuple(hidden)
        self.register_buffer("feature_mean", torch.zeros(in_features))
        self.register_buffer("feature_std", torch.ones(in_features))
        layers: list[nn.Module] = []
        width = in_features
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        layers.append(nn.Linear(width, 1))
        self.layers = nn.Sequential(*layers)

    def set_scaling(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        with torch.no_grad():
            self.feature_mean.copy_(mean)
            self.feature_std.copy_(std.clamp_min(1e-6))

    def scale(self, features: torch.Tensor) -> torch.Tensor:
        """Standardised features (what `layers` takes); elementwise: all rows at once equal batch by batch."""
        return (features - self.feature_mean) / self.feature_std

    def logits_of_scaled(self, scaled: torch.Tensor) -> torch.Tensor:
        return self.layers(scaled).squeeze(-1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.logits_of_scaled(self.scale(features))

    def linears(self) -> list[nn.Linear]:
        return [layer for layer in self.layers if isinstance(layer, nn.Linear)]

    def signature(self) -> dict[str, Any]:
        """What a checkpoint must match to be loaded into this model."""
        return {
            "kind": type(self).__name__,
            "in_features": self.in_features,
            "hidden": list(self.hidden),
            "shapes": {name: list(t.shape) for name, t in self.state_dict().items()},
        }


def build_model(in_features: int, hidden: tuple[int, ...], seed: int) -> ChurnMLP:
    # Same seed on every rank; DDP also broadcasts rank 0's weights, so this only fixes run-to-run equality.
    torch.manual_seed(seed)
    return ChurnMLP(in_features, hidden)


def loss_and_gradients(
    linears: list[nn.Linear],
    scaled: torch.Tensor,
    labels: torch.Tensor,
    scale: torch.Tensor,
    grads: list[tuple[torch.Tensor, torch.Tensor]],
) -> torch.Tensor:
    """The summed BCE-with-logits loss of `scaled` and, written into `grads` (weight, bias per Linear), its
    gradient times `scale`, for the Linear-ReLU-...-Linear stack: backpropagation written out.

    The same operations autograd runs for this stack (addmm forward; sigmoid(z) - y, the matrix products,
    the bias sums and ReLU's mask backward), without its graph: for this model autograd's bookkeeping per node
    cost as much as the arithmetic. tests/trainer/test_strategies.py checks it against autograd, bit for bit.
    """
    with torch.no_grad():
        inputs = [scaled]
        x = scaled
        for layer in linears[:-1]:
            x = torch.addmm(layer.bias, x, layer.weight.t()).relu_()
            inputs.append(x)
        last = linears[-1]
        logits = torch.addmm(last.bias, x, last.weight.t()).squeeze(-1)
        loss = F.binary_cross_entropy_with_logits(logits, labels, reduction="sum")
        upstream = (torch.sigmoid(logits) - labels).mul_(scale).unsqueeze(-1)
        for index in range(len(linears) - 1, -1, -1):
            weight_grad, bias_grad = grads[index]
            torch.mm(upstream.t(), inputs[index], out=weight_grad)
            torch.sum(upstream, 0, out=bias_grad)
            if index:
                upstream = torch.mm(upstream, linears[index].weight).masked_fill_(inputs[index] <= 0, 0.0)
        return loss
