"""A ported PyTorch program: an MLP classifier on synthetic Gaussian blobs (TensorDataset + DataLoader, Adam,
StepLR, train/eval modes, accuracy with `_, predicted = output.max(1)`, a state_dict saved and loaded back).

Written once against the module `torch`: run(torch, ...) gets either PyTorch or metajit (`import metajit as
torch`) and uses only the names a PyTorch program would."""
import io

import numpy as np

CLASSES, FEATURES = 4, 10


def make_data(seed=0, count=256):
    """Four Gaussian blobs in 10 dimensions (numpy, so both frameworks get the same numbers)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 2.0, size=(CLASSES, FEATURES))
    labels = rng.integers(0, CLASSES, size=count)
    features = centres[labels] + rng.normal(0, 1.0, size=(count, FEATURES))
    return features.astype(np.float32), labels.astype(np.int64)


def build(torch):
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self, features, hidden, classes):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(features, hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, classes),
            )

        def forward(self, x):
            return self.net(x)

    return {"model": Classifier(FEATURES, 32, CLASSES)}


def run(torch, modules, data, steps):
    """Trains for `steps` batches; returns the per-step losses, the evaluation results and the final weights."""
    nn = torch.nn
    from_numpy = torch.from_numpy
    TensorDataset, DataLoader = torch.utils.data.TensorDataset, torch.utils.data.DataLoader

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    features, labels = data
    train_set = TensorDataset(from_numpy(features[:192]), from_numpy(labels[:192]))
    test_set = TensorDataset(from_numpy(features[192:]), from_numpy(labels[192:]))
    train_loader = DataLoader(train_set, batch_size=32, shuffle=False)
    test_loader = DataLoader(test_set, batch_size=32)

    model = modules["model"].to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)

    losses = []
    step = 0
    for epoch in range(100):
        model.train()
        running_loss = 0.0
        for inputs, targets in train_loader:
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            running_loss += loss.item() * inputs.size(0)
            losses.append(loss.item())
            step += 1
            if step == steps:
                break
        scheduler.step()
        print(f"epoch {epoch}: loss {running_loss / len(train_set):.4f}, lr {scheduler.get_last_lr()[0]:.5f}")
        if step == steps:
            break

    model.eval()
    correct, total, test_loss = 0, 0, 0.0
    with torch.no_grad():
        for inputs, targets in test_loader:
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = model(inputs)
            test_loss += criterion(outputs, targets).item() * targets.size(0)
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
    print(f"test loss {test_loss / total:.4f}, accuracy {100.0 * correct / total:.1f}%")

    # Save and reload the weights, as a checkpoint would.
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    restored = build(torch)["model"].to(device)
    restored.load_state_dict(torch.load(buffer))
    restored.eval()
    with torch.no_grad():
        first_inputs, _ = next(iter(test_loader))
        first_inputs = first_inputs.to(device)
        same = torch.equal(restored(first_inputs), model(first_inputs))

    return {"losses": losses, "test_loss": test_loss / total, "correct": correct, "reloaded_same": same,
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
