"""A ported PyTorch program in the shape of the "language modeling with nn.Transformer" tutorial and
pytorch/examples/word_language_model's TransformerModel: sinusoidal PositionalEncoding kept in a registered
buffer, nn.TransformerEncoder over nn.TransformerEncoderLayer with the causal mask from
nn.Transformer.generate_square_subsequent_mask, an embedding scaled by sqrt(d_model), SGD with StepLR, gradient
clipping, and evaluation of the perplexity under torch.no_grad(); the best model's state_dict is kept with
copy.deepcopy and loaded back, as the tutorial does.

Written once against the module `torch` (PyTorch, or metajit imported as torch)."""
import copy
import math

import numpy as np

VOCABULARY = 20


def make_data(seed=8, length=420):
    """A token stream where each token mostly repeats a pattern of period 7, with noise."""
    rng = np.random.default_rng(seed)
    pattern = rng.integers(0, VOCABULARY, size=7)
    tokens = np.array([pattern[i % 7] if rng.random() < 0.85 else rng.integers(0, VOCABULARY)
                       for i in range(length)])
    return tokens.astype(np.int64)


def build(torch, dropout=0.0):
    nn = torch.nn

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, 1, d_model)
            pe[:, 0, 0::2] = torch.sin(position * div_term)
            pe[:, 0, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe)

        def forward(self, x):
            """x: Tensor, shape ``[seq_len, batch_size, embedding_dim]``"""
            x = x + self.pe[:x.size(0)]
            return self.dropout(x)

    class TransformerModel(nn.Module):
        def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.5):
            super().__init__()
            self.model_type = "Transformer"
            self.pos_encoder = PositionalEncoding(d_model, dropout, max_len=64)
            encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
            self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers, enable_nested_tensor=False)
            self.embedding = nn.Embedding(ntoken, d_model)
            self.d_model = d_model
            self.linear = nn.Linear(d_model, ntoken)
            self.init_weights()

        def init_weights(self):
            initrange = 0.1
            self.embedding.weight.data.uniform_(-initrange, initrange)
            self.linear.bias.data.zero_()
            self.linear.weight.data.uniform_(-initrange, initrange)

        def forward(self, src, src_mask=None):
            src = self.embedding(src) * math.sqrt(self.d_model)
            src = self.pos_encoder(src)
            if src_mask is None:
                src_mask = nn.Transformer.generate_square_subsequent_mask(len(src)).to(src.device)
            output = self.transformer_encoder(src, src_mask)
            output = self.linear(output)
            return output

    return {"model": TransformerModel(VOCABULARY, 16, 2, 32, 2, dropout)}


def run(torch, modules, data, steps, bptt=10):
    nn = torch.nn
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    def batchify(data, bsz):
        """Divides the data into ``bsz`` separate sequences, removing extra elements that wouldn't cleanly fit."""
        seq_len = data.size(0) // bsz
        data = data[:seq_len * bsz]
        data = data.view(bsz, seq_len).t().contiguous()
        return data.to(device)

    def get_batch(source, i):
        seq_len = min(bptt, len(source) - 1 - i)
        data = source[i:i + seq_len]
        target = source[i + 1:i + 1 + seq_len].reshape(-1)
        return data, target

    tokens = torch.tensor(data, dtype=torch.long)
    train_data = batchify(tokens[:320], 4)
    val_data = batchify(tokens[320:], 2)
    model = modules["model"].to(device)
    criterion = nn.CrossEntropyLoss()
    lr = 1.0  # learning rate
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)

    def evaluate(model, eval_data):
        model.eval()  # turn on evaluation mode
        total_loss = 0.
        with torch.no_grad():
            for i in range(0, eval_data.size(0) - 1, bptt):
                data, targets = get_batch(eval_data, i)
                seq_len = data.size(0)
                output = model(data)
                output_flat = output.view(-1, VOCABULARY)
                total_loss += seq_len * criterion(output_flat, targets).item()
        return total_loss / (len(eval_data) - 1)

    losses, validation = [], []
    best_val_loss = float("inf")
    best_model = None
    for epoch in range(1, 100):
        model.train()  # turn on train mode
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i)
            output = model(data)
            output_flat = output.view(-1, VOCABULARY)
            loss = criterion(output_flat, targets)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == steps:
                break
        val_loss = evaluate(model, val_data)
        validation.append(val_loss)
        print(f"| end of epoch {epoch:3d} | lr {scheduler.get_last_lr()[0]:02.2f} | valid loss {val_loss:5.2f} | "
              f"valid ppl {math.exp(val_loss):8.2f}")
        if val_loss < best_val_loss:
            best_val_loss = val_loss
            best_model = copy.deepcopy(model)
        scheduler.step()
        if len(losses) == steps:
            break
    model.load_state_dict(best_model.state_dict())
    return {"losses": losses, "validation": validation, "best": evaluate(model, val_data),
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
