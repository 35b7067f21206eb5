"""SmallCNN: two 3x3 convolution + ReLU + 2x2 max-pool stages and a two-layer classifier, for small
single-channel images such as MNIST (1x28x28) or scikit-learn digits (1x8x8)."""
from .. import nn

__all__ = ["SmallCNN", "small_cnn"]


class SmallCNN(nn.Module):
    """SmallCNN(in_channels=1, num_classes=10, input_size=28, channels=(16, 32), hidden=128, batch_norm=False).

    input_size is the (square) image side, or an (height, width) pair; each stage halves it (floor), so both
    sides must be at least 4."""

    def __init__(self, in_channels=1, num_classes=10, input_size=28, channels=(16, 32), hidden=128,
                 batch_norm=False):
        super().__init__()
        height, width = (input_size, input_size) if isinstance(input_size, int) else tuple(input_size)
        if height < 4 or width < 4:
            raise ValueError(f"SmallCNN: input_size must be at least 4 on each side (two 2x2 poolings), got "
                             f"{input_size}")
        first, second = channels
        layers = []
        for source, target in ((in_channels, first), (first, second)):
            layers.append(nn.Conv2d(source, target, 3, padding=1, bias=not batch_norm))
            if batch_norm:
                layers.append(nn.BatchNorm2d(target))
            layers.extend([nn.ReLU(), nn.MaxPool2d(2)])
        self.features = nn.Sequential(*layers)
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(
            nn.Linear(second * (height // 4) * (width // 4), hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, x):
        return self.classifier(self.flatten(self.features(x)))


def small_cnn(**kwargs):
    """SmallCNN(**kwargs)."""
    return SmallCNN(**kwargs)
