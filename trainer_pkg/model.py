"""The churn classifier: standardise the features, then an MLP that outputs one logit."""

from __future__ import annotations

from typing import Any

import torch
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
