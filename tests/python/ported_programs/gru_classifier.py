"""A ported PyTorch program: a GRU sequence classifier on variable-length sequences, as in the text
classification tutorials. Sequences are padded with nn.utils.rnn.pad_sequence in a collate_fn; the classifier
reads each sequence's last real step with torch.gather (or, with packed=True, packs the batch with
nn.utils.rnn.pack_padded_sequence, which metajit leaves out: that run must stop naming it). A bidirectional
GRU, BCEWithLogitsLoss with pos_weight, Adam with ReduceLROnPlateau on the validation loss, and accuracy from
(torch.sigmoid(logits) > 0.5).

Written once against the module `torch` (PyTorch, or metajit imported as torch)."""
import numpy as np

FEATURES = 3


def make_data(seed=10, count=72):
    """Sequences of 3 to 9 steps; the label says whether the first feature's sum is positive."""
    rng = np.random.default_rng(seed)
    sequences = [rng.normal(0.0, 1.0, size=(rng.integers(3, 10), FEATURES)).astype(np.float32)
                 for _ in range(count)]
    labels = np.array([float(s[:, 0].sum() > 0) for s in sequences], dtype=np.float32)
    return sequences, labels


def build(torch, packed=False):
    nn = torch.nn

    class GRUClassifier(nn.Module):
        def __init__(self, input_size, hidden_size, num_layers=1):
            super().__init__()
            self.packed = packed
            self.gru = nn.GRU(input_size, hidden_size, num_layers=num_layers, batch_first=True,
                              bidirectional=True)
            self.head = nn.Sequential(nn.Linear(2 * hidden_size, hidden_size), nn.ReLU(),
                                      nn.Linear(hidden_size, 1))

        def forward(self, padded, lengths):
            if self.packed:
                packed_input = nn.utils.rnn.pack_padded_sequence(padded, lengths.cpu(), batch_first=True,
                                                                 enforce_sorted=False)
                _, hidden = self.gru(packed_input)
                summary = torch.cat([hidden[-2], hidden[-1]], dim=1)
            else:
                output, _ = self.gru(padded)  # (batch, time, 2 * hidden)
                # The forward direction's state at each sequence's last real step.
                index = (lengths - 1).view(-1, 1, 1).expand(-1, 1, output.size(2))
                last = output.gather(1, index).squeeze(1)
                hidden_size = output.size(2) // 2
                summary = torch.cat([last[:, :hidden_size], output[:, 0, hidden_size:]], dim=1)
            return self.head(summary).squeeze(-1)

    return {"model": GRUClassifier(FEATURES, 8)}


def run(torch, modules, data, steps):
    nn = torch.nn
    pad_sequence = torch.nn.utils.rnn.pad_sequence
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sequences, labels = data

    class SequenceDataset(Dataset):
        def __init__(self, sequences, labels):
            self.sequences, self.labels = sequences, labels

        def __len__(self):
            return len(self.sequences)

        def __getitem__(self, idx):
            return torch.from_numpy(self.sequences[idx]), torch.tensor(self.labels[idx])

    def collate_batch(batch):
        sequences, labels = zip(*batch)
        lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
        return pad_sequence(list(sequences), batch_first=True), lengths, torch.stack(labels)

    train_loader = DataLoader(SequenceDataset(sequences[:56], labels[:56]), batch_size=8, shuffle=False,
                              collate_fn=collate_batch)
    val_loader = DataLoader(SequenceDataset(sequences[56:], labels[56:]), batch_size=8, collate_fn=collate_batch)
    model = modules["model"].to(device)
    positives = float(labels[:56].sum())
    criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([(56 - positives) / positives], device=device))
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-2, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=0)

    losses, validation, accuracies = [], [], []
    for epoch in range(100):
        model.train()
        for padded, lengths, target in train_loader:
            padded, lengths, target = padded.to(device), lengths.to(device), target.to(device)
            optimizer.zero_grad()
            loss = criterion(model(padded, lengths), target)
            loss.backward()
            nn.utils.clip_grad_value_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break
        model.eval()
        val_loss, correct, seen = 0.0, 0, 0
        with torch.no_grad():
            for padded, lengths, target in val_loader:
                padded, lengths, target = padded.to(device), lengths.to(device), target.to(device)
                logits = model(padded, lengths)
                val_loss += criterion(logits, target).item() * target.size(0)
                correct += ((torch.sigmoid(logits) > 0.5).float() == target).sum().item()
                seen += target.size(0)
        scheduler.step(val_loss / seen)
        validation.append(val_loss / seen)
        accuracies.append(correct / seen)
        print(f"epoch {epoch}: train loss {losses[-1]:.4f} val loss {val_loss / seen:.4f} "
              f"acc {correct / seen:.3f} lr {optimizer.param_groups[0]['lr']:.4f}")
        if len(losses) == steps:
            break
    return {"losses": losses, "validation": validation, "accuracies": accuracies,
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
