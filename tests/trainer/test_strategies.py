"""The ddp strategy's written-out backward against autograd; the optimizer-state forms the strategies read."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from trainer_pkg.model import build_model, loss_and_gradients
from trainer_pkg.strategies import _indexed_optimizer_state, _named_optimizer_state, make_optimizer


@pytest.mark.parametrize(
    ("hidden", "rows"), [((64, 32), 64), ((16,), 11), ((8, 4, 2), 64), ((), 5), ((16, 8), 0)]
)
def test_written_out_backward_is_autograd_bit_for_bit(hidden: tuple[int, ...], rows: int) -> None:
    torch.manual_seed(1)
    model = build_model(8, hidden, seed=7)
    scaled = torch.randn(rows, 8) * 3  # enough negative pre-activations for ReLU's mask to matter
    labels = (torch.rand(rows) < 0.4).float()
    scale = torch.tensor(1 / 128)

    loss = F.binary_cross_entropy_with_logits(model.logits_of_scaled(scaled), labels, reduction="sum")
    loss.backward(scale)
    expected = [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]

    written = [torch.full_like(p, float("nan")) for p in model.parameters()]  # every element must be written
    pairs = list(zip(written[0::2], written[1::2], strict=True))
    ours = loss_and_gradients(model.linears(), scaled, labels, scale, pairs)
    assert torch.equal(ours, loss.detach())
    for name, a, b in zip([n for n, _ in model.named_parameters()], expected, written, strict=True):
        assert torch.equal(a, b), f"{name} differs by {(a - b).abs().max():g}"


def test_optimizer_state_forms_convert_both_ways() -> None:
    model = build_model(8, (4,), seed=0)
    optimizer = make_optimizer(model, 0.01)
    F.binary_cross_entropy_with_logits(model(torch.randn(3, 8)), torch.ones(3)).backward()
    optimizer.step()
    indexed = optimizer.state_dict()
    named = _named_optimizer_state(indexed, model)
    assert list(named["state"]) == ["layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias"]
    assert named["param_groups"][0]["params"] == list(named["state"])
    back = _indexed_optimizer_state(named, model)
    assert list(back["state"]) == [0, 1, 2, 3] and back["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert _named_optimizer_state(named, model) == named  # already named: unchanged
    fresh = make_optimizer(model, 0.01)
    fresh.load_state_dict(back)
    assert torch.equal(fresh.state_dict()["state"][2]["exp_avg"], indexed["state"][2]["exp_avg"])
