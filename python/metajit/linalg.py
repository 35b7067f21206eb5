"""mj.linalg: PyTorch's torch.linalg namespace. The solvers and decompositions live in ops/matrix_solvers.py
(LAPACK through numpy at the host boundary, gradients in lazy ops); the products are ops/linalg.py's. This module
only gathers names; a torch.linalg name without a counterpart raises an error that names it (_absent.py)."""
from .ops.linalg import cross, matmul
from .ops.matrix_solvers import (LinAlgError, det, inverse as inv, linalg_cholesky as cholesky, lstsq, slogdet,
                                 solve, solve_triangular)

__all__ = ["LinAlgError", "cholesky", "cross", "det", "inv", "lstsq", "matmul", "slogdet", "solve",
           "solve_triangular"]


def __getattr__(name):
    from ._absent import absent_name
    raise absent_name(name, "metajit.linalg", "torch.linalg")
