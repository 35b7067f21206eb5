"""A ported PyTorch program in the shape of the CIFAR ResNet scripts and PyTorch's automatic-mixed-precision
recipe: a small ResNet (BasicBlock with a 1x1 shortcut when the shape changes, BatchNorm2d, AdaptiveAvgPool2d),
CrossEntropyLoss with label_smoothing, SGD with momentum and weight decay under CosineAnnealingLR, gradient
accumulation over two batches, and the AMP idiom `torch.autocast(device_type=..., enabled=use_amp)` with
`torch.amp.GradScaler(enabled=use_amp)` (scale, step, update), use_amp being the script's --amp flag
(off here: mixed precision computes other numbers than float32 by design); model.eval()
accuracy with `_, predicted = outputs.max(1)`; the Kaiming initialisation loop over self.modules().

Written once against the module `torch` (PyTorch, or metajit imported as torch)."""
import numpy as np

CLASSES = 4


def make_data(seed=11, count=64):
    """3x8x8 colour images whose class is the channel and half that carry a brighter patch."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=count)
    images = rng.normal(0, 0.5, size=(count, 3, 8, 8))
    for index, label in enumerate(labels):
        channel, half = label % 3, label // 3
        images[index, channel, :, 4 * half:4 * half + 4] += 1.0
    return images.astype(np.float32), labels.astype(np.int64)


def build(torch):
    nn = torch.nn
    F = torch.nn.functional

    class BasicBlock(nn.Module):
        expansion = 1

        def __init__(self, in_planes, planes, stride=1):
            super(BasicBlock, self).__init__()
            self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.shortcut = nn.Sequential()
            if stride != 1 or in_planes != self.expansion * planes:
                self.shortcut = nn.Sequential(
                    nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(self.expansion * planes)
                )

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += self.shortcut(x)
            out = F.relu(out)
            return out

    class ResNet(nn.Module):
        def __init__(self, block, num_blocks, num_classes=10):
            super(ResNet, self).__init__()
            self.in_planes = 8
            self.conv1 = nn.Conv2d(3, 8, kernel_size=3, stride=1, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.layer1 = self._make_layer(block, 8, num_blocks[0], stride=1)
            self.layer2 = self._make_layer(block, 16, num_blocks[1], stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.linear = nn.Linear(16 * block.expansion, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def _make_layer(self, block, planes, num_blocks, stride):
            strides = [stride] + [1] * (num_blocks - 1)
            layers = []
            for stride in strides:
                layers.append(block(self.in_planes, planes, stride))
                self.in_planes = planes * block.expansion
            return nn.Sequential(*layers)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.layer1(out)
            out = self.layer2(out)
            out = self.avgpool(out)
            out = out.view(out.size(0), -1)
            out = self.linear(out)
            return out

    return {"model": ResNet(BasicBlock, [1, 1], num_classes=CLASSES)}


def run(torch, modules, data, steps, accumulation_steps=2, amp=False):
    nn = torch.nn
    device = "cuda" if torch.cuda.is_available() else "cpu"
    use_amp = amp and device == "cuda"
    images, labels = data
    trainset = torch.utils.data.TensorDataset(torch.tensor(images[:48]), torch.tensor(labels[:48]))
    testset = torch.utils.data.TensorDataset(torch.tensor(images[48:]), torch.tensor(labels[48:]))
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=8, shuffle=False, num_workers=0)
    testloader = torch.utils.data.DataLoader(testset, batch_size=16, shuffle=False)

    net = modules["model"].to(device)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)
    scaler = torch.amp.GradScaler(enabled=use_amp)

    losses, accuracies = [], []
    for epoch in range(100):
        net.train()
        train_loss, correct, total = 0, 0, 0
        optimizer.zero_grad()
        for batch_idx, (inputs, targets) in enumerate(trainloader):
            inputs, targets = inputs.to(device), targets.to(device)
            with torch.autocast(device_type=device, dtype=torch.float16, enabled=use_amp):
                outputs = net(inputs)
                loss = criterion(outputs, targets) / accumulation_steps
            scaler.scale(loss).backward()
            if (batch_idx + 1) % accumulation_steps == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
            train_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
            losses.append(loss.item() * accumulation_steps)
            if len(losses) == steps:
                break
        scheduler.step()
        print("Epoch %d | Loss: %.3f | Acc: %.3f%% (%d/%d)"
              % (epoch, train_loss / (batch_idx + 1), 100. * correct / total, correct, total))

        net.eval()
        correct, total = 0, 0
        with torch.no_grad():
            for inputs, targets in testloader:
                outputs = net(inputs.to(device))
                _, predicted = outputs.max(1)
                total += targets.size(0)
                correct += predicted.eq(targets.to(device)).sum().item()
        accuracies.append(correct / total)
        if len(losses) == steps:
            break
    return {"losses": losses, "accuracies": accuracies,
            "state": {k: v.cpu().numpy() for k, v in net.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
