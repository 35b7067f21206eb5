"""A ported PyTorch program in the shape of pytorch/examples/mnist: a Dataset subclass of small grey images, a
CNN with Conv2d/BatchNorm2d/MaxPool2d/Dropout, log_softmax + nll_loss, Adadelta with StepLR(gamma=0.7),
gradient clipping, and a test pass that sums the loss and counts `pred.eq(target.view_as(pred))`.

Written once against the module `torch` (PyTorch, or metajit imported as torch)."""
import numpy as np

SIDE, CLASSES = 12, 5


def make_data(seed=1, count=96):
    """Images of one bright bar whose position is the class, plus noise (numpy: both frameworks see the same)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=count)
    images = rng.normal(0, 0.3, size=(count, 1, SIDE, SIDE))
    for index, label in enumerate(labels):
        images[index, 0, 2 * label:2 * label + 2, :] += 1.0
    return images.astype(np.float32), labels.astype(np.int64)


def build(torch, dropout=0.0):
    """`dropout` is the probability of both Dropout layers (0.25 and 0.5 in the example; the comparison uses 0,
    since the two frameworks draw different masks)."""
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, 1)
            self.bn1 = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 16, 3, 1, padding=1)
            self.dropout1 = nn.Dropout(dropout)
            self.dropout2 = nn.Dropout(dropout * 2)
            self.fc1 = nn.Linear(16 * 5 * 5, 32)
            self.fc2 = nn.Linear(32, CLASSES)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(self.bn1(x))
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    return {"model": Net()}


def run(torch, modules, data, steps, log_interval=4):
    F = torch.nn.functional
    optim = torch.optim
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    StepLR = torch.optim.lr_scheduler.StepLR

    class BarImages(Dataset):
        def __init__(self, images, labels, normalise=True):
            self.images, self.labels = images, labels
            self.mean, self.std = 0.2, 0.45
            self.normalise = normalise

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, index):
            image = torch.tensor(self.images[index])
            if self.normalise:
                image = (image - self.mean) / self.std
            return image, int(self.labels[index])

    def train(model, device, train_loader, optimizer, epoch, losses):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            optimizer.step()
            losses.append(loss.item())
            if batch_idx % log_interval == 0:
                print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                    epoch, batch_idx * len(data), len(train_loader.dataset),
                    100. * batch_idx / len(train_loader), loss.item()))
            if len(losses) == steps:
                return

    def test(model, device, test_loader):
        model.eval()
        test_loss = 0
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.nll_loss(output, target, reduction="sum").item()  # sum up batch loss
                pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
                correct += pred.eq(target.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        print("\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(
            test_loss, correct, len(test_loader.dataset), 100. * correct / len(test_loader.dataset)))
        return test_loss, correct

    use_cuda = torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    train_kwargs = {"batch_size": 16, "shuffle": False}
    test_kwargs = {"batch_size": 32}
    images, labels = data
    dataset1 = BarImages(images[:64], labels[:64])
    dataset2 = BarImages(images[64:], labels[64:])
    train_loader = DataLoader(dataset1, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    model = modules["model"].to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    results = []
    for epoch in range(1, 100):
        train(model, device, train_loader, optimizer, epoch, losses)
        results.append(test(model, device, test_loader))
        scheduler.step()
        if len(losses) == steps:
            break
    return {"losses": losses, "test_loss": [loss for loss, _ in results], "correct": [c for _, c in results],
            "running_var": model.bn1.running_var.cpu().numpy(),
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
