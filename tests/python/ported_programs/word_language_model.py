"""A ported PyTorch program in the shape of pytorch/examples/word_language_model: an Embedding + LSTM + Linear
language model (tied weights optional) trained with truncated back-propagation through time: batchify(),
get_batch(), the hidden state detached between chunks (repackage_hidden), clip_grad_norm_, and the example's
hand-written SGD update `p.data.add_(p.grad, alpha=-lr)`, with the learning rate divided by 4 when the
validation loss stops improving; evaluation under torch.no_grad().

Written once against the module `torch` (PyTorch, or metajit imported as torch)."""
import math

import numpy as np

VOCABULARY = 24


def make_data(seed=2, length=600):
    """A token stream from a small Markov chain (each token mostly followed by one of two successors)."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, VOCABULARY, size=(VOCABULARY, 2))
    tokens = [0]
    for _ in range(length - 1):
        previous = tokens[-1]
        tokens.append(int(successors[previous, rng.integers(0, 2)]) if rng.random() < 0.9
                      else int(rng.integers(0, VOCABULARY)))
    return np.array(tokens, dtype=np.int64)


def build(torch, rnn_type="LSTM", dropout=0.0, tie_weights=True):
    nn = torch.nn

    class RNNModel(nn.Module):
        """Container module with an encoder, a recurrent module, and a decoder."""

        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super(RNNModel, self).__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                if nhid != ninp:
                    raise ValueError("When using the tied flag, nhid must be equal to emsize")
                self.decoder.weight = self.encoder.weight
            self.init_weights()
            self.rnn_type = rnn_type
            self.nhid = nhid
            self.nlayers = nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return torch.nn.functional.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                        weight.new_zeros(self.nlayers, bsz, self.nhid))
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    return {"model": RNNModel(rnn_type, VOCABULARY, 16, 16, 2, dropout, tie_weights)}


def run(torch, modules, data, steps, bptt=8, clip=0.25, initial_lr=5.0):
    nn = torch.nn
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def batchify(data, bsz):
        # Work out how cleanly we can divide the dataset into bsz parts.
        nbatch = data.size(0) // bsz
        # Trim off any extra elements that wouldn't cleanly fit (remainders).
        data = data.narrow(0, 0, nbatch * bsz)
        # Evenly divide the data across the bsz batches.
        data = data.view(bsz, -1).t().contiguous()
        return data.to(device)

    def repackage_hidden(h):
        """Wraps hidden states in new Tensors, to detach them from their history."""
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        data = source[i:i + seq_len]
        target = source[i + 1:i + 1 + seq_len].view(-1)
        return data, target

    corpus = torch.tensor(data)
    train_data = batchify(corpus[:480], 4)
    val_data = batchify(corpus[480:], 2)
    model = modules["model"].to(device)
    criterion = nn.NLLLoss()

    def evaluate(data_source):
        model.eval()
        total_loss = 0.
        hidden = model.init_hidden(2)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, bptt):
                data, targets = get_batch(data_source, i)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    lr = initial_lr
    losses, validation = [], []
    best_val_loss = None
    done = 0
    for epoch in range(1, 100):
        model.train()
        total_loss = 0.
        hidden = model.init_hidden(4)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i)
            # Starting each batch, we detach the hidden state from how it was previously produced.
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            total_loss += loss.item()
            losses.append(loss.item())
            done += 1
            if done == steps:
                break
        val_loss = evaluate(val_data)
        validation.append(val_loss)
        print("| end of epoch {:3d} | valid loss {:5.2f} | valid ppl {:8.2f}".format(
            epoch, val_loss, math.exp(val_loss)))
        if not best_val_loss or val_loss < best_val_loss:
            best_val_loss = val_loss
        else:
            # Anneal the learning rate if no improvement has been seen in the validation dataset.
            lr /= 4.0
        if done == steps:
            break
    return {"losses": losses, "validation": validation,
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
