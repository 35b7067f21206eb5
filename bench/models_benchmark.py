"""Model-code benchmark: five models written the way PyTorch users write them, run unchanged by metajit, PyTorch
eager and torch.compile in one run (issue 43 part 3).

Each model is written once, as PyTorch code taking the framework module as the argument `torch` (PyTorch itself or
metajit): a nanoGPT-style decoder (fused qkv projection split and viewed into heads, a causal mask from a `tril`
buffer, tied embedding), an LSTM language model (LSTMCell unrolled in a Python loop, truncated backpropagation,
gradient clipping), a style-transfer network (reflection padding, instance norm, nearest upsampling + convolution,
Gram-matrix loss), MobileNetV2 (depthwise and pointwise convolutions, BatchNorm, ReLU6) and a small U-Net
(concatenated skips, transposed convolutions). The frameworks start from the same weights and batches; their losses
and outputs are compared before anything is timed. For metajit the report adds planning time and kernels per step
and the three largest kernels of one profiled step. Writes bench/MODELS.md.

    python bench/models_benchmark.py [--models gpt,lstm,style_transfer,mobilenet,unet] [--steps N] [--no-compile]
"""
import argparse
import collections
import math
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# run_benchmarks finds metajit, also in a bare checkout
from run_benchmarks import cpu_jiffies, cpu_model, mj, other_load  # noqa: E402
from training_benchmark import timed_steps  # noqa: E402

WARMUP_STEPS = 3          # untimed steps of each framework before the timed rounds
COMPILE_WARMUP_STEPS = 3  # torch.compile: the first call compiles, the next ones may still recompile
BATCHES = 4               # distinct batches each program cycles through
PLANNING_SHARE_TARGET = 0.10
QUIET_SHARE = 0.15        # other processes' share of the CPUs under which the host counts as quiet
PHASE_ATTEMPTS = 3        # tries of a timed phase that other processes disturbed; the least disturbed one is kept
PROFILE_STEPS = 3         # steps under mj.profile(), reported per step: one step alone shows any hiccup as a cliff


# ------------------------------------------------------------------------------------------------------ the models
# Each builder takes the framework module and a size dict and returns the model; nothing in it knows which framework
# it runs on.

def build_gpt(torch, size):
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, width, heads, context):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(width, 3 * width)  # query, key and value in one product
            self.projection = nn.Linear(width, width)
            self.register_buffer("causal", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

        def forward(self, x):
            batch, steps, width = x.size()
            query, key, value = self.qkv(x).split(width, dim=2)
            query = query.view(batch, steps, self.heads, width // self.heads).transpose(1, 2)
            key = key.view(batch, steps, self.heads, width // self.heads).transpose(1, 2)
            value = value.view(batch, steps, self.heads, width // self.heads).transpose(1, 2)
            scores = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(key.size(-1)))
            scores = scores.masked_fill(self.causal[:, :, :steps, :steps] == 0, float("-inf"))
            attention = F.softmax(scores, dim=-1)
            y = (attention @ value).transpose(1, 2).contiguous().view(batch, steps, width)
            return self.projection(y)

    class Block(nn.Module):
        def __init__(self, width, heads, context):
            super().__init__()
            self.attention_norm = nn.LayerNorm(width)
            self.attention = CausalSelfAttention(width, heads, context)
            self.mlp_norm = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

        def forward(self, x):
            x = x + self.attention(self.attention_norm(x))
            return x + self.mlp(self.mlp_norm(x))

    class GPT(nn.Module):
        def __init__(self, vocabulary, width, heads, blocks, context):
            super().__init__()
            self.token_embedding = nn.Embedding(vocabulary, width)
            self.position_embedding = nn.Embedding(context, width)
            self.blocks = nn.ModuleList([Block(width, heads, context) for _ in range(blocks)])
            self.final_norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocabulary, bias=False)
            self.token_embedding.weight = self.head.weight  # tied input and output embeddings

        def forward(self, tokens):
            positions = torch.arange(0, tokens.size(1), dtype=torch.long, device=tokens.device)
            x = self.token_embedding(tokens) + self.position_embedding(positions)
            for block in self.blocks:
                x = block(x)
            return self.head(self.final_norm(x))

    return GPT(size["vocabulary"], size["width"], size["heads"], size["blocks"], size["context"])


def build_lstm(torch, size):
    nn = torch.nn

    class LSTMLanguageModel(nn.Module):
        def __init__(self, vocabulary, embedding, hidden):
            super().__init__()
            self.hidden_size = hidden
            self.encoder = nn.Embedding(vocabulary, embedding)
            self.cell = nn.LSTMCell(embedding, hidden)
            self.decoder = nn.Linear(hidden, vocabulary)

        def initial_state(self, batch):
            weight = self.decoder.weight
            return weight.new_zeros(batch, self.hidden_size), weight.new_zeros(batch, self.hidden_size)

        def forward(self, tokens, state):
            embedded = self.encoder(tokens)
            hidden, cell = state
            outputs = []
            for step in range(tokens.size(1)):
                hidden, cell = self.cell(embedded[:, step], (hidden, cell))
                outputs.append(hidden)
            return self.decoder(torch.stack(outputs, dim=1)), (hidden, cell)

    return LSTMLanguageModel(size["vocabulary"], size["embedding"], size["hidden"])


def build_style_transfer(torch, size):
    nn, F = torch.nn, torch.nn.functional

    class PaddedConvolution(nn.Module):
        """Reflection padding instead of zeros, so the image borders do not darken."""

        def __init__(self, inputs, outputs, kernel_size, stride=1):
            super().__init__()
            self.pad = nn.ReflectionPad2d(kernel_size // 2)
            self.convolution = nn.Conv2d(inputs, outputs, kernel_size, stride)

        def forward(self, x):
            return self.convolution(self.pad(x))

    class ResidualBlock(nn.Module):
        def __init__(self, channels):
            super().__init__()
            self.first = PaddedConvolution(channels, channels, 3)
            self.first_norm = nn.InstanceNorm2d(channels, affine=True)
            self.second = PaddedConvolution(channels, channels, 3)
            self.second_norm = nn.InstanceNorm2d(channels, affine=True)

        def forward(self, x):
            y = F.relu(self.first_norm(self.first(x)))
            return x + self.second_norm(self.second(y))

    class UpsampleConvolution(nn.Module):
        """Nearest upsampling followed by a convolution: no checkerboard artefacts of a transposed convolution."""

        def __init__(self, inputs, outputs, kernel_size):
            super().__init__()
            self.convolution = PaddedConvolution(inputs, outputs, kernel_size)

        def forward(self, x):
            return self.convolution(F.interpolate(x, scale_factor=2, mode="nearest"))

    class TransformerNetwork(nn.Module):
        def __init__(self, channels, residual_blocks):
            super().__init__()
            self.encoder = nn.Sequential(
                PaddedConvolution(3, channels, 9), nn.InstanceNorm2d(channels, affine=True), nn.ReLU(),
                PaddedConvolution(channels, 2 * channels, 3, stride=2), nn.InstanceNorm2d(2 * channels, affine=True),
                nn.ReLU(),
                PaddedConvolution(2 * channels, 4 * channels, 3, stride=2),
                nn.InstanceNorm2d(4 * channels, affine=True), nn.ReLU())
            self.residuals = nn.Sequential(*[ResidualBlock(4 * channels) for _ in range(residual_blocks)])
            self.decoder = nn.Sequential(
                UpsampleConvolution(4 * channels, 2 * channels, 3), nn.InstanceNorm2d(2 * channels, affine=True),
                nn.ReLU(),
                UpsampleConvolution(2 * channels, channels, 3), nn.InstanceNorm2d(channels, affine=True), nn.ReLU(),
                PaddedConvolution(channels, 3, 9))

        def forward(self, images):
            return torch.sigmoid(self.decoder(self.residuals(self.encoder(images))))

    return TransformerNetwork(size["channels"], size["residual_blocks"])


def build_mobilenet(torch, size):
    nn, F = torch.nn, torch.nn.functional

    class InvertedResidual(nn.Module):
        def __init__(self, inputs, outputs, stride, expansion):
            super().__init__()
            hidden = inputs * expansion
            self.use_residual = stride == 1 and inputs == outputs
            layers = []
            if expansion != 1:  # pointwise expansion
                layers += [nn.Conv2d(inputs, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True)]
            layers += [  # depthwise 3x3, then the linear pointwise projection
                nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                nn.ReLU6(inplace=True),
                nn.Conv2d(hidden, outputs, 1, bias=False), nn.BatchNorm2d(outputs)]
            self.layers = nn.Sequential(*layers)

        def forward(self, x):
            if self.use_residual:
                return x + self.layers(x)
            return self.layers(x)

    class MobileNetV2(nn.Module):
        # expansion, output channels, repeats, first stride
        settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 2, 2)]

        def __init__(self, classes, width):
            super().__init__()
            channels = width
            layers = [nn.Conv2d(3, channels, 3, 2, 1, bias=False), nn.BatchNorm2d(channels), nn.ReLU6(inplace=True)]
            for expansion, outputs, repeats, stride in self.settings:
                for index in range(repeats):
                    layers.append(InvertedResidual(channels, outputs, stride if index == 0 else 1, expansion))
                    channels = outputs
            layers += [nn.Conv2d(channels, 4 * channels, 1, bias=False), nn.BatchNorm2d(4 * channels),
                       nn.ReLU6(inplace=True)]
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Linear(4 * channels, classes)

        def forward(self, images):
            x = F.adaptive_avg_pool2d(self.features(images), 1)
            return self.classifier(torch.flatten(x, 1))

    return MobileNetV2(size["classes"], size["width"])


def build_unet(torch, size):
    nn = torch.nn

    def double_convolution(inputs, outputs):
        return nn.Sequential(
            nn.Conv2d(inputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs), nn.ReLU(inplace=True),
            nn.Conv2d(outputs, outputs, 3, padding=1, bias=False), nn.BatchNorm2d(outputs), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        def __init__(self, classes, channels, levels):
            super().__init__()
            widths = [channels * 2 ** level for level in range(levels + 1)]
            self.down = nn.ModuleList()
            inputs = 3
            for width in widths[:-1]:
                self.down.append(double_convolution(inputs, width))
                inputs = width
            self.pool = nn.MaxPool2d(2)
            self.bottleneck = double_convolution(widths[-2], widths[-1])
            self.up = nn.ModuleList()
            self.up_convolutions = nn.ModuleList()
            for width in reversed(widths[:-1]):
                self.up.append(nn.ConvTranspose2d(2 * width, width, 2, stride=2))
                self.up_convolutions.append(double_convolution(2 * width, width))
            self.head = nn.Conv2d(widths[0], classes, 1)

        def forward(self, images):
            skips = []
            x = images
            for down in self.down:
                x = down(x)
                skips.append(x)
                x = self.pool(x)
            x = self.bottleneck(x)
            for up, convolution, skip in zip(self.up, self.up_convolutions, reversed(skips)):
                x = convolution(torch.cat([skip, up(x)], dim=1))
            return self.head(x)

    return UNet(size["classes"], size["channels"], size["levels"])


# -------------------------------------------------------------------------------------- losses, data, optimizers
# A loss takes (torch, model, inputs, targets, carried) and returns (loss, carried): `carried` is what one step hands
# the next, the LSTM's hidden state; None for the others.

def token_loss(torch, model, inputs, targets, carried):
    logits = model(inputs)
    return torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1)), carried


def truncated_backpropagation_loss(torch, model, inputs, targets, state):
    if state is None:
        state = model.initial_state(inputs.size(0))
    state = tuple(value.detach() for value in state)  # gradients stop at the batch boundary
    logits, state = model(inputs, state)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1)), state


def gram_matrix(features):
    batch, channels, height, width = features.size()
    flat = features.view(batch, channels, height * width)
    return flat.bmm(flat.transpose(1, 2)) / (channels * height * width)


def style_loss(torch, model, inputs, targets, carried):
    """Content (the input image) plus style (the Gram matrix of the style image)."""
    F = torch.nn.functional
    output = model(inputs)
    content = F.mse_loss(output, inputs)
    style = F.mse_loss(gram_matrix(output), gram_matrix(targets).expand(output.size(0), -1, -1))
    return content + 10.0 * style, carried


def class_loss(torch, model, inputs, targets, carried):
    return torch.nn.functional.cross_entropy(model(inputs), targets), carried


def gpt_batches(size, rng):
    tokens = rng.integers(0, size["vocabulary"], (BATCHES, size["batch"], size["context"] + 1)).astype(np.int64)
    return [(chunk[:, :-1].copy(), chunk[:, 1:].copy()) for chunk in tokens]


def lstm_batches(size, rng):
    """Consecutive windows of one token stream, so the carried state continues the text."""
    steps = size["steps"]
    stream = rng.integers(0, size["vocabulary"], (size["batch"], BATCHES * steps + 1)).astype(np.int64)
    return [(stream[:, index * steps:(index + 1) * steps].copy(), stream[:, index * steps + 1:(index + 1) * steps + 1]
             .copy()) for index in range(BATCHES)]


def style_batches(size, rng):
    shape = (size["batch"], 3, size["image"], size["image"])
    style = rng.random((1, 3, size["image"], size["image"]), dtype=np.float32)
    return [(rng.random(shape, dtype=np.float32), style) for _ in range(BATCHES)]


def image_class_batches(size, rng):
    shape = (size["batch"], 3, size["image"], size["image"])
    return [(rng.standard_normal(shape, dtype=np.float32),
             rng.integers(0, size["classes"], size["batch"]).astype(np.int64)) for _ in range(BATCHES)]


def segmentation_batches(size, rng):
    shape = (size["batch"], 3, size["image"], size["image"])
    return [(rng.standard_normal(shape, dtype=np.float32),
             rng.integers(0, size["classes"], (size["batch"], size["image"], size["image"])).astype(np.int64))
            for _ in range(BATCHES)]


def clip_gradients(torch, model):
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)


# build(torch, size) -> model; batches(size, rng) -> [(inputs, targets) as numpy]; loss as above; prediction(torch,
# model, inputs) -> the inference output; optimizer(torch, parameters); before_update(torch, model) runs between
# backward and the optimizer's step (or None); size: the benchmark's; tiny_size: the test's (tests/python).
Model = collections.namedtuple("Model", "build batches loss prediction optimizer before_update size tiny_size "
                                        "description")


def call_model(torch, model, inputs):
    return model(inputs)


MODELS = {
    "gpt": Model(
        build=build_gpt, batches=gpt_batches, loss=token_loss, prediction=call_model,
        optimizer=lambda torch, parameters: torch.optim.AdamW(parameters, lr=3e-4, weight_decay=0.1),
        before_update=None,
        size=dict(vocabulary=1024, width=256, heads=4, blocks=2, context=128, batch=8),
        tiny_size=dict(vocabulary=64, width=32, heads=4, blocks=2, context=16, batch=2),
        description="2 blocks, width 256, 4 heads, vocabulary 1024, tied embedding; 8 x 128 tokens; AdamW"),
    "lstm": Model(
        build=build_lstm, batches=lstm_batches, loss=truncated_backpropagation_loss,
        prediction=lambda torch, model, inputs: model(inputs, model.initial_state(inputs.size(0)))[0],
        optimizer=lambda torch, parameters: torch.optim.SGD(parameters, lr=1.0), before_update=clip_gradients,
        size=dict(vocabulary=1000, embedding=128, hidden=256, steps=35, batch=32),
        tiny_size=dict(vocabulary=50, embedding=16, hidden=32, steps=5, batch=3),
        description="Embedding 1000 x 128, LSTMCell 128 -> 256 unrolled over 35 steps, Linear; batch 32, truncated "
                    "backpropagation, gradient clipping; SGD"),
    "style_transfer": Model(
        build=build_style_transfer, batches=style_batches, loss=style_loss, prediction=call_model,
        optimizer=lambda torch, parameters: torch.optim.Adam(parameters, lr=1e-3), before_update=None,
        size=dict(channels=16, residual_blocks=3, image=64, batch=4),
        tiny_size=dict(channels=4, residual_blocks=1, image=16, batch=2),
        description="reflection-padded convolutions (16-32-64 channels), instance norm, 3 residual blocks, 2 nearest "
                    "upsamplings + convolution; 4 x 3 x 64 x 64; Gram-matrix loss; Adam"),
    "mobilenet": Model(
        build=build_mobilenet, batches=image_class_batches, loss=class_loss, prediction=call_model,
        optimizer=lambda torch, parameters: torch.optim.SGD(parameters, lr=0.05, momentum=0.9, weight_decay=4e-5),
        before_update=None,
        size=dict(classes=10, width=32, image=64, batch=16),
        # Not smaller: BatchNorm over 1x1 maps of 2 images amplifies float32 rounding about 1000x, in PyTorch too.
        tiny_size=dict(classes=5, width=8, image=32, batch=8),
        description="stem + 8 inverted residual blocks (depthwise 3x3, pointwise 1x1, BatchNorm, ReLU6) to 64 "
                    "channels; 16 x 3 x 64 x 64, 10 classes; SGD with momentum"),
    "unet": Model(
        build=build_unet, batches=segmentation_batches, loss=class_loss, prediction=call_model,
        optimizer=lambda torch, parameters: torch.optim.Adam(parameters, lr=1e-3), before_update=None,
        size=dict(classes=4, channels=16, levels=2, image=64, batch=4),
        tiny_size=dict(classes=3, channels=4, levels=2, image=16, batch=2),
        description="2 levels (16-32-64 channels), BatchNorm, concatenated skips, transposed convolutions; "
                    "4 x 3 x 64 x 64, 4 classes per pixel; Adam"),
}
SHORT_NAMES = {"gpt": "nanoGPT-style decoder", "lstm": "LSTM language model", "style_transfer": "style transfer",
               "mobilenet": "MobileNetV2", "unet": "U-Net"}


class Program:
    """One model's training loop and inference as a PyTorch user writes them, in the framework `torch` (PyTorch or
    metajit), cycling through the same batches in every framework. `weights` (numpy arrays by state_dict key) makes
    the frameworks start from the same point; `compiled` runs the model through torch.compile."""

    def __init__(self, torch, name, size, batches, weights=None, compiled=False):
        self.torch, self.spec = torch, MODELS[name]
        self.model = self.spec.build(torch, size)
        if weights is not None:
            self.model.load_state_dict({key: torch.from_numpy(value.copy()) for key, value in weights.items()})
        self.forward = torch.compile(self.model) if compiled else self.model
        self.optimizer = self.spec.optimizer(torch, self.model.parameters())
        self.batches = [tuple(torch.from_numpy(array) for array in batch) for batch in batches]
        self.position = 0
        self.carried = None

    def next_batch(self):
        batch = self.batches[self.position % len(self.batches)]
        self.position += 1
        return batch

    def train_step(self):
        inputs, targets = self.next_batch()
        self.model.train()
        loss, self.carried = self.spec.loss(self.torch, self.forward, inputs, targets, self.carried)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.spec.before_update:
            self.spec.before_update(self.torch, self.model)
        self.optimizer.step()
        return loss.item()

    def infer(self):
        inputs, _ = self.next_batch()
        self.model.eval()
        with self.torch.no_grad():
            return self.spec.prediction(self.torch, self.forward, inputs).numpy()


def initial_weights(torch, name, size):
    """PyTorch's freshly initialised weights (and buffers) as numpy arrays, seeded."""
    torch.manual_seed(0)
    model = MODELS[name].build(torch, size)
    return {key: value.detach().numpy().copy() for key, value in model.state_dict().items()}


def batches_for(name, size):
    return MODELS[name].batches(size, np.random.default_rng(1))


def relative_difference(ours, reference):
    ours, reference = np.asarray(ours, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    return float(np.max(np.abs(ours - reference)) / max(np.max(np.abs(reference)), 1e-30))


# --------------------------------------------------------------------------------------------------- measurement
class Contender:
    """One framework's program in the timed rounds: its step times, and for metajit the counters over those steps."""

    def __init__(self, label, step, is_metajit=False):
        self.label, self.step, self.is_metajit = label, step, is_metajit
        self.times = []
        self.counters = collections.Counter()

    def timed(self, count):
        before = mj.stats() if self.is_metajit else None
        self.times += timed_steps(self.step, count)
        if self.is_metajit:
            after = mj.stats()
            for key in ("planning_seconds", "kernels_launched", "library_calls", "kernels_compiled"):
                self.counters[key] += after[key] - before[key]

    def per_step(self, key):
        return self.counters[key] / len(self.times)


def wait_for_quiet_machine(limit_seconds, window_seconds=2.0, busy_share=QUIET_SHARE):
    """Waits (at most `limit_seconds`) for a window in which other processes use under `busy_share` of the machine:
    on a shared 2-core host a compile or a test run beside the benchmark slows every framework by a different
    amount. Returns the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_seconds:
        before, own_before = cpu_jiffies(), os.times()
        time.sleep(window_seconds)
        load = other_load(before, cpu_jiffies(), own_before, os.times())
        if load is None or load < busy_share:
            break
    return time.perf_counter() - start


class RecordedSteps:
    """metajit's step function with its planning and compiles recorded for every call, timed or not: the first
    step, the second (which plans again once the optimizer holds state) and all later ones together. A plan that
    changes after many steady steps shows here even when no timed step caught it."""

    def __init__(self, step):
        self.step = step
        self.calls = []  # (wall seconds, planning seconds, kernels compiled) of each call

    def __call__(self):
        before = mj.stats()
        start = time.perf_counter()
        result = self.step()
        seconds = time.perf_counter() - start
        after = mj.stats()
        self.calls.append((seconds, after["planning_seconds"] - before["planning_seconds"],
                           int(after["kernels_compiled"] - before["kernels_compiled"])))
        return result

    def summary(self):
        later = self.calls[2:]
        return {"first": self.calls[0], "second": self.calls[1] if len(self.calls) > 1 else None,
                "later_steps": len(later), "later_seconds": sum(call[0] for call in later),
                "later_planning": sum(call[1] for call in later), "later_compiled": sum(call[2] for call in later),
                "later_worst_planning": max((call[1] for call in later), default=0.0)}


def compile_failure(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:160] if text else ''}"


def measure_mode(torch, name, mode, steps, use_compile, quiet_wait):
    """Times training steps (mode "train") or inference (mode "infer") of the model in the three frameworks, after
    checking metajit's results against PyTorch's from the same weights and batches."""
    spec = MODELS[name]
    size = spec.size
    weights, batches = initial_weights(torch, name, size), batches_for(name, size)
    ours = Program(mj, name, size, batches, weights)
    eager = Program(torch, name, size, batches, weights)
    result = {"check": {}, "compile": None}
    run = (lambda program: program.train_step) if mode == "train" else (lambda program: program.infer)

    # The first steps: both frameworks' results are compared.
    ours_step = RecordedSteps(run(ours))
    ours_first, eager_first = ours_step(), run(eager)()
    result["check"]["first"] = relative_difference(ours_first, eager_first)
    if mode == "train":  # the second loss comes after one update: it checks gradients and the optimizer too
        result["check"]["second"] = relative_difference(ours_step(), run(eager)())
    contenders = [Contender("metajit", ours_step, is_metajit=True), Contender("PyTorch eager", run(eager))]

    if use_compile:
        try:
            compiled = Program(torch, name, size, batches, weights, compiled=True)
            start = time.perf_counter()
            compiled_first = run(compiled)()
            result["compile"] = {"seconds": time.perf_counter() - start,
                                 "check": relative_difference(compiled_first, eager_first)}
            for _ in range(COMPILE_WARMUP_STEPS):
                run(compiled)()
            contenders.append(Contender("torch.compile", run(compiled)))
        except Exception as error:  # noqa: BLE001  (any failure of torch.compile becomes "n/a" with its reason)
            result["compile"] = {"error": compile_failure(error)}
            print(f"  torch.compile failed: {result['compile']['error']}", flush=True)

    for contender in contenders:
        for _ in range(WARMUP_STEPS):
            contender.step()
    # The frameworks take turns in rounds of one untimed and two timed steps (bench/training_benchmark.py's scheme):
    # drift and bursts of load on the shared host hit all alike, and the untimed step refills the caches the other
    # framework's step has just evicted.
    # A phase during which other processes took more than QUIET_SHARE of the CPUs is run again (the host is shared).
    best = None
    for _ in range(PHASE_ATTEMPTS):
        wait_for_quiet_machine(quiet_wait)
        for contender in contenders:
            contender.times, contender.counters = [], collections.Counter()
        jiffies_before, own_before = cpu_jiffies(), os.times()
        while len(contenders[0].times) < steps:
            for contender in contenders:
                contender.step()
                contender.timed(2)
        load = other_load(jiffies_before, cpu_jiffies(), own_before, os.times())
        if best is None or (load or 0.0) < best[0]:
            best = (load or 0.0, [(contender.times, contender.counters) for contender in contenders])
        if load is None or load <= QUIET_SHARE:
            break
        print(f"  other processes used {load:.0%} of the CPUs; timing again", flush=True)
    result["other_load"] = best[0]
    for contender, (times, counters) in zip(contenders, best[1]):
        contender.times, contender.counters = times, counters
    with mj.profile() as profile:
        for _ in range(PROFILE_STEPS):
            contenders[0].step()
    result["profile"] = [{"name": entry["name"].replace(HERE + os.sep, ""),
                          "launches": entry["launches"] / PROFILE_STEPS, "seconds": entry["seconds"] / PROFILE_STEPS}
                         for entry in profile.entries[:3]]
    result["profile_total"] = profile.total_seconds / PROFILE_STEPS
    result["steps"] = ours_step.summary()
    result["contenders"] = {contender.label: contender for contender in contenders}
    return result


# -------------------------------------------------------------------------------------------------------- report
def milliseconds(seconds):
    return f"{seconds * 1e3:.1f}"


def median_or_none(contenders, label):
    contender = contenders.get(label)
    return statistics.median(contender.times) if contender and contender.times else None


def later_planning_share(steps):
    """Planning's share of metajit's wall time over the steps after the second (steps 1 and 2 plan from scratch)."""
    return steps["later_planning"] / steps["later_seconds"] if steps["later_seconds"] else 0.0


def mode_table(results, mode):
    lines = ["| model | metajit ms | PyTorch eager ms | torch.compile ms | eager / metajit | compile / metajit | "
             "metajit planning ms per timed step (share) | metajit kernels + library calls per step | "
             "metajit step 1: seconds, planning, compiled | step 2: planning | steps 3 on: planning share, worst "
             "step's planning, kernels compiled | other processes' CPU share |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|"]
    for name, by_mode in results.items():
        result = by_mode[mode]
        contenders = result["contenders"]
        ours, eager = median_or_none(contenders, "metajit"), median_or_none(contenders, "PyTorch eager")
        compiled = median_or_none(contenders, "torch.compile")
        metajit = contenders["metajit"]
        planning = metajit.per_step("planning_seconds")
        steps = result["steps"]
        first_seconds, first_planning, first_compiled = steps["first"]
        lines.append(
            f"| {SHORT_NAMES[name]} | {milliseconds(ours)} | {milliseconds(eager)} | "
            f"{milliseconds(compiled) if compiled else 'n/a'} | {eager / ours:.2f} | "
            f"{f'{compiled / ours:.2f}' if compiled else 'n/a'} | {planning * 1e3:.2f} ({planning / ours:.0%}) | "
            f"{metajit.per_step('kernels_launched'):.0f} + {metajit.per_step('library_calls'):.0f} | "
            f"{first_seconds:.2f} s, {first_planning:.3f} s, {first_compiled} | "
            f"{steps['second'][1]:.3f} s | "
            f"{later_planning_share(steps):.1%} of {steps['later_steps']} steps, "
            f"{steps['later_worst_planning'] * 1e3:.1f} ms, {steps['later_compiled']} | "
            f"{result['other_load']:.0%} |")
    return lines


def check_lines(results):
    lines = ["| model | train: first loss | train: loss after one update | infer: output | "
             "torch.compile train / infer against eager |", "|---|---:|---:|---:|---|"]
    for name, by_mode in results.items():
        train, infer = by_mode["train"], by_mode["infer"]

        def compiled_check(result):
            compiled = result["compile"]
            if compiled is None:
                return "not run"
            return "n/a" if "error" in compiled else f"{compiled['check']:.1e}"
        lines.append(f"| {SHORT_NAMES[name]} | {train['check']['first']:.1e} | {train['check']['second']:.1e} | "
                     f"{infer['check']['first']:.1e} | {compiled_check(train)} / {compiled_check(infer)} |")
    return lines


def target_lines(results):
    lines = ["| model | trains at least as fast as PyTorch eager | ... as torch.compile | "
             f"planning at most {PLANNING_SHARE_TARGET:.0%} of the steps after the second (train / infer) |",
             "|---|---|---|---|"]
    for name, by_mode in results.items():
        contenders = by_mode["train"]["contenders"]
        ours, eager = median_or_none(contenders, "metajit"), median_or_none(contenders, "PyTorch eager")
        compiled = median_or_none(contenders, "torch.compile")
        shares = [later_planning_share(by_mode[mode]["steps"]) for mode in ("train", "infer")]
        planning_met = all(share <= PLANNING_SHARE_TARGET for share in shares)
        lines.append(
            f"| {SHORT_NAMES[name]} | {'met' if ours <= eager else 'not met'} ({eager / ours:.2f}x) | "
            + (f"{'met' if ours <= compiled else 'not met'} ({compiled / ours:.2f}x)" if compiled else "n/a")
            + f" | {'met' if planning_met else 'not met'} ({shares[0]:.1%} / {shares[1]:.1%}) |")
    return lines


def profile_lines(results):
    lines = ["| model | mode | kernels' total ms | largest kernels: name (launches, ms) |", "|---|---|---:|---|"]
    for name, by_mode in results.items():
        for mode in ("train", "infer"):
            result = by_mode[mode]
            entries = "<br>".join(f"`{entry['name']}` ({entry['launches']:.0f}, {entry['seconds'] * 1e3:.2f})"
                                  for entry in result["profile"])
            lines.append(f"| {SHORT_NAMES[name]} | {mode} | {result['profile_total'] * 1e3:.1f} | {entries} |")
    return lines


def compile_notes(results):
    notes = []
    for name, by_mode in results.items():
        for mode in ("train", "infer"):
            compiled = by_mode[mode]["compile"]
            if compiled and "error" in compiled:
                notes.append(f"- {SHORT_NAMES[name]}, {mode}: torch.compile failed: {compiled['error']}")
            elif compiled:
                notes.append(f"- {SHORT_NAMES[name]}, {mode}: torch.compile's first call took "
                             f"{compiled['seconds']:.1f} s (inductor's disk cache may hold code from earlier "
                             "runs)")
    return notes


def write_report(arguments, torch, results):
    threads = torch.get_num_threads()
    lines = [
        "# Model-code benchmark", "",
        f"Generated by `python bench/models_benchmark.py{' ' if arguments.command else ''}{arguments.command}` on "
        f"{cpu_model()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}; PyTorch {torch.__version__} "
        f"({threads} threads) eager and torch.compile (inductor), Python {platform.python_version()}. "
        "Each model is PyTorch code written once and run with `torch` bound to PyTorch or to metajit (for "
        "torch.compile the script wraps the model, `torch.compile(model)`, as training scripts do: inductor compiles "
        "its forward and backward, the loss and the optimizer run eagerly); every "
        "framework starts from PyTorch's initial weights and cycles through the same "
        f"{BATCHES} batches. Medians of {arguments.steps} timed steps after {WARMUP_STEPS} warm-up steps "
        f"(torch.compile: its compiling first call and {COMPILE_WARMUP_STEPS} more are untimed); the frameworks take "
        "turns of one untimed and two timed steps. A training step is forward, loss, backward, optimizer step and "
        "`loss.item()`; an inference run is the forward pass in evaluation mode under `no_grad` ending with the "
        "output in numpy. Ratios above 1 mean metajit is faster. The host is shared: before each timed phase the "
        f"run waits (at most {arguments.quiet_wait:.0f} s) for other processes to use under {QUIET_SHARE:.0%} of the "
        f"CPUs, times the phase again (at most {PHASE_ATTEMPTS} tries) when they used more during it, keeps the "
        "least disturbed try, and shows the share they used in the tables.", "",
        "## Models", ""]
    lines += [f"- **{SHORT_NAMES[name]}** (`{name}`): {MODELS[name].description}" for name in results]
    lines += ["", "## Training step", ""] + mode_table(results, "train")
    lines += ["", "## Inference", ""] + mode_table(results, "infer")
    lines += ["", "\"planning\" is `mj.stats()['planning_seconds']` over the timed steps (its share of metajit's "
              "median step in brackets); kernels are generated kernels launched (`kernels_launched`) and library calls "
              "oneDNN calls (`library_calls`), per timed step. The step columns count every metajit step of the "
              "phase, timed or not (checks, warm-up, untimed turns, profiled): step 1 is the first in this process "
              "and plans every kernel, compiling those the kernel cache does not hold; step 2 plans again, with the "
              "optimizer's state (training) or the values step 1 left behind; \"steps 3 on\" is planning's share of "
              "their wall time, the most one of them spent planning, and the kernels they compiled: in a steady loop "
              "the plan cache serves them all and none compiles.",
              "", "## Targets", ""] + target_lines(results)
    lines += ["", "## Agreement with PyTorch eager", "",
              "Largest absolute difference divided by the largest absolute PyTorch value: of the first training loss, "
              "of the loss after one update (which checks gradients and the optimizer), of the first inference "
              "output, and torch.compile's first loss or output against eager.", ""] + check_lines(results)
    lines += ["", "## Where metajit's time goes", "",
              f"The three largest entries of `mj.profile()` over {PROFILE_STEPS} steady steps, per step (generated "
              "kernels and library calls, timed on the host); \"kernels' total\" is all entries, the rest of a step "
              "is recording the graph in Python, planning and the run loop.", ""] + profile_lines(results)
    notes = compile_notes(results)
    if notes:
        lines += ["", "## torch.compile", ""] + notes
    with open(arguments.output, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    print(f"wrote {arguments.output}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--steps", type=int, default=20, help="timed steps per model, mode and framework")
    parser.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    parser.add_argument("--quiet-wait", type=float, default=60.0,
                        help="seconds to wait, before each timed phase, for other processes to leave the CPUs idle")
    parser.add_argument("--output", default=os.path.join(HERE, "MODELS.md"))
    arguments = parser.parse_args()
    arguments.command = " ".join(sys.argv[1:])
    try:
        import torch
    except ImportError:
        sys.exit("the model benchmark compares against PyTorch, which is not installed")
    torch.set_num_threads(os.cpu_count())
    results = {}
    for name in arguments.models.split(","):
        if name not in MODELS:
            sys.exit(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
        results[name] = {}
        for mode in ("train", "infer"):
            print(f"{name}, {mode} ...", flush=True)
            result = measure_mode(torch, name, mode, arguments.steps, arguments.compile, arguments.quiet_wait)
            results[name][mode] = result
            print("  " + ", ".join(f"{label} {statistics.median(contender.times) * 1e3:.1f} ms"
                                   for label, contender in result["contenders"].items())
                  + f"; check {result['check']}", flush=True)
    write_report(arguments, torch, results)


if __name__ == "__main__":
    main()
