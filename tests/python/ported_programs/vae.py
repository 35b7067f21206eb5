"""A ported PyTorch program in the shape of pytorch/examples/vae: a fully connected variational autoencoder
(encode to mu/logvar, reparameterise with torch.randn_like, decode through a sigmoid), the loss
binary_cross_entropy(reduction='sum') plus the KL term -0.5 * sum(1 + logvar - mu^2 - exp(logvar)), Adam, and a
no_grad test pass; sampling from the prior with torch.randn at the end.

Written once against the module `torch` (PyTorch, or metajit imported as torch). The comparison test gives both
frameworks the same normal draws (see same_noise.SameNoise); the program itself calls torch.randn_like
as the example does."""
import numpy as np

PIXELS = 36


def make_data(seed=3, count=80):
    """6x6 'images' in [0, 1]: blurred random strokes, flattened."""
    rng = np.random.default_rng(seed)
    images = rng.random((count, 6, 6)) ** 3
    images[:, :, 1:] = 0.5 * (images[:, :, 1:] + images[:, :, :-1])
    return images.reshape(count, PIXELS).astype(np.float32)


def build(torch):
    nn = torch.nn
    F = torch.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super(VAE, self).__init__()
            self.fc1 = nn.Linear(PIXELS, 24)
            self.fc21 = nn.Linear(24, 4)
            self.fc22 = nn.Linear(24, 4)
            self.fc3 = nn.Linear(4, 24)
            self.fc4 = nn.Linear(24, PIXELS)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar):
            std = torch.exp(0.5 * logvar)
            eps = torch.randn_like(std)
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x):
            mu, logvar = self.encode(x.view(-1, PIXELS))
            z = self.reparameterize(mu, logvar)
            return self.decode(z), mu, logvar

    return {"model": VAE()}


def run(torch, modules, data, steps):
    F = torch.nn.functional
    optim = torch.optim
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    images = torch.from_numpy(data)
    train_loader = DataLoader(TensorDataset(images[:64]), batch_size=16, shuffle=False)
    test_loader = DataLoader(TensorDataset(images[64:]), batch_size=16, shuffle=False)
    model = modules["model"].to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)

    # Reconstruction + KL divergence losses summed over all elements and batch
    def loss_function(recon_x, x, mu, logvar):
        BCE = F.binary_cross_entropy(recon_x, x.view(-1, PIXELS), reduction="sum")
        # see Appendix B from VAE paper: Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
        KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return BCE + KLD

    losses, test_losses = [], []
    for epoch in range(1, 100):
        model.train()
        train_loss = 0
        for batch_idx, (data,) in enumerate(train_loader):
            data = data.to(device)
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            train_loss += loss.item()
            optimizer.step()
            losses.append(loss.item() / len(data))
            if len(losses) == steps:
                break
        print("====> Epoch: {} Average loss: {:.4f}".format(epoch, train_loss / len(train_loader.dataset)))

        model.eval()
        test_loss = 0
        with torch.no_grad():
            for i, (data,) in enumerate(test_loader):
                data = data.to(device)
                recon_batch, mu, logvar = model(data)
                test_loss += loss_function(recon_batch, data, mu, logvar).item()
        test_loss /= len(test_loader.dataset)
        test_losses.append(test_loss)
        print("====> Test set loss: {:.4f}".format(test_loss))
        if len(losses) == steps:
            break

    with torch.no_grad():
        sample = torch.randn(8, 4).to(device)
        sample = model.decode(sample).cpu()
    return {"losses": losses, "test_losses": test_losses, "samples": sample.numpy(),
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
