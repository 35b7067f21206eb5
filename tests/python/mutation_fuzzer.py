"""Seeded differential fuzzer of programs that mutate tensors, run with PyTorch and with metajit and compared value by
value and gradient by gradient (issue 39). It must never decide what the right answer is: PyTorch's is.

A program is a short list of statements over named tensors (t0, t1, ... ; r0, ... for values read in the middle),
each one line (or a `with lib.no_grad():` block) of plain Python written against a module `lib` that is either
`torch` or `mj`: tensors made from numpy literals (float32, 1-4 dims, extents 1-5), elementwise out-of-place ops,
views (basic slicing, select, narrow, view, reshape, transpose, permute, t, expand, unsqueeze, squeeze, flatten;
views of views), in-place methods and `+=`-style operators on bases and on views, `x[key] = value` with integer
and slice keys, detach(), `.data` reads and in-place writes, leaves that require grad, statements under no_grad,
values read in the middle (`read(x)`, a sync point), clone(), plain aliasing (`y = x`), backward() in the middle
and a final `loss.backward()` when some tensor requires grad.

`generate(seed)` builds the program from random.Random(seed) while running it on PyTorch, statement by statement,
so every choice fits the shapes and flags PyTorch has at that point. When PyTorch raises at a statement (an
in-place op on a leaf that requires grad, on an expanded view, a backward after a saved tensor was modified in
place, ...) the program sometimes ends there: metajit must raise at that statement too (any exception). Otherwise
the statement is dropped and another is drawn. A backward that reads a saved value changed under another version
counter than the one it was saved under (written through `.data`, or saved through `.data` and written through
its source) raises in neither library, but PyTorch's gradient reads the changed storage where metajit's reads the
value as recorded (docs/mutation.md, "Differences from PyTorch that remain"). A shadow run with every `.data`
replaced by `.detach()` finds those backwards (PyTorch's version counter raises there; `data_dependent_backward`):
such a program is kept, and metajit must still not raise there, but at the end only whether each `.grad` is None is
compared, not its value, and no optimizer-style step (which would carry a gradient into a value) follows it.

`run_case(seed)` runs the program once with each library (same numpy literals) and compares, at the end, every
named tensor's shape, dtype, requires_grad and value (and is_leaf where PyTorch's tensor requires grad), every value
read in the middle, and the .grad of every PyTorch leaf that requires grad (None must match None; the value too
unless a backward reads values changed through `.data`, above). A failure carries a self-contained reproducer
(`import metajit as mj`, `import torch`), shrunk by dropping statements while the same failure remains. The
comparison itself never reads a metajit value before the program has ended.
"""
import os
import random
import re
import sys
import time
import traceback
import warnings

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
if os.path.join(_ROOT, "python") not in sys.path:
    sys.path.append(os.path.join(_ROOT, "python"))  # after PYTHONPATH, which may name another build
os.environ.setdefault("METAJIT_CACHE_DIR", os.path.join(_ROOT, "build", "test-kernel-cache"))

import torch  # noqa: E402  (a test-only dependency: tools/install_dependencies.sh)
import metajit as mj  # noqa: E402

# float32 tolerances. The absolute one is scaled by the program's largest magnitude (at least 1) and by the square
# root of its largest tensor's size: a sum of terms that cancel (the loss, a gradient) keeps the rounding of its terms
# in an order neither library documents.
VALUE_RTOL, VALUE_ATOL = 1e-5, 1e-6
GRAD_RTOL, GRAD_ATOL = 1e-5, 1e-6
MAX_NUMEL = 48                       # no tensor in a program gets bigger (keeps literals and reproducers short)
MIN_STATEMENTS, MAX_STATEMENTS = 6, 18
KEEP_ERROR = 0.3                     # chance that a statement PyTorch rejects ends the program (else it is redrawn)
VERSION_ERROR = "modified by an inplace operation"
SHRINK_SECONDS = 10.0                # time a failure's shrinking may take

torch.set_num_threads(1)


# ============================================================================================== programs
class Statement:
    """One step: `text` (Python using `lib`, `np`, `read`; one line or a no_grad block) and `kind`, a label for
    reports ("inplace:add_", "view:transpose", "setitem", "backward", ...)."""

    def __init__(self, text, kind):
        self.text, self.kind = text, kind


class Program:
    """The statements of a seed; `expected_error` is the message PyTorch raises at the last statement, or None."""

    def __init__(self, seed, statements, expected_error=None):
        self.seed, self.statements, self.expected_error = seed, list(statements), expected_error

    def source(self):
        return "\n".join(statement.text for statement in self.statements)


class Failure:
    """`summary` names the class of the failure without tensor names or numbers (for grouping), `message` the
    details, `reproducer` a self-contained Python program."""

    def __init__(self, seed, summary, message, reproducer=""):
        self.seed, self.summary, self.message, self.reproducer = seed, summary, message, reproducer
        self.mode = "mutation"

    def __str__(self):
        text = f"mutation fuzz case seed={self.seed}: {self.message}"
        if self.reproducer:
            text += "\n--- reproducer ---\n" + self.reproducer
        return text


def read(x):
    """A value as a numpy array: for metajit a sync point in the middle of the program."""
    if isinstance(x, torch.Tensor):
        return x.detach().numpy().copy()
    return x.numpy().copy()


def settle(namespace):
    """Reads the grad_fn of every PyTorch tensor in `namespace`. PyTorch rebuilds a view's grad_fn when it is read
    after its base was written in place, and whether it has been rebuilt changes what later ops on the view do (an
    in-place write to a view not rebuilt since its base gained history raises as if the view were a leaf that
    requires grad). The generator inspects tensors while it draws statements, which rebuilds them; every PyTorch run
    of a program reads them all after each statement, so all runs see the state the generator saw (seeds 300165 and
    302917 raised in the comparison run only)."""
    for value in list(namespace.values()):
        if isinstance(value, torch.Tensor):
            try:
                value.grad_fn
            except RuntimeError:  # a view PyTorch refuses to rebuild (made under no_grad): it raises on use anyway
                pass


def execute(statements, lib):
    """Runs the statements with `lib` (torch or mj); returns (namespace, index of the statement that raised or None,
    the exception or None)."""
    namespace = {"np": np, "lib": lib, "read": read}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for index, statement in enumerate(statements):
            try:
                exec(compile(statement.text, f"<mutation fuzz statement {index}>", "exec"), namespace)
            except Exception as error:  # noqa: BLE001  (PyTorch's errors are part of the program; metajit's too)
                return namespace, index, error
            if lib is torch:
                settle(namespace)
    return namespace, None, None


def error_text(error):
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"[:300]


def shadow(statements):
    """The statements with every `.data` replaced by `.detach()`: the same aliasing, but PyTorch's version counter
    sees the writes, so a backward that would silently use a modified saved tensor raises instead."""
    return [Statement(re.sub(r"\.data\b", ".detach()", statement.text), statement.kind) for statement in statements]


def data_dependent_backward(statements, torch_index=None):
    """The index of the first statement at which the shadow run raises where PyTorch's own run (which raised at
    `torch_index`, None if nowhere) did not, or None. At a backward that is PyTorch's version error: the backward
    reads a saved value changed under another version counter (see the module docstring), so PyTorch's gradients
    from then on are not metajit's. Anything else the shadow run raises at is counted too (its later backwards go
    unchecked)."""
    if not any(".data" in statement.text for statement in statements):
        return None
    _, index, error = execute(shadow(statements), torch)
    if error is None or (torch_index is not None and index >= torch_index):
        return None
    return index


# ============================================================================================== generator
from graph_fuzzer import _broadcasts_to, _numel  # noqa: E402  (shape helpers shared with the meta-op fuzzer)


def _holds(predicate, tensor):
    """predicate(tensor), False where PyTorch refuses to answer (e.g. about a view made under no_grad whose base
    was then modified with grad mode on: PyTorch raises on most uses of it)."""
    try:
        return bool(predicate(tensor))
    except RuntimeError:
        return False


def _small(tensor):
    """Whether exp() of the tensor stays far from float32 overflow."""
    return _holds(lambda value: value.numel() and float(value.detach().abs().max()) < 4, tensor)


def _number(value):
    """A literal of two decimals (both libraries round it to the same float32)."""
    return repr(round(float(value), 2))


class Generator:
    """Builds one program from a seed, running each statement on PyTorch as it is chosen (self.namespace)."""

    def __init__(self, seed):
        self.seed = seed
        self.rng = random.Random(seed)
        self.statements = []
        self.namespace = {"np": np, "lib": torch, "read": read}
        self.counter = 0
        self.expected_error = None
        self.data_dependent = False  # a backward read values changed through .data (data_dependent_backward)

    # ------------------------------------------------------------------ helpers
    def name(self, prefix="t"):
        self.counter += 1
        return f"{prefix}{self.counter - 1}"

    def tensors(self, predicate=lambda tensor: True):
        """Names of the PyTorch tensors now defined (recent ones first) that satisfy `predicate`."""
        names = [name for name, value in self.namespace.items()
                 if isinstance(value, torch.Tensor) and re.fullmatch(r"t\d+", name) and _holds(predicate, value)]
        return sorted(names, key=lambda name: -int(name[1:]))

    def pick(self, predicate=lambda tensor: True):
        names = self.tensors(predicate)
        if not names:
            return None
        # recent tensors are preferred, so chains of views and mutations form
        weights = [1.0 / (1 + position) ** 0.7 for position in range(len(names))]
        return self.rng.choices(names, weights)[0]

    def shape_of(self, name):
        return tuple(self.namespace[name].shape)

    def random_shape(self):
        while True:
            shape = tuple(self.rng.randint(1, 5) for _ in range(self.rng.choice([1, 1, 2, 2, 2, 3, 3, 4])))
            if _numel(shape) <= MAX_NUMEL:
                return shape

    def literal(self, shape, requires_grad=False):
        values = np.array([round(self.rng.uniform(-2, 2), 2) for _ in range(_numel(shape))]).reshape(shape)
        text = repr(values.tolist()) if shape else _number(float(values))
        return f"lib.tensor(np.array({text}, dtype=np.float32){', requires_grad=True' if requires_grad else ''})"

    def scalar(self, nonzero=False):
        while True:
            value = round(self.rng.uniform(-2, 2), 2)
            if not nonzero or abs(value) >= 0.25:
                return _number(value)

    def partner(self, target_shape, exact=True):
        """An operand for a tensor of `target_shape`: an existing tensor or a fresh literal whose shape broadcasts to
        it (`exact`: the result keeps target_shape, as an in-place op needs) or with it."""
        if exact:
            fits = lambda tensor: _broadcasts_to(tuple(tensor.shape), target_shape)  # noqa: E731
        else:
            def fits(tensor):
                try:
                    return _numel(np.broadcast_shapes(tuple(tensor.shape), target_shape)) <= MAX_NUMEL
                except ValueError:
                    return False
        if self.rng.random() < 0.6:
            existing = self.pick(fits)
            if existing is not None:
                return existing
        # a suffix of the target's shape with some extents made 1
        rank = self.rng.randint(0, len(target_shape))
        shape = tuple(1 if self.rng.random() < 0.3 else extent for extent in target_shape[len(target_shape) - rank:])
        return self.literal(shape)

    def shares_memory(self, target, operand):
        """Whether the tensor named `operand` shares memory with the one named by `target` (a name or a `.data`):
        an in-place op reading it then gives PyTorch's result in its own copy order wherever PyTorch's overlap
        check cannot tell (a column broadcast over its own matrix); metajit reads operands first."""
        written, source = self.namespace.get(target.split(".")[0]), self.namespace.get(operand)
        return isinstance(source, torch.Tensor) and isinstance(written, torch.Tensor) and \
            source.untyped_storage().data_ptr() == written.untyped_storage().data_ptr()

    def operand(self, target_shape, exact=True):
        """A scalar or a tensor operand."""
        return self.scalar() if self.rng.random() < 0.35 else self.partner(target_shape, exact)

    def random_key(self, shape):
        """Integer and slice keys for the leading dims of `shape` (never empty)."""
        parts = []
        for extent in shape[:self.rng.randint(1, len(shape))]:
            choice = self.rng.random()
            if choice < 0.35:
                index = self.rng.randrange(extent)
                parts.append(str(index - extent if self.rng.random() < 0.3 else index))
            elif choice < 0.45:
                parts.append(":")
            else:
                start = self.rng.randrange(extent)
                stop = self.rng.randint(start + 1, extent)
                step = self.rng.choice([1, 1, 1, 2])
                text = (str(start) if start else "") + ":" + (str(stop) if stop != extent else "")
                parts.append(text + (f":{step}" if step != 1 else ""))
        return ", ".join(parts)

    def new_shape(self, shape):
        """Another shape of the same number of elements (for view/reshape), sometimes with a -1."""
        numel = _numel(shape)
        factors = []
        remaining = numel
        while remaining > 1 and len(factors) < 3:
            divisors = [d for d in range(2, remaining + 1) if remaining % d == 0]
            factor = self.rng.choice(divisors)
            factors.append(factor)
            remaining //= factor
        if remaining > 1:
            factors.append(remaining)
        if self.rng.random() < 0.3:
            factors.insert(self.rng.randint(0, len(factors)), 1)
        if not factors:
            factors = [1]
        self.rng.shuffle(factors)
        if factors and self.rng.random() < 0.3:
            factors[self.rng.randrange(len(factors))] = -1
        return factors

    # ------------------------------------------------------------------ statements (each returns (text, kind))
    def op_create(self):
        shape = self.random_shape()
        requires_grad = self.rng.random() < 0.5
        return f"{self.name()} = {self.literal(shape, requires_grad)}", "create"

    def op_unary(self):
        source = self.pick()
        if source is None:
            return None
        value = self.namespace[source]
        options = ["neg", "tanh", "sigmoid", "relu", "scale", "clamp", "square"]
        if _small(value):
            options.append("exp")
        op = self.rng.choice(options)
        if op == "scale":
            expression = f"{source} * {self.scalar(nonzero=True)} + {self.scalar()}"
        elif op == "clamp":
            expression = f"{source}.clamp({self.scalar()}, 2.5)"
        elif op == "square":
            expression = f"{source} * {source}"
        else:
            expression = f"{source}.{op}()"
        return f"{self.name()} = {expression}", f"unary:{op}"

    def op_binary(self):
        source = self.pick()
        if source is None:
            return None
        other = self.partner(self.shape_of(source), exact=False)
        op = self.rng.choice(["+", "-", "*", "/"])
        if op == "/":
            return f"{self.name()} = {source} / ({other} * {other} + 1)", "binary:/"
        return f"{self.name()} = {source} {op} {other}", f"binary:{op}"

    def op_reduce(self):
        source = self.pick(lambda tensor: tensor.dim() >= 2)
        if source is None:
            return None
        dim = self.rng.randrange(len(self.shape_of(source)))
        keepdim = ", keepdim=True" if self.rng.random() < 0.5 else ""
        return f"{self.name()} = {source}.sum({dim}{keepdim})", "reduce:sum"

    def op_view(self, under_no_grad=False):
        # PyTorch gives a view made under no_grad of a tensor that requires grad requires_grad=True and is_leaf=True
        # (a quirk of its view tracking) while no gradient reaches the base: not generated
        source = self.pick((lambda tensor: not tensor.requires_grad) if under_no_grad else (lambda tensor: True))
        if source is None:
            return None
        value = self.namespace[source]
        shape = self.shape_of(source)
        ndim = len(shape)
        options = ["unsqueeze", "expand"]
        if ndim >= 1:
            options += ["slice", "slice", "select", "narrow", "permute"]
        if _holds(lambda tensor: tensor.is_contiguous(), value):
            options += ["view", "reshape"] + (["flatten"] if ndim >= 2 else [])
        if ndim >= 2:
            options += ["transpose", "transpose"] + (["t"] if ndim == 2 else [])
        if 1 in shape:
            options.append("squeeze")
        op = self.rng.choice(options)
        if op == "slice":
            expression = f"{source}[{self.random_key(shape)}]"
        elif op == "select":
            dim = self.rng.randrange(ndim)
            expression = f"{source}.select({dim}, {self.rng.randrange(-shape[dim], shape[dim])})"
        elif op == "narrow":
            dim = self.rng.randrange(ndim)
            start = self.rng.randrange(shape[dim])
            expression = f"{source}.narrow({dim}, {start}, {self.rng.randint(1, shape[dim] - start)})"
        elif op in ("view", "reshape"):
            expression = f"{source}.{op}({', '.join(map(str, self.new_shape(shape)))})"
        elif op == "flatten":
            expression = f"{source}.flatten()" if self.rng.random() < 0.5 else f"{source}.flatten({ndim - 2})"
        elif op == "transpose":
            first, second = self.rng.sample(range(ndim), 2)
            if self.rng.random() < 0.3:
                first -= ndim
            expression = f"{source}.transpose({first}, {second})"
        elif op == "t":
            expression = f"{source}.t()"
        elif op == "permute":
            order = list(range(ndim))
            self.rng.shuffle(order)
            expression = f"{source}.permute({', '.join(map(str, order))})"
        elif op == "expand":
            sizes = [self.rng.randint(2, 3) if extent == 1 and self.rng.random() < 0.7 else
                     (-1 if self.rng.random() < 0.3 else extent) for extent in shape]
            if self.rng.random() < 0.4 or not sizes:
                sizes.insert(0, self.rng.randint(1, 3))
            result = [shape[position - (len(sizes) - ndim)] if size == -1 else size for position, size in
                      enumerate(sizes)]
            if _numel(result) > MAX_NUMEL:
                return None
            expression = f"{source}.expand({', '.join(map(str, sizes))})"
        elif op == "unsqueeze":
            expression = f"{source}.unsqueeze({self.rng.randint(-ndim - 1, ndim)})"
        else:  # squeeze
            ones = [dim for dim, extent in enumerate(shape) if extent == 1]
            expression = f"{source}.squeeze()" if self.rng.random() < 0.3 else \
                f"{source}.squeeze({self.rng.choice(ones)})"
        return f"{self.name()} = {expression}", f"view:{op}"

    def inplace_text(self, target):
        """An in-place method call on the expression `target` (a name, a `.data`, ...) and its kind."""
        value = self.namespace[target.split(".")[0]]
        shape = tuple(value.shape)
        options = ["add_", "sub_", "mul_", "div_", "clamp_", "zero_", "fill_", "copy_", "masked_fill_", "neg_",
                   "relu_", "sigmoid_", "tanh_"]
        if _small(value):
            options.append("exp_")
        method = self.rng.choice(options)
        expanded = any(stride == 0 and extent > 1 for stride, extent in zip(value.stride(), shape))
        if method in ("masked_fill_", "fill_", "zero_") and expanded:
            # PyTorch leaves these unchecked on an expanded view (masked_fill_: which element wins is
            # unspecified); metajit refuses every write to one (docs/mutation.md). neg_ is refused by both.
            method = "neg_"
        if method in ("add_", "sub_", "mul_"):
            argument = self.operand(shape)
            if self.shares_memory(target, argument) and argument != target.split(".")[0]:
                argument = self.scalar()
            if argument == target.split(".")[0]:
                # x.mul_(x) on a view whose base a write made require grad: PyTorch 2.13 calls such a view a leaf
                # and refuses (its grad_fn is regenerated lazily), while x.mul_(2) works. Out of scope here.
                argument = self.scalar()
        elif method == "div_":
            if self.rng.random() < 0.5:
                argument = self.scalar(nonzero=True)
            else:
                other = self.partner(shape)
                argument = f"{other} * {other} + 1"
        elif method == "clamp_":
            low = self.scalar()
            argument = f"min={low}" if self.rng.random() < 0.3 else f"{low}, {_number(float(low) + 1.5)}"
        elif method == "fill_":
            argument = self.scalar()
        elif method == "copy_":
            argument = self.partner(shape)
            if self.shares_memory(target, argument) and argument != target.split(".")[0]:
                argument = self.scalar()  # see shares_memory
        elif method == "masked_fill_":
            argument = f"{self.partner(shape)} > {self.scalar()}, {self.scalar()}"
        else:
            argument = ""
        return f"{target}.{method}({argument})", f"inplace:{method}"

    def op_inplace(self):
        target = self.pick()
        return None if target is None else self.inplace_text(target)

    def op_augmented(self):
        target = self.pick()
        if target is None:
            return None
        op = self.rng.choice(["+=", "-=", "*=", "/="])
        argument = self.scalar(nonzero=True) if op == "/=" else self.operand(self.shape_of(target))
        if self.shares_memory(target, argument) and argument != target:
            argument = self.scalar()
        return f"{target} {op} {argument}", f"augmented:{op}"

    def setitem_text(self, target):
        shape = self.shape_of(target.split(".")[0])
        if not shape:
            return None
        key = self.random_key(shape)
        slot = np.zeros(shape)[eval(f"np.s_[{key}]")].shape  # basic indexing: numpy's shape is PyTorch's
        value = self.scalar() if self.rng.random() < 0.4 else self.partner(slot)
        if self.shares_memory(target, value):  # see shares_memory: write a number instead
            value = self.scalar()
        return f"{target}[{key}] = {value}", "setitem"

    def op_setitem(self):
        target = self.pick(lambda tensor: tensor.dim() >= 1)
        return None if target is None else self.setitem_text(target)

    def op_detach(self):
        source = self.pick()
        if source is None:
            return None
        suffix = ".requires_grad_()" if self.rng.random() < 0.3 else ""
        return f"{self.name()} = {source}.detach(){suffix}", "detach" + suffix

    def op_data_read(self):
        source = self.pick()
        return None if source is None else (f"{self.name()} = {source}.data", "data-read")

    def op_data_write(self):
        target = self.pick()
        if target is None:
            return None
        if self.rng.random() < 0.4 and self.shape_of(target):
            text, _ = self.setitem_text(f"{target}.data")
            return text, "data-write:setitem"
        text, kind = self.inplace_text(f"{target}.data")
        return text, "data-write:" + kind.split(":")[1]

    def op_clone(self):
        source = self.pick()
        return None if source is None else (f"{self.name()} = {source}.clone()", "clone")

    def op_alias(self):
        source = self.pick()
        return None if source is None else (f"{self.name()} = {source}", "alias")

    def op_read(self):
        source = self.pick()
        return None if source is None else (f"{self.name('r')} = read({source})", "read")

    def op_requires_grad(self):
        # not on a view nor on a tensor with views: PyTorch gives a view made before its base's requires_grad_()
        # requires_grad=True and is_leaf=True but no gradient (nor to the base through it), a quirk left out
        bases = {id(tensor._base) for tensor in self.namespace.values()
                 if isinstance(tensor, torch.Tensor) and tensor._base is not None}
        target = self.pick(lambda tensor: not tensor.requires_grad and tensor._base is None and id(tensor) not in bases)
        return None if target is None else (f"{target}.requires_grad_()", "requires_grad_")

    def op_grad_reset(self):
        target = self.pick(lambda tensor: tensor.is_leaf and tensor.grad is not None)
        return None if target is None else (f"{target}.grad = None", "grad-reset")

    def op_step(self):
        """An optimizer-style update of a leaf from its gradient (inside no_grad); none once PyTorch's gradients may
        differ from metajit's by the documented difference (data_dependent_backward)."""
        if self.data_dependent:
            return None
        target = self.pick(lambda tensor: tensor.is_leaf and tensor.requires_grad and tensor.grad is not None)
        if target is None:
            return None
        if self.rng.random() < 0.5:
            return f"{target} -= {self.scalar(nonzero=True)} * {target}.grad", "step:-="
        return f"{target}.sub_({target}.grad * {self.scalar(nonzero=True)})", "step:sub_"

    def op_no_grad(self):
        """A `with lib.no_grad():` block of 1-3 statements; each line is chosen seeing what the lines before it did."""
        lines, kinds = [], []
        for _ in range(self.rng.randint(1, 3)):
            op = self.rng.choice([self.op_step, self.op_step, self.op_inplace, self.op_augmented, self.op_setitem,
                                  self.op_unary, lambda: self.op_view(under_no_grad=True), self.op_binary])
            made = op()
            if made is None:
                continue
            try:
                with torch.no_grad(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    exec(compile(made[0], "<generator>", "exec"), self.namespace)
            except Exception:  # noqa: BLE001  (a line PyTorch rejects is left out of the block)
                break
            lines.append("    " + made[0])
            kinds.append(made[1])
        self.replay()  # the caller runs the whole block
        if not lines:
            return None
        return "with lib.no_grad():\n" + "\n".join(lines), f"no_grad[{', '.join(kinds)}]"

    def loss_text(self):
        names = self.tensors(lambda tensor: tensor.requires_grad)
        if not names:
            return None
        chosen = self.rng.sample(names[:6], min(len(names[:6]), self.rng.randint(1, 3)))
        terms = [f"({name} * {name}).sum()" if self.rng.random() < 0.3 else
                 f"({name} * {self.scalar(nonzero=True)}).sum()" for name in chosen]
        return " + ".join(terms)

    def op_backward(self):
        loss = self.loss_text()
        if loss is None:
            return None
        retain = "retain_graph=True" if self.rng.random() < 0.3 else ""
        return f"({loss}).backward({retain})", "backward"

    # ------------------------------------------------------------------ the program
    OPERATIONS = [("op_create", 6), ("op_unary", 8), ("op_binary", 7), ("op_reduce", 2), ("op_view", 18),
                  ("op_inplace", 16), ("op_augmented", 6), ("op_setitem", 9), ("op_detach", 3), ("op_data_read", 2),
                  ("op_data_write", 3), ("op_clone", 3), ("op_alias", 2), ("op_read", 5), ("op_no_grad", 5),
                  ("op_requires_grad", 1), ("op_grad_reset", 1), ("op_backward", 3)]

    def replay(self):
        self.namespace, index, error = execute(self.statements, torch)
        assert error is None, f"generator: replay of seed {self.seed} raised at {index}: {error!r}"

    def attempt(self, text, kind, final=False):
        """Tries a statement on PyTorch. Returns True if it is now part of the program (and the program ended if
        PyTorch raised), False if it was dropped."""
        statement = Statement(text, kind)
        error = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(compile(text, "<generator>", "exec"), self.namespace)
            except Exception as caught:  # noqa: BLE001
                error = caught
        if error is None:
            settle(self.namespace)
        if error is None and "backward" in kind and not self.data_dependent:
            # a backward reading values changed through .data is kept; its gradient values are not compared
            self.data_dependent = data_dependent_backward(self.statements + [statement]) is not None
        if error is None:
            self.statements.append(statement)
            return True
        # in-place ops on leaves that require grad are drawn often and rejected alike: they rarely end a program
        keep = KEEP_ERROR / 4 if "leaf Variable" in str(error) else KEEP_ERROR
        if final or self.rng.random() < keep:
            self.statements.append(statement)
            self.expected_error = error_text(error)
            return True
        self.replay()
        return False

    def generate(self):
        operations = [getattr(self, name) for name, _ in self.OPERATIONS]
        weights = [weight for _, weight in self.OPERATIONS]
        for _ in range(self.rng.randint(1, 3)):
            self.attempt(*self.op_create())
        length = self.rng.randint(MIN_STATEMENTS, MAX_STATEMENTS)
        tries = 0
        while len(self.statements) < length and tries < 200 and self.expected_error is None:
            tries += 1
            made = self.rng.choices(operations, weights)[0]()
            if made is not None:
                self.attempt(*made)
        if self.expected_error is None and self.rng.random() < 0.85:
            loss = self.loss_text()
            if loss is not None and self.attempt(f"loss = {loss}", "loss") and self.expected_error is None:
                self.attempt("loss.backward()", "final backward", final=True)
        return Program(self.seed, self.statements, self.expected_error)


def generate(seed):
    """The program of a seed (a pure function of the seed and the PyTorch version)."""
    return Generator(seed).generate()


# ============================================================================================== comparing
def _compared_names(namespace):
    """Names the comparison covers: the program's tensors and read values, in the order they were made."""
    names = [name for name in namespace if re.fullmatch(r"[tr]\d+|loss", name)]
    return sorted(names, key=lambda name: (name == "loss", int(name[1:]) if name != "loss" else 0))


def _close(have, want, rtol, atol):
    """None or a description of where `have` (numpy) differs from `want` (numpy)."""
    have, want = np.asarray(have), np.asarray(want)
    if have.shape != want.shape:
        return f"shape {have.shape}, PyTorch {want.shape}"
    if have.dtype != want.dtype:
        return f"dtype {have.dtype}, PyTorch {want.dtype}"
    if want.dtype == np.bool_:
        bad = have != want
    else:
        with np.errstate(all="ignore"):
            bad = ~np.isclose(have.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
    if not bad.any():
        return None
    positions = [tuple(int(p) for p in position) for position in np.argwhere(bad)[:3]]
    return f"{int(bad.sum())} of {bad.size} elements differ, e.g. " + ", ".join(
        f"at {list(position)}: metajit {have[position]!r}, PyTorch {want[position]!r}" for position in positions)


def _dtype_name(tensor):
    return str(tensor.dtype).replace("torch.", "")


def absolute_tolerance_scale(namespace):
    """max(1, largest finite magnitude) * sqrt(largest size) over the values of a run (see VALUE_ATOL)."""
    magnitude, size = 1.0, 1
    for value in namespace.values():
        try:
            array = value.detach().numpy() if isinstance(value, torch.Tensor) else value
        except RuntimeError:
            continue
        if isinstance(array, np.ndarray) and array.size and array.dtype.kind == "f":
            finite = np.abs(array[np.isfinite(array)])
            magnitude = max(magnitude, float(finite.max()) if finite.size else 0.0)
            size = max(size, array.size)
    return magnitude * size ** 0.5


def compare_states(expected, got, compare_grads=True, compare_grad_values=True):
    """[(summary, message)] for every named value on which the namespaces of the two runs disagree. Without
    `compare_grad_values` only whether each .grad is None is compared (see data_dependent_backward)."""
    problems = []
    scale = absolute_tolerance_scale(expected)
    value_atol, grad_atol = VALUE_ATOL * scale, GRAD_ATOL * scale
    for name in _compared_names(expected):
        want = expected[name]
        if name not in got:
            problems.append(("a name is missing in metajit's run", f"{name} is not defined in metajit's run"))
            continue
        have = got[name]
        if isinstance(want, np.ndarray):  # a value read in the middle of the program
            difference = _close(np.asarray(have), want, VALUE_RTOL, value_atol)
            if difference:
                problems.append(("a value read in the middle differs", f"{name} (read in the middle): {difference}"))
            continue
        try:
            want_value = want.detach().numpy()
            want_flags = want.requires_grad, want.is_leaf
        except RuntimeError:
            continue  # PyTorch refuses to use this tensor (a view made under no_grad, then its base modified)
        want_requires_grad, want_is_leaf = want_flags
        if not hasattr(have, "numpy"):
            problems.append(("not a tensor in metajit", f"{name} is {type(have).__name__} in metajit"))
            continue
        if tuple(have.shape) != tuple(want.shape):
            problems.append(("shape differs", f"{name}: shape {tuple(have.shape)}, PyTorch {tuple(want.shape)}"))
            continue
        if str(have.dtype) != _dtype_name(want):
            problems.append(("dtype differs", f"{name}: dtype {have.dtype}, PyTorch {_dtype_name(want)}"))
            continue
        try:
            value = have.numpy()
        except Exception as error:  # noqa: BLE001
            problems.append((f"metajit raised {type(error).__name__} reading a value at the end",
                             f"reading {name} at the end raised {error_text(error)}"))
            continue
        difference = _close(value, want_value, VALUE_RTOL, value_atol)
        if difference:
            problems.append(("value differs", f"{name}: {difference}"))
        if bool(have.requires_grad) != want_requires_grad:
            problems.append(("requires_grad differs",
                             f"{name}: requires_grad {have.requires_grad}, PyTorch {want_requires_grad}"))
        elif want_requires_grad and bool(have.is_leaf) != want_is_leaf:
            problems.append(("is_leaf differs", f"{name}: is_leaf {have.is_leaf}, PyTorch {want_is_leaf}"))
        if compare_grads and want_is_leaf and want_requires_grad:
            have_grad, want_grad = getattr(have, "grad", None), want.grad
            if (have_grad is None) != (want_grad is None):
                problems.append(("grad is None in " + ("metajit only" if have_grad is None else "PyTorch only"),
                                 f"{name}.grad: metajit {'None' if have_grad is None else 'a tensor'}, PyTorch "
                                 f"{'None' if want_grad is None else want_grad.numpy().tolist()}"))
            elif want_grad is not None and compare_grad_values:
                try:
                    difference = _close(have_grad.numpy(), want_grad.numpy(), GRAD_RTOL, grad_atol)
                except Exception as error:  # noqa: BLE001
                    difference = "reading it raised " + error_text(error)
                if difference:
                    problems.append(("grad differs", f"{name}.grad: {difference}"))
    return problems


def check(program):
    """(summary, message) of the first disagreement between PyTorch and metajit on `program`, or None."""
    expected, torch_index, torch_error = execute(program.statements, torch)
    got, index, error = execute(program.statements, mj)
    last = len(program.statements) - 1
    if program.expected_error is not None and (torch_error is None or torch_index != last):
        return "PyTorch no longer raises where the program says", f"expected {program.expected_error}"
    if error is not None and (torch_error is None or index < torch_index):
        kind = program.statements[index].kind
        return (f"metajit raised {type(error).__name__} at {kind} (PyTorch did not)",
                f"statement {index} ({kind}): metajit raised {error_text(error)}; PyTorch did not raise")
    if torch_error is not None and error is None:
        kind = program.statements[torch_index].kind
        return (f"PyTorch raised at {kind}, metajit did not ({_error_class(torch_error)})",
                f"statement {torch_index} ({kind}): PyTorch raised {error_text(torch_error)}; metajit did not")
    # a backward that reads values changed through .data: PyTorch's gradient values are not metajit's (the
    # documented difference), whether each is None still is
    grad_values = torch_error is not None or data_dependent_backward(program.statements) is None
    problems = compare_states(expected, got, compare_grads=torch_error is None, compare_grad_values=grad_values)
    if problems:
        return problems[0][0], "\n".join(message for _, message in problems[:6]) + \
            (f"\n({len(problems) - 6} more)" if len(problems) > 6 else "")
    return None


def _error_class(error):
    """A short name for a PyTorch error message, for grouping."""
    text = str(error)
    for pattern, label in [(VERSION_ERROR, "saved tensor modified in place"),
                           ("leaf Variable that requires grad", "in-place on a leaf that requires grad"),
                           ("view of a leaf Variable", "in-place on a view of a leaf that requires grad"),
                           ("more than one element of the written-to tensor", "in-place on an expanded tensor"),
                           ("some elements of the input tensor and the written-to tensor", "overlapping in-place"),
                           ("backward through the graph a second time", "second backward through a freed graph"),
                           ("created in no_grad mode", "view made under no_grad modified with grad on"),
                           ("does not require grad", "backward of a tensor that does not require grad"),
                           ("is a view and is being modified inplace", "in-place on a view (autograd rule)"),
                           ("output with shape", "in-place result shape mismatch")]:
        if pattern in text:
            return label
    return type(error).__name__


# ============================================================================================== shrinking, reproducers
def shrink(program, summary, seconds=SHRINK_SECONDS):
    """A shorter program (statements dropped one at a time, last first) that still fails with `summary`."""
    statements = list(program.statements)
    deadline = time.time() + seconds
    changed = True
    while changed and time.time() < deadline:
        changed = False
        for position in range(len(statements) - 1, -1, -1):
            if time.time() > deadline:
                break
            if program.expected_error is not None and position == len(statements) - 1:
                continue  # the statement PyTorch rejects stays
            candidate = statements[:position] + statements[position + 1:]
            if not candidate:
                continue
            _, index, error = execute(candidate, torch)
            if program.expected_error is None:
                if error is not None:
                    continue
            elif error is None or index != len(candidate) - 1 or error_text(error) != program.expected_error:
                continue
            dependent = data_dependent_backward(candidate, index)
            if dependent is not None and any("step:" in statement.kind for statement in candidate[dependent:]):
                continue  # a step would carry a gradient of the documented difference into a value (as generated)
            try:
                result = check(Program(program.seed, candidate, program.expected_error))
            except Exception:  # noqa: BLE001
                continue
            if result is not None and result[0] == summary:
                statements, changed = candidate, True
    return Program(program.seed, statements, program.expected_error)


def reproducer(program, message):
    """A self-contained program that shows the failure with metajit and PyTorch side by side."""
    scale = absolute_tolerance_scale(execute(program.statements, torch)[0])
    value_atol, grad_atol = float(f"{VALUE_ATOL * scale:.3g}"), float(f"{GRAD_ATOL * scale:.3g}")
    lines = [f"# metajit mutation fuzz case: seed {program.seed} "
             f"(python tools/fuzz.py --mutation --seed {program.seed} --show-program)",
             "# " + message.replace("\n", "\n# "),
             "import numpy as np", "import torch", "import metajit as mj", "", "",
             "def read(x):  # the value as a numpy array: a sync point in metajit",
             "    return x.detach().numpy().copy() if isinstance(x, torch.Tensor) else x.numpy().copy()", "", "",
             "def settle(names):  # PyTorch rebuilds a view's grad_fn when it is read: read them all, as the fuzzer",
             "    for value in list(names.values()):",
             "        if isinstance(value, torch.Tensor):",
             "            try:",
             "                value.grad_fn",
             "            except RuntimeError:",
             "                pass", "", "",
             "def program(lib):  # lib is torch or mj"]
    for statement in program.statements:
        lines += ["    " + line for line in statement.text.split("\n")]
        lines.append("    settle(locals())")
    lines += ["    return locals()", "", ""]
    if program.expected_error is not None:
        lines += [f"# PyTorch raises at the last statement: {program.expected_error}",
                  "try:", "    program(torch)", "except Exception as error:",
                  "    print('PyTorch raises:', repr(error))", "try:", "    program(mj)",
                  "except Exception as error:", "    print('metajit raises too:', repr(error))", "else:",
                  "    raise AssertionError('metajit does not raise where PyTorch does')"]
        return "\n".join(lines)
    grad_values = data_dependent_backward(program.statements) is None
    if not grad_values:
        lines += ["# A backward reads values changed through .data: PyTorch's gradients read the changed storage,",
                  "# metajit's the values as recorded (docs/mutation.md, 'Differences from PyTorch that remain'), so",
                  "# only whether each .grad is None is compared."]
    lines += ["expected, got = program(torch), program(mj)",
              "for name, want in expected.items():",
              "    have = got[name]",
              "    if isinstance(want, np.ndarray):  # read in the middle",
              f"        np.testing.assert_allclose(have, want, rtol={VALUE_RTOL}, atol={value_atol}, err_msg=name)",
              "    elif isinstance(want, torch.Tensor):",
              f"        np.testing.assert_allclose(have.numpy(), want.detach().numpy(), rtol={VALUE_RTOL}, "
              f"atol={value_atol}, err_msg=name)",
              "        assert have.requires_grad == want.requires_grad, (name, 'requires_grad', have.requires_grad)",
              "        if want.requires_grad:",
              "            assert have.is_leaf == want.is_leaf, (name, 'is_leaf', have.is_leaf)",
              "        if want.is_leaf and want.requires_grad:",
              "            assert (have.grad is None) == (want.grad is None), (name, 'grad', have.grad, want.grad)"]
    if grad_values:
        lines += ["            if want.grad is not None:",
                  f"                np.testing.assert_allclose(have.grad.numpy(), want.grad.numpy(), rtol={GRAD_RTOL}, "
                  f"atol={grad_atol}, err_msg=name + '.grad')"]
    lines += ["print('metajit agrees with PyTorch')"]
    return "\n".join(lines)


def run_case(seed, mode="mutation", exclude=(), shrink_failures=True):
    """Generates and runs one program; returns a list of Failure (empty when metajit agrees with PyTorch)."""
    program = generate(seed)
    try:
        result = check(program)
    except Exception as error:  # noqa: BLE001  (a crash of the comparison is a finding too)
        result = (f"comparison raised {type(error).__name__}",
                  "comparing raised " + "".join(traceback.format_exception(type(error), error, error.__traceback__)))
    if result is None:
        return []
    summary, message = result
    if shrink_failures:
        program = shrink(program, summary)
        final = check(program)
        message = final[1] if final else message
    return [Failure(seed, summary, message, reproducer(program, message))]
