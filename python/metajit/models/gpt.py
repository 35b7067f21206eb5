"""A GPT-style decoder-only language model in the shape of minGPT / nanoGPT: token and position embeddings,
blocks of LayerNorm -> causal self-attention -> LayerNorm -> MLP (GELU) with residual connections, a final
LayerNorm and an lm_head whose weight is the token embedding's (weight tying).

The attribute names, module order and initialisation are nanoGPT's (transformer.wte, transformer.wpe,
transformer.drop, transformer.h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, transformer.ln_f,
lm_head), so a nanoGPT checkpoint's model state dict loads with load_state_dict(strict=True), and the GPT-2
layout of Hugging Face checkpoints maps onto it the way nanoGPT's from_pretrained does (their Conv1D weights
are transposed).

Must not: download weights or tokenizers; change a name or the initialisation without checking against the torch
reference in tests/python/test_models_torchvision.py.
"""
import math
from dataclasses import dataclass

from .. import arange, cat, multinomial, nn, no_grad, topk, where
from ..nn import functional as F

__all__ = ["GPTConfig", "CausalSelfAttention", "MLP", "Block", "GPT", "gpt"]


@dataclass
class GPTConfig:
    """nanoGPT's configuration and its defaults (GPT-2 small with the vocabulary padded to a multiple of 64)."""

    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True  # biases in the Linears and LayerNorms (GPT-2 has them; without is a little faster)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where each position attends to itself and earlier positions only: one Linear
    makes queries, keys and values (c_attn), heads are split off the channel dim, and c_proj mixes the heads."""

    def __init__(self, config):
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise ValueError(f"CausalSelfAttention: n_embd ({config.n_embd}) must be divisible by n_head "
                             f"({config.n_head})")
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        batch, time, channels = x.size()
        query, key, value = self.c_attn(x).split(self.n_embd, dim=2)
        head_size = channels // self.n_head
        # (batch, time, channels) -> (batch, heads, time, head size)
        query = query.view(batch, time, self.n_head, head_size).transpose(1, 2)
        key = key.view(batch, time, self.n_head, head_size).transpose(1, 2)
        value = value.view(batch, time, self.n_head, head_size).transpose(1, 2)
        # attn_dropout is the probability used here (the fused attention applies it to the attention weights).
        y = F.scaled_dot_product_attention(query, key, value, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(batch, time, channels)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """Linear to 4x the width, GELU, Linear back, dropout."""

    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """One pre-norm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT(config): forward(idx, targets=None) -> (logits, loss).

    idx holds token indices of shape (batch, time) with time <= config.block_size. With targets (same shape;
    -1 marks positions to ignore) the logits cover every position and loss is their mean cross entropy;
    without, only the last position's logits are computed (batch, 1, vocab) and loss is None, as in nanoGPT."""

    def __init__(self, config):
        super().__init__()
        if config.vocab_size is None or config.block_size is None:
            raise ValueError("GPT: config.vocab_size and config.block_size must be set")
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # Weight tying: one Parameter is both the input embedding and the output projection; the state dict
        # lists it under both names, parameters() once.
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        # GPT-2's scaled initialisation of the projections that write into the residual stream.
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def get_num_params(self, non_embedding=True):
        """Parameter count; non_embedding leaves out the position embedding (the token embedding is counted,
        since it is also lm_head's weight)."""
        count = sum(parameter.numel() for parameter in self.parameters())
        if non_embedding:
            count -= self.transformer.wpe.weight.numel()
        return count

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        batch, time = idx.size()
        if time > self.config.block_size:
            raise ValueError(f"Cannot forward sequence of length {time}, block size is only "
                             f"{self.config.block_size}")
        positions = arange(0, time, dtype="int64")
        token_embeddings = self.transformer.wte(idx)
        position_embeddings = self.transformer.wpe(positions)
        x = self.transformer.drop(token_embeddings + position_embeddings)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            # Generation needs only the last position; the list index keeps the time dim.
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss

    def crop_block_size(self, block_size):
        """Shrinks the context length (e.g. after loading a checkpoint trained with a longer one)."""
        if block_size > self.config.block_size:
            raise ValueError(f"crop_block_size: {block_size} is longer than the current block size "
                             f"{self.config.block_size}")
        self.config.block_size = block_size
        self.transformer.wpe.weight = nn.Parameter(self.transformer.wpe.weight[:block_size].detach())
        self.transformer.wpe.num_embeddings = block_size

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type=None):
        """AdamW with weight decay on the matrices (embeddings and Linear weights) and none on biases and
        LayerNorm parameters, nanoGPT's grouping; device_type is accepted for its signature and unused."""
        from ..optim import AdamW
        trainable = [parameter for _, parameter in self.named_parameters() if parameter.requires_grad]
        groups = [{"params": [parameter for parameter in trainable if parameter.ndim >= 2],
                   "weight_decay": weight_decay},
                  {"params": [parameter for parameter in trainable if parameter.ndim < 2], "weight_decay": 0.0}]
        return AdamW(groups, lr=learning_rate, betas=betas)

    @no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        """Appends max_new_tokens sampled tokens to idx (batch, time), each from the softmax of the last
        position's logits divided by temperature, optionally limited to the top_k most likely tokens; the
        context is cropped to the last block_size tokens. Call model.eval() first (dropout)."""
        for _ in range(max_new_tokens):
            context = idx if idx.size(1) <= self.config.block_size else idx[:, -self.config.block_size:]
            logits, _ = self(context)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                values, _ = topk(logits, min(top_k, logits.size(-1)))
                logits = where(logits < values[:, [-1]], float("-inf"), logits)
            probabilities = F.softmax(logits, dim=-1)
            idx = cat((idx, multinomial(probabilities, num_samples=1)), dim=1)
        return idx


def gpt(config=None, **fields):
    """GPT(config), where config is a GPTConfig, or GPTConfig(**fields) built from keywords (vocab_size,
    block_size, n_layer, n_head, n_embd, dropout, bias)."""
    if config is not None and fields:
        raise TypeError("gpt: pass either a GPTConfig or its fields as keywords, not both")
    return GPT(config if config is not None else GPTConfig(**fields))
