"""Jittor and tinygrad in the benchmarks, when they are installed (`make bench-frameworks` installs both).

Each framework is wrapped in one adapter with the same small surface, so a benchmark script adds a row per
installed framework without knowing its API:

- `array(values, requires_grad=False)`: a tensor holding a numpy array, already computed (made outside the timed
  region, as metajit's `mj.array` inputs are);
- `finish(results)`: forces lazy results; a timed run ends when it returns (both frameworks are lazy, like metajit);
- `to_numpy(result)`;
- the benchmarked operators (`chain`, `softmax`, `layer_norm`, `total`, `transpose`, `cumsum`, `matmul`,
  `conv2d`, `conv2d_backward`), each written the way that framework's documentation writes it;
- `training_step(model_name, images, labels)`: a function running one SGD-with-momentum step of the small CNN or
  ResNet-18 (CIFAR stem) and returning the loss as a float.

Both run with their defaults on the CPU, with two settings made before their import unless the caller set them:
Jittor gets `nvcc_path=""` (these benchmarks are CPU benchmarks, and with CUDA's compiler on the PATH but no GPU it
fails to import) and `use_mkl=0` when its own oneDNN build has not been downloaded (its import would try to fetch
it); tinygrad gets `DEV=CPU`, and `CC=clang-14` where Debian's clang has no unversioned `clang`. After every
Jittor call the thread's floating-point environment is reset, since loading Jittor's kernels turns on
flush-to-zero (see restore_floating_point_environment).
"""
import ctypes
import ctypes.util
import glob
import os
import shutil

import numpy as np

CONV_PADDING = 1  # the benchmarks' 3x3 convolutions keep the image size


def restore_floating_point_environment():
    """The default floating-point environment (IEEE subnormals, round to nearest) for the calling thread.

    Jittor builds its kernels with -Ofast, and loading one turns on flush-to-zero and denormals-are-zero for the
    thread that loads it: metajit's and PyTorch's runs in the same process would then flush subnormals too."""
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.fesetenv(ctypes.c_void_p(-1))  # glibc's FE_DFL_ENV


def jittor_oneDNN_downloaded():
    """Whether Jittor's own oneDNN build is in its cache (Jittor downloads it on first import)."""
    cache = os.path.join(os.path.expanduser("~"), ".cache", "jittor", "mkl")
    return bool(glob.glob(os.path.join(cache, "dnnl*", "lib", "libmkldnn.so")))


class Jittor:
    label = "Jittor"

    def __init__(self):
        os.environ.setdefault("nvcc_path", "")
        if not jittor_oneDNN_downloaded():
            os.environ.setdefault("use_mkl", "0")
        os.environ.setdefault("log_silent", "1")
        import jittor
        self.jt = jittor
        with_oneDNN = os.environ.get("use_mkl", "1") == "1"
        self.description = (f"Jittor {jittor.__version__} (CPU, "
                            + ("with its oneDNN build" if with_oneDNN else
                               "without oneDNN: `use_mkl=0`, its oneDNN build was not downloaded") + ")")

    def array(self, values, requires_grad=False):
        tensor = self.jt.array(values)
        if not requires_grad:
            tensor = tensor.stop_grad()
        tensor.sync()
        restore_floating_point_environment()
        return tensor

    def finish(self, results):
        self.jt.sync(list(results))
        restore_floating_point_environment()

    def to_numpy(self, result):
        return result.numpy()

    def chain(self, a, b):
        return [self.jt.nn.relu(self.jt.exp(a) * b + 1) * 2]

    def softmax(self, x):
        return [self.jt.nn.softmax(x, dim=-1)]

    def layer_norm(self, x):
        return [self.jt.nn.layer_norm(x, [x.shape[-1]])]

    def total(self, x):
        return [x.sum()]

    def transpose(self, x):
        return [x.transpose()]

    def cumsum(self, x):
        return [self.jt.cumsum(x, -1)]

    def matmul(self, a, b):
        return [self.jt.matmul(a, b)]

    def conv2d(self, x, w):
        return [self.jt.nn.conv2d(x, w, padding=CONV_PADDING)]

    def conv2d_backward(self, x, w, g):
        y = self.jt.nn.conv2d(x, w, padding=CONV_PADDING)
        gx, gw = self.jt.grad((y * g).sum(), [x, w])
        return [y, gx, gw]

    def training_step(self, model_name, images, labels):
        jt, nn = self.jt, self.jt.nn
        jt.set_global_seed(0)
        layers = Layers(conv=lambda c_in, c_out, size, stride, padding: nn.Conv2d(
                            c_in, c_out, size, stride, padding, bias=model_name == "small_cnn"),
                        batch_norm=nn.BatchNorm2d, linear=nn.Linear, relu=nn.relu,
                        max_pool=lambda x: nn.max_pool2d(x, 2), spatial_mean=lambda x: x.mean((2, 3)),
                        flatten=lambda x: x.reshape(x.shape[0], -1))
        model = build_model(model_name, layers)
        parameters = [parameter for module in layers.modules for parameter in module.parameters()]
        optimizer = jt.optim.SGD(parameters, lr=0.01, momentum=0.9)
        images, labels = jt.array(images), jt.array(labels.astype(np.int32))

        def step():
            loss = nn.cross_entropy_loss(model(images), labels)
            optimizer.step(loss)  # backward and update in one call, Jittor's usual loop
            value = loss.item()
            restore_floating_point_environment()
            return value
        return step


class Tinygrad:
    label = "tinygrad"

    def __init__(self):
        os.environ.setdefault("DEV", "CPU")
        if "CC" not in os.environ and shutil.which("clang") is None and shutil.which("clang-14") is not None:
            os.environ["CC"] = "clang-14"
        import tinygrad
        from tinygrad import Tensor
        self.tinygrad, self.Tensor = tinygrad, Tensor
        version = getattr(tinygrad, "__version__", None)
        if version is None:
            from importlib.metadata import version as installed_version
            version = installed_version("tinygrad")
        self.description = f"tinygrad {version} ({os.environ['DEV']}, default settings: no BEAM search)"

    def array(self, values, requires_grad=False):
        # tinygrad (0.14) takes gradients of any tensor: Tensor.gradient needs no requires_grad flag
        return self.Tensor(np.ascontiguousarray(values)).realize()

    def finish(self, results):
        self.Tensor.realize(*results)

    def to_numpy(self, result):
        return result.numpy()

    def chain(self, a, b):
        return [((a.exp() * b + 1).relu() * 2)]

    def softmax(self, x):
        return [x.softmax(-1)]

    def layer_norm(self, x):
        return [x.layernorm(-1, eps=1e-5)]

    def total(self, x):
        return [x.sum()]

    def transpose(self, x):
        return [x.T.contiguous()]

    def cumsum(self, x):
        return [x.cumsum(-1)]

    def matmul(self, a, b):
        return [a @ b]

    def conv2d(self, x, w):
        return [x.conv2d(w, padding=CONV_PADDING)]

    def conv2d_backward(self, x, w, g):
        y = x.conv2d(w, padding=CONV_PADDING)
        gx, gw = (y * g).sum().gradient(x, w)
        return [y, gx, gw]

    def training_step(self, model_name, images, labels):
        from tinygrad import Context, TinyJit, nn
        Tensor = self.Tensor
        Tensor.manual_seed(0)
        layers = Layers(conv=lambda c_in, c_out, size, stride, padding: nn.Conv2d(
                            c_in, c_out, size, stride, padding, bias=model_name == "small_cnn"),
                        batch_norm=nn.BatchNorm2d, linear=nn.Linear, relu=Tensor.relu,
                        max_pool=lambda x: x.max_pool2d(2), spatial_mean=lambda x: x.mean((2, 3)),
                        flatten=lambda x: x.flatten(1))
        model = build_model(model_name, layers)
        optimizer = nn.optim.SGD(nn.state.get_parameters(layers.modules), lr=0.01, momentum=0.9)
        images, labels = Tensor(images).realize(), Tensor(labels.astype(np.int32)).realize()

        @TinyJit  # tinygrad's training examples capture the step once and replay it
        def jitted_step(images, labels):
            optimizer.zero_grad()
            loss = model(images).sparse_categorical_crossentropy(labels).backward()
            optimizer.step()
            return loss.realize()

        def step():
            with Context(TRAINING=1):  # batch statistics and running-stat updates, as PyTorch's train()
                return jitted_step(images, labels).item()
        return step


# --------------------------------------------------------------------------------- the models, framework-free
class Layers:
    """One framework's layer constructors and functions; remembers every module made, for the optimizer."""

    def __init__(self, conv, batch_norm, linear, relu, max_pool, spatial_mean, flatten):
        self.modules = []
        self.relu, self.max_pool, self.spatial_mean, self.flatten = relu, max_pool, spatial_mean, flatten
        self._conv, self._batch_norm, self._linear = conv, batch_norm, linear

    def _made(self, module):
        self.modules.append(module)
        return module

    def conv(self, c_in, c_out, size, stride=1, padding=0):
        return self._made(self._conv(c_in, c_out, size, stride, padding))

    def batch_norm(self, channels):
        return self._made(self._batch_norm(channels))

    def linear(self, features_in, features_out):
        return self._made(self._linear(features_in, features_out))


def build_model(name, layers):
    """The benchmark's models, laid out as bench/training_benchmark.py's PyTorch ones: a callable model."""
    return small_cnn(layers) if name == "small_cnn" else resnet18_cifar(layers)


def small_cnn(layers):
    """2 x (conv 3x3 + ReLU + 2x2 max pool), then linear 1568 -> 128, ReLU, linear 128 -> 10; input 1x28x28."""
    first, second = layers.conv(1, 16, 3, 1, 1), layers.conv(16, 32, 3, 1, 1)
    hidden, output = layers.linear(32 * 7 * 7, 128), layers.linear(128, 10)

    def forward(x):
        x = layers.max_pool(layers.relu(first(x)))
        x = layers.max_pool(layers.relu(second(x)))
        return output(layers.relu(hidden(layers.flatten(x))))
    return forward


def resnet18_cifar(layers, num_classes=10):
    """ResNet-18 with the CIFAR stem (3x3 conv, no pooling), basic blocks [2, 2, 2, 2], no conv biases."""
    stem, stem_norm = layers.conv(3, 64, 3, 1, 1), layers.batch_norm(64)
    blocks, channels = [], 64
    for planes, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)]:
        shortcut = None
        if stride != 1 or channels != planes:
            shortcut = (layers.conv(channels, planes, 1, stride, 0), layers.batch_norm(planes))
        blocks.append((layers.conv(channels, planes, 3, stride, 1), layers.batch_norm(planes),
                       layers.conv(planes, planes, 3, 1, 1), layers.batch_norm(planes), shortcut))
        channels = planes
    classifier = layers.linear(512, num_classes)

    def forward(x):
        x = layers.relu(stem_norm(stem(x)))
        for conv1, norm1, conv2, norm2, shortcut in blocks:
            identity = x if shortcut is None else shortcut[1](shortcut[0](x))
            x = layers.relu(norm2(conv2(layers.relu(norm1(conv1(x))))) + identity)
        return classifier(layers.spatial_mean(x))
    return forward


# ------------------------------------------------------------------------------------------------- discovery
def installed_frameworks(names=("jittor", "tinygrad")):
    """Adapters of the frameworks that import; prints why each missing one was left out. METAJIT_BENCH_OTHERS
    (a comma-separated list, empty for none) overrides `names`."""
    chosen = os.environ.get("METAJIT_BENCH_OTHERS")
    if chosen is not None:
        names = [name.strip().lower() for name in chosen.split(",") if name.strip()]
    adapters = []
    for name in names:
        adapter_class = {"jittor": Jittor, "tinygrad": Tinygrad}.get(name)
        if adapter_class is None:
            print(f"METAJIT_BENCH_OTHERS names {name!r}: only jittor and tinygrad are known")
            continue
        try:
            adapters.append(adapter_class())
        except ImportError:
            print(f"{adapter_class.label} is not installed: no {adapter_class.label} rows "
                  "(`make bench-frameworks` installs it)")
        except Exception as error:  # a framework that is installed but cannot start here: say why, go on
            print(f"{adapter_class.label} is installed but failed to start, no {adapter_class.label} rows: "
                  f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")
    return adapters
