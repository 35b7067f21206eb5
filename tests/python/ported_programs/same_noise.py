"""Test support, not a ported program: SameNoise(torch_module, seed) is the framework module with its random
draws (randn, randn_like, rand, rand_like, normal) replaced by numbers from one numpy generator, so PyTorch and
metajit running the same program draw the same noise. Every other name is the module's own: the program under
test is unchanged and sees `torch.nn`, `torch.optim`, ... as usual."""
import numpy as np


class SameNoise:
    def __init__(self, module, seed):
        self._module = module
        self._rng = np.random.default_rng(seed)

    def __getattr__(self, name):
        return getattr(self._module, name)

    def _tensor(self, values, dtype, device):
        result = self._module.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
        if dtype is not None:
            result = result.to(dtype)
        return result if device is None else result.to(device)

    @staticmethod
    def _shape(size):
        return tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)

    def randn(self, *size, dtype=None, device=None, **_):
        return self._tensor(self._rng.standard_normal(self._shape(size)), dtype, device)

    def rand(self, *size, dtype=None, device=None, **_):
        return self._tensor(self._rng.random(self._shape(size)), dtype, device)

    def randn_like(self, input, dtype=None, **_):
        return self._tensor(self._rng.standard_normal(tuple(input.shape)), dtype or input.dtype, input.device)

    def rand_like(self, input, dtype=None, **_):
        return self._tensor(self._rng.random(tuple(input.shape)), dtype or input.dtype, input.device)
