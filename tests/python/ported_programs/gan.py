"""A ported PyTorch program in the shape of pytorch/examples/dcgan, with small fully connected networks on 2-D
points: a generator and a discriminator with their own Adam optimizers (betas=(0.5, 0.999)), BCELoss on
labels made with torch.full, the discriminator trained on real and on `fake.detach()` samples, then the
generator trained through the discriminator; weights initialised by model.apply(weights_init).

Written once against the module `torch` (PyTorch, or metajit imported as torch). The latent noise comes from
torch.randn, which the comparison test makes equal in both frameworks (same_noise.SameNoise)."""
import numpy as np

LATENT = 4


def make_data(seed=4, count=128):
    """Points on a noisy ring of radius 2."""
    rng = np.random.default_rng(seed)
    angles = rng.uniform(0, 2 * np.pi, size=count)
    radii = 2.0 + 0.1 * rng.standard_normal(count)
    return np.stack([radii * np.cos(angles), radii * np.sin(angles)], axis=1).astype(np.float32)


def build(torch):
    nn = torch.nn

    def weights_init(m):
        classname = m.__class__.__name__
        if classname.find("Linear") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.2)
            if m.bias is not None:
                nn.init.constant_(m.bias.data, 0)
        elif classname.find("BatchNorm") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0)

    class Generator(nn.Module):
        def __init__(self):
            super(Generator, self).__init__()
            self.main = nn.Sequential(
                nn.Linear(LATENT, 32, bias=False),  # the batch norm after it has the bias
                nn.BatchNorm1d(32),
                nn.ReLU(True),
                nn.Linear(32, 32),
                nn.ReLU(True),
                nn.Linear(32, 2),
            )

        def forward(self, input):
            return self.main(input)

    class Discriminator(nn.Module):
        def __init__(self):
            super(Discriminator, self).__init__()
            self.main = nn.Sequential(
                nn.Linear(2, 32),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Linear(32, 32),
                nn.LeakyReLU(0.2, inplace=True),
                nn.Linear(32, 1),
                nn.Sigmoid(),
            )

        def forward(self, input):
            return self.main(input).view(-1, 1).squeeze(1)

    netG = Generator()
    netG.apply(weights_init)
    netD = Discriminator()
    netD.apply(weights_init)
    return {"generator": netG, "discriminator": netD}


def run(torch, modules, data, steps, batch_size=32):
    nn = torch.nn
    optim = torch.optim
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataloader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(data)),
                                             batch_size=batch_size, shuffle=False, drop_last=True)
    netG = modules["generator"].to(device)
    netD = modules["discriminator"].to(device)

    criterion = nn.BCELoss()
    fixed_noise = torch.randn(16, LATENT, device=device)
    real_label = 1
    fake_label = 0

    # setup optimizer
    optimizerD = optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))

    errors_d, errors_g = [], []
    for epoch in range(100):
        for i, (real_cpu,) in enumerate(dataloader, 0):
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            # train with real
            netD.zero_grad()
            real_cpu = real_cpu.to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)

            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()

            # train with fake
            noise = torch.randn(batch_size, LATENT, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for generator cost
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()

            print("[%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f"
                  % (epoch, i, len(dataloader), errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
            errors_d.append(errD.item())
            errors_g.append(errG.item())
            if len(errors_d) == steps:
                break
        if len(errors_d) == steps:
            break

    netG.eval()
    with torch.no_grad():
        fake = netG(fixed_noise).detach().cpu()
    return {"losses": errors_d, "generator_losses": errors_g, "samples": fake.numpy(),
            "state": {k: v.cpu().numpy() for k, v in netG.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
