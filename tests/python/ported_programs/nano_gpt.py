"""A ported PyTorch program in the shape of nanoGPT / minGPT: a character-level GPT with hand-written causal
self-attention (`q, k, v = self.c_attn(x).split(n_embd, dim=2)`, `.view(B, T, nh, hs).transpose(1, 2)`, a
registered lower-triangular buffer and masked_fill with -inf), GELU MLPs, pre-LayerNorm blocks, weight tying,
the `_init_weights` apply-hook, AdamW with decay and no-decay parameter groups, a warm-up + cosine schedule
written by hand and set through `param_group["lr"]`, random-offset batches taken with torch.stack, gradient
clipping, and estimate_loss() under torch.no_grad() with model.eval()/train(); generate() samples greedily.

Written once against the module `torch` (PyTorch, or metajit imported as torch). Batch offsets come from a numpy
generator here (nanoGPT draws them with torch.randint), so both frameworks see the same batches."""
import math

import numpy as np

TEXT = ("first citizen: before we proceed any further, hear me speak. all: speak, speak. first citizen: you are "
        "all resolved rather to die than to famish? all: resolved. resolved. first citizen: first, you know caius "
        "marcius is chief enemy to the people. all: we know't, we know't.")


def make_data():
    characters = sorted(set(TEXT))
    index_of = {c: i for i, c in enumerate(characters)}
    return np.array([index_of[c] for c in TEXT], dtype=np.int64), len(characters)


class GPTConfig:
    block_size = 16
    vocab_size = 32
    n_layer = 2
    n_head = 2
    n_embd = 16
    dropout = 0.0
    bias = True


def build(torch):
    nn = torch.nn
    F = torch.nn.functional
    config = GPTConfig()
    config.vocab_size = make_data()[1]

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            # key, query, value projections for all heads, but in a batch
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            # output projection
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            # regularization
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                 .view(1, 1, config.block_size, config.block_size))

        def forward(self, x):
            B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
            # calculate query, key, values for all heads in batch and move head forward to be the batch dim
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
            y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
            # output projection
            y = self.resid_dropout(self.c_proj(y))
            return y

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=nn.LayerNorm(config.n_embd),
            ))
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # https://paperswithcode.com/method/weight-tying
            self.apply(self._init_weights)
            # apply special scaled init to the residual projections, per GPT-2 paper
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
            print("number of parameters: %.2fK" % (sum(p.numel() for p in self.parameters()) / 1e3,))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= self.config.block_size, f"Cannot forward sequence of length {t}"
            pos = torch.arange(0, t, dtype=torch.long, device=device)  # shape (t)
            tok_emb = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)
            pos_emb = self.transformer.wpe(pos)  # position embeddings of shape (t, n_embd)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is not None:
                logits = self.lm_head(x)
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                # inference-time mini-optimization: only forward the lm_head on the very last position
                logits = self.lm_head(x[:, [-1], :])  # note: using list [-1] to preserve the time dim
                loss = None
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters()}
            param_dict = {pn: p for pn, p in param_dict.items() if p.requires_grad}
            # any parameter that is 2D will be weight decayed, otherwise no: all biases and layernorms don't.
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, temperature=1.0):
            for _ in range(max_new_tokens):
                idx_cond = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
                logits, _ = self(idx_cond)
                logits = logits[:, -1, :] / temperature
                probs = F.softmax(logits, dim=-1)
                _, idx_next = torch.topk(probs, k=1, dim=-1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return {"model": GPT(config)}


def run(torch, modules, data, steps, batch_size=4, learning_rate=3e-3, warmup_iters=3, eval_iters=2):
    tokens, _ = data
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = modules["model"]
    model.to(device)
    block_size = model.config.block_size
    split = int(0.8 * len(tokens))
    train_data, val_data = torch.from_numpy(tokens[:split]), torch.from_numpy(tokens[split:])
    offsets = np.random.default_rng(7)

    def get_batch(split):
        data = train_data if split == "train" else val_data
        ix = offsets.integers(0, len(data) - block_size, size=(batch_size,))
        x = torch.stack([data[i:i + block_size] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
        return x.to(device), y.to(device)

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                X, Y = get_batch(split)
                logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    # learning rate decay scheduler (cosine with warmup)
    def get_lr(it):
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        decay_ratio = (it - warmup_iters) / (steps - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # coeff ranges 0..1
        return learning_rate / 10 + coeff * (learning_rate - learning_rate / 10)

    optimizer = model.configure_optimizers(0.1, learning_rate, (0.9, 0.95))
    losses, evaluations = [], []
    X, Y = get_batch("train")
    for iter_num in range(steps):
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num % 5 == 0:
            estimate = estimate_loss()
            evaluations.append([estimate["train"].item(), estimate["val"].item()])
            print(f"step {iter_num}: train loss {estimate['train']:.4f}, val loss {estimate['val']:.4f}")
        logits, loss = model(X, Y)
        X, Y = get_batch("train")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        print(f"iter {iter_num}: loss {loss.item():.4f}, lr {lr:.2e}")

    model.eval()
    generated = model.generate(torch.zeros((1, 1), dtype=torch.long, device=device), max_new_tokens=6)
    return {"losses": losses, "evaluations": evaluations, "generated": generated[0].tolist(),
            "state": {k: v.cpu().numpy() for k, v in model.state_dict().items()}}


if __name__ == "__main__":
    import sys
    if "--metajit" in sys.argv:  # the one change a PyTorch program needs: its import
        import metajit as torch
    else:
        import torch
    torch.manual_seed(0)
    run(torch, build(torch), make_data(), steps=10)
