"""A ported PyTorch program in the style of the "learning PyTorch with examples" tutorials: polynomial
regression written twice, first with raw tensors (`w = torch.zeros(..., requires_grad=True)`, the update
`w -= lr * w.grad; w.grad.zero_()` under torch.no_grad()), then with an nn.Module whose parameters are updated
by hand (`p -= lr * p.grad` and `model.zero_grad()`), under a hand-written warm-up-then-decay learning rate;
also Huber loss via F.smooth_l1_loss and a mean-squared error on the held-out points.

Written once against the module `torch` (PyTorch, or metajit imported as torch)."""
import math

import numpy as np


def make_data(seed=5, count=64):
    rng = np.random.default_rng(seed)
    x = np.linspace(-1.0, 1.0, count).astype(np.float32)
    y = (0.5 - 1.5 * x + 2.0 * x ** 2 - 0.7 * x ** 3 + 0.05 * rng.standard_normal(count)).astype(np.float32)
    return x, y


def build(torch):
    nn = torch.nn

    class Polynomial3(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(torch.zeros(()))
            self.b = nn.Parameter(torch.zeros(()))
            self.c = nn.Parameter(torch.zeros(()))
            self.d = nn.Parameter(torch.zeros(()))

        def forward(self, x):
            return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

        def string(self):
            return (f"y = {self.a.item():.3f} + {self.b.item():.3f} x + {self.c.item():.3f} x^2 + "
                    f"{self.d.item():.3f} x^3")

    class Features(nn.Module):
        """y = w . [x, x^2, x^3] + b, through nn.Linear on stacked powers."""

        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 1)

        def forward(self, x):
            powers = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3], device=x.device))
            return self.linear(powers).flatten(0, 1)

    return {"polynomial": Polynomial3(), "features": Features()}


def learning_rate(step, base=0.05, warmup=4, total=20):
    """Linear warm-up, then cosine decay: the kind of schedule people write by hand."""
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return base * 0.5 * (1.0 + math.cos(math.pi * progress))


def run(torch, modules, data, steps):
    F = torch.nn.functional
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x_all, y_all = torch.from_numpy(data[0]).to(device), torch.from_numpy(data[1]).to(device)
    x, y = x_all[::2], y_all[::2]
    x_test, y_test = x_all[1::2], y_all[1::2]

    # 1. Raw tensors and autograd.
    dtype = torch.float
    w = torch.zeros(4, device=device, dtype=dtype, requires_grad=True)
    raw_losses = []
    for t in range(steps):
        y_pred = w[0] + w[1] * x + w[2] * x ** 2 + w[3] * x ** 3
        loss = (y_pred - y).pow(2).sum()
        raw_losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            w -= 5e-3 * w.grad
            w.grad.zero_()

    # 2. A module with parameters updated by hand under a hand-written schedule.
    model = modules["polynomial"].to(device)
    losses = []
    for t in range(steps):
        lr = learning_rate(t, total=steps)
        y_pred = model(x)
        loss = F.mse_loss(y_pred, y)
        if t % 5 == 4:
            print(f"step {t}: lr {lr:.4f} loss {loss.item():.5f}")
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= lr * param.grad
        losses.append(loss.item())
    print(f"Result: {model.string()}")

    # 3. nn.Linear on features, the update through p.data and p.grad.data.
    features = modules["features"].to(device)
    huber_losses = []
    for t in range(steps):
        loss = F.smooth_l1_loss(features(x), y, beta=0.5)
        features.zero_grad()
        loss.backward()
        for p in features.parameters():
            p.data.sub_(0.2 * p.grad.data)
        huber_losses.append(loss.item())
    with torch.no_grad():
        test_error = torch.mean((model(x_test) - y_test) ** 2).item()
        features_error = F.mse_loss(features(x_test), y_test).item()
    return {"raw_losses": raw_losses, "losses": losses, "huber_losses": huber_losses, "test_error": test_error,
            "features_error": features_error, "w": w.detach().cpu().numpy(),
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
