"""A ported PyTorch program in the style of the siamese-network tutorials: a Dataset subclass that returns
pairs (two samples and whether they share a class), one embedding network applied to both sides, the
contrastive loss written by hand with F.pairwise_distance and torch.clamp(margin - d, min=0.0), RMSprop with
MultiStepLR, then nearest-centroid accuracy of the embeddings under torch.no_grad(); also cosine similarity and
F.normalize, as in retrieval code.

Written once against the module `torch` (PyTorch, or metajit imported as torch)."""
import numpy as np

FEATURES, CLASSES = 8, 3


def make_data(seed=6, count=90):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1.5, size=(CLASSES, FEATURES))
    labels = np.arange(count) % CLASSES
    points = centres[labels] + rng.normal(0, 1.0, size=(count, FEATURES))
    # Pair each sample with a partner: the same class on even indices, another class on odd ones.
    partners = np.array([(i + CLASSES * (1 + i % 4)) % count if i % 2 == 0 else (i + 1) % count
                         for i in range(count)])
    return points.astype(np.float32), labels.astype(np.int64), partners.astype(np.int64)


def build(torch):
    nn = torch.nn

    class SiameseNetwork(nn.Module):
        def __init__(self):
            super(SiameseNetwork, self).__init__()
            self.fc = nn.Sequential(
                nn.Linear(FEATURES, 32),
                nn.Tanh(),
                nn.LayerNorm(32),
                nn.Linear(32, 16),
                nn.ELU(),
                nn.Linear(16, 4),
            )

        def forward_once(self, x):
            return self.fc(x)

        def forward(self, input1, input2):
            output1 = self.forward_once(input1)
            output2 = self.forward_once(input2)
            return output1, output2

    return {"model": SiameseNetwork()}


def run(torch, modules, data, steps):
    nn = torch.nn
    F = torch.nn.functional
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    points, labels, partners = data

    class PairDataset(Dataset):
        def __init__(self, points, labels, partners):
            self.points = torch.from_numpy(points)
            self.labels = labels
            self.partners = partners

        def __getitem__(self, index):
            other = self.partners[index]
            different = float(self.labels[index] != self.labels[other])
            return self.points[index], self.points[other], torch.tensor([different], dtype=torch.float32)

        def __len__(self):
            return len(self.labels)

    class ContrastiveLoss(nn.Module):
        """Contrastive loss function (Hadsell, Chopra and LeCun, 2006)."""

        def __init__(self, margin=2.0):
            super(ContrastiveLoss, self).__init__()
            self.margin = margin

        def forward(self, output1, output2, label):
            euclidean_distance = F.pairwise_distance(output1, output2, keepdim=True)
            loss_contrastive = torch.mean((1 - label) * torch.pow(euclidean_distance, 2) +
                                          label * torch.pow(torch.clamp(self.margin - euclidean_distance, min=0.0), 2))
            return loss_contrastive

    loader = DataLoader(PairDataset(points, labels, partners), batch_size=18, shuffle=False)
    net = modules["model"].to(device)
    criterion = ContrastiveLoss()
    optimizer = torch.optim.RMSprop(net.parameters(), lr=3e-3, alpha=0.9, momentum=0.5)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1, 2], gamma=0.5)

    losses = []
    for epoch in range(100):
        net.train()
        for i, (img0, img1, label) in enumerate(loader, 0):
            img0, img1, label = img0.to(device), img1.to(device), label.to(device)
            optimizer.zero_grad()
            output1, output2 = net(img0, img1)
            loss_contrastive = criterion(output1, output2, label)
            loss_contrastive.backward()
            optimizer.step()
            losses.append(loss_contrastive.item())
            if len(losses) == steps:
                break
        scheduler.step()
        print(f"Epoch number {epoch}\n Current loss {losses[-1]:.4f}")
        if len(losses) == steps:
            break

    net.eval()
    with torch.no_grad():
        embeddings = net.forward_once(torch.from_numpy(points).to(device))
        label_tensor = torch.from_numpy(labels).to(device)
        centroids = torch.stack([embeddings[label_tensor == c].mean(dim=0) for c in range(CLASSES)])
        distances = torch.cdist(embeddings, centroids)
        _, nearest = distances.min(dim=1)
        accuracy = (nearest == label_tensor).float().mean().item()
        unit = F.normalize(embeddings, p=2, dim=1)
        similarity = F.cosine_similarity(unit[:-1], unit[1:], dim=1)
    print(f"nearest-centroid accuracy {accuracy:.3f}")
    return {"losses": losses, "accuracy": accuracy, "similarity": similarity.cpu().numpy(),
            "state": {k: v.cpu().numpy() for k, v in net.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
