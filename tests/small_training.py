"""A small ReLU classifier trained the way a user's first model is: full-batch Adam on the
cross-entropy, from a fixed seed (tests that need a real trained model, not random weights)."""

from __future__ import annotations

import torch


def train_classifier(inputs: torch.Tensor, labels: torch.Tensor, hidden: int = 8,
                     steps: int = 150, seed: int = 0) -> torch.nn.Sequential:
    """``Linear(d, hidden) → ReLU → Linear(hidden, 2)`` trained on ``(inputs, labels)`` for
    ``steps`` full-batch Adam steps (learning rate 0.05), in the inputs' dtype; the same
    weights for the same arguments."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(inputs.shape[1], hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 2)).to(inputs.dtype)
    optimiser = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(steps):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(model(inputs), labels).backward()
        optimiser.step()
    return model.eval()
