"""A ported PyTorch program: a convolutional denoising autoencoder as in the autoencoder tutorials (Conv2d with
stride 2 down, ConvTranspose2d up, Sigmoid output), trained with SGD (momentum, nesterov, weight_decay) under
OneCycleLR stepped every batch, MSELoss against the clean image while the input gets fixed noise added, and
the reconstruction error measured under torch.no_grad(); the checkpoint dict (epoch, model and optimizer
state_dicts, loss) is saved with torch.save and training resumes from it with torch.load, as people write.

Written once against the module `torch` (PyTorch, or metajit imported as torch)."""
import io

import numpy as np

SIDE = 8


def make_data(seed=9, count=48):
    """Clean 8x8 images of soft squares and their noisy copies."""
    rng = np.random.default_rng(seed)
    images = np.zeros((count, 1, SIDE, SIDE))
    for index in range(count):
        top, left = rng.integers(0, 5, size=2)
        size = rng.integers(2, 4)
        images[index, 0, top:top + size, left:left + size] = rng.uniform(0.5, 1.0)
    noisy = np.clip(images + 0.2 * rng.standard_normal(images.shape), 0, 1)
    return images.astype(np.float32), noisy.astype(np.float32)


def build(torch):
    nn = torch.nn

    class Autoencoder(nn.Module):
        def __init__(self):
            super(Autoencoder, self).__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(1, 8, 3, stride=2, padding=1),  # 8x4x4
                nn.ReLU(),
                nn.Conv2d(8, 16, 3, stride=2, padding=1),  # 16x2x2
                nn.ReLU(),
            )
            self.decoder = nn.Sequential(
                nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1),  # 8x4x4
                nn.ReLU(),
                nn.ConvTranspose2d(8, 1, 3, stride=2, padding=1, output_padding=1),  # 1x8x8
                nn.Sigmoid(),
            )

        def forward(self, x):
            x = self.encoder(x)
            x = self.decoder(x)
            return x

    return {"model": Autoencoder()}


def run(torch, modules, data, steps, epochs=3):
    nn = torch.nn
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    clean, noisy = data
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(noisy), torch.from_numpy(clean))
    loader = torch.utils.data.DataLoader(dataset, batch_size=12, shuffle=False)
    model = modules["model"].to(device)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    per_epoch = max(1, steps // epochs)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, epochs=epochs, steps_per_epoch=per_epoch)

    def train_epoch(epoch, losses):
        model.train()
        for batch_index, (inputs, targets) in enumerate(loader):
            if batch_index == per_epoch:
                break
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = model(inputs)
            loss = criterion(outputs, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        print(f"Epoch [{epoch + 1}/{epochs}], Loss: {losses[-1]:.4f}, lr: {scheduler.get_last_lr()[0]:.4f}")

    losses = []
    train_epoch(0, losses)
    # Checkpoint after the first epoch, then resume from it (a fresh model and optimizer loading the state).
    buffer = io.BytesIO()
    torch.save({"epoch": 1, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "loss": losses[-1]}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    model = build(torch)["model"].to(device)
    model.load_state_dict(checkpoint["model_state_dict"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, epochs=epochs,
                                                    steps_per_epoch=per_epoch, last_epoch=per_epoch - 1)
    for epoch in range(checkpoint["epoch"], epochs):
        train_epoch(epoch, losses)

    model.eval()
    with torch.no_grad():
        reconstruction = model(torch.from_numpy(noisy).to(device))
        error = ((reconstruction - torch.from_numpy(clean).to(device)) ** 2).mean(dim=(1, 2, 3))
    return {"losses": losses, "errors": error.cpu().numpy(),
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
