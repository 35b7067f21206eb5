"""Optimizers and learning-rate schedules against torch.optim: the same initial parameters and the same gradients
for several steps must give the same parameters (1e-6 relative in float64, 1e-5 in float32)."""
import numpy as np
import pytest
import torch

import metajit as mj
from metajit import optim
from metajit.optim import lr_scheduler

TOLERANCE = {"float64": 1e-6, "float32": 1e-5}

CONFIGURATIONS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.02, weight_decay=0.3, amsgrad=True)),
]


def run_both(name, options, dtype, steps=5, shapes=((3, 4), (5,))):
    """Runs our optimizer and torch's from the same start on the same gradients; returns both final values."""
    rng = np.random.default_rng(7)
    starts = [rng.standard_normal(shape).astype(dtype) for shape in shapes]
    ours = [mj.array(start, requires_grad=True) for start in starts]
    theirs = [torch.tensor(start, requires_grad=True) for start in starts]
    our_optimizer = getattr(optim, name)(ours, **options)
    their_optimizer = getattr(torch.optim, name)(theirs, **options)
    for _ in range(steps):
        for mine, reference in zip(ours, theirs):
            gradient = rng.standard_normal(tuple(reference.shape)).astype(dtype)
            mine.grad = mj.array(gradient)
            reference.grad = torch.tensor(gradient)
        our_optimizer.step()
        their_optimizer.step()
    return [p.numpy() for p in ours], [p.detach().numpy() for p in theirs]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,options", CONFIGURATIONS)
def test_matches_torch(name, options, dtype):
    ours, theirs = run_both(name, options, dtype)
    for mine, reference in zip(ours, theirs):
        assert mine.dtype == np.dtype(dtype)
        np.testing.assert_allclose(mine, reference, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype] * 1e-2)
        assert not np.allclose(mine, reference * 0.999)  # the comparison can tell a slightly wrong update


def test_parameter_groups_have_their_own_options():
    rng = np.random.default_rng(3)
    starts = [rng.standard_normal(4) for _ in range(2)]
    ours = [mj.array(start, requires_grad=True) for start in starts]
    theirs = [torch.tensor(start, requires_grad=True) for start in starts]
    our_optimizer = optim.SGD([{"params": [ours[0]]}, {"params": [ours[1]], "lr": 0.5, "momentum": 0.5}], lr=0.1)
    their_optimizer = torch.optim.SGD([{"params": [theirs[0]]}, {"params": [theirs[1]], "lr": 0.5,
                                                                  "momentum": 0.5}], lr=0.1)
    assert our_optimizer.param_groups[0]["momentum"] == 0 and our_optimizer.param_groups[1]["lr"] == 0.5
    for _ in range(3):
        for mine, reference in zip(ours, theirs):
            gradient = rng.standard_normal(4)
            mine.grad, reference.grad = mj.array(gradient), torch.tensor(gradient)
        our_optimizer.step()
        their_optimizer.step()
    for mine, reference in zip(ours, theirs):
        np.testing.assert_allclose(mine.numpy(), reference.detach().numpy(), rtol=1e-12)


def quadratic_loss(library, weight, target):
    difference = weight * 3.0 - target
    return (difference * difference).sum()


def test_step_with_loss_runs_backward_and_keeps_gradients():
    start = np.array([[1.0, -2.0], [0.5, 3.0]])
    target = np.array([[0.0, 1.0], [2.0, -1.0]])
    ours = mj.array(start, requires_grad=True)
    theirs = torch.tensor(start, requires_grad=True)
    our_optimizer = optim.Adam([ours], lr=0.1)
    their_optimizer = torch.optim.Adam([theirs], lr=0.1)
    for _ in range(4):
        loss = quadratic_loss(mj, ours, mj.array(target))
        returned = our_optimizer.step(loss)  # Jittor style: zero_grad + backward + update
        their_optimizer.zero_grad()
        reference_loss = quadratic_loss(torch, theirs, torch.tensor(target))
        reference_loss.backward()
        their_optimizer.step()
        assert returned is loss
        assert loss.is_computed  # computed in the step's fused plan
        np.testing.assert_allclose(loss.item(), reference_loss.item(), rtol=1e-12)
        # The gradient stays readable after the update and still belongs to the old parameters.
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12)
    assert mj._autograd.take_pending_outputs() == []


def test_step_with_closure():
    ours = mj.array(np.array([1.0, 2.0]), requires_grad=True)
    theirs = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    our_optimizer, their_optimizer = optim.SGD([ours], lr=0.1), torch.optim.SGD([theirs], lr=0.1)

    def closure():
        our_optimizer.zero_grad()
        loss = (ours * ours).sum()
        loss.backward()
        return loss

    def reference_closure():
        their_optimizer.zero_grad()
        loss = (theirs * theirs).sum()
        loss.backward()
        return loss

    for _ in range(3):
        our_loss = our_optimizer.step(closure)
        their_loss = their_optimizer.step(reference_closure)
        np.testing.assert_allclose(our_loss.item(), their_loss.item(), rtol=1e-12)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12)


def test_zero_grad_and_parameters_without_gradient():
    used, unused = mj.ones(2, requires_grad=True), mj.ones(2, requires_grad=True)
    optimizer = optim.SGD([used, unused], lr=1.0)
    (used * 2).sum().backward()
    optimizer.step()
    np.testing.assert_array_equal(used.numpy(), [-1.0, -1.0])
    np.testing.assert_array_equal(unused.numpy(), [1.0, 1.0])  # no grad: untouched, as in torch
    optimizer.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(used.grad.numpy(), [0.0, 0.0])
    optimizer.zero_grad()
    assert used.grad is None and unused.grad is None


def test_steps_compile_no_kernels_after_the_first_even_when_lr_changes():
    rng = np.random.default_rng(0)
    params = [mj.array(rng.standard_normal((8, 8)).astype(np.float32), requires_grad=True)]
    optimizer = optim.Adam(params, lr=0.01, amsgrad=True, weight_decay=0.01)
    schedule = lr_scheduler.CosineAnnealingLR(optimizer, T_max=5)
    for step in range(4):
        params[0].grad = mj.array(rng.standard_normal((8, 8)).astype(np.float32))
        before = mj.stats()["kernels_compiled"]
        optimizer.step()
        schedule.step()
        if step > 0:
            assert mj.stats()["kernels_compiled"] == before


def test_state_dict_round_trip_continues_identically(tmp_path):
    rng = np.random.default_rng(5)
    start = rng.standard_normal((3, 3))
    gradients = [rng.standard_normal((3, 3)) for _ in range(6)]
    first, second = mj.array(start, requires_grad=True), None
    optimizer = optim.Adam([first], lr=0.05, amsgrad=True)
    for gradient in gradients[:3]:
        first.grad = mj.array(gradient)
        optimizer.step()
    mj.save(optimizer.state_dict(), tmp_path / "optimizer.npz")
    second = mj.array(first.numpy().copy(), requires_grad=True)
    resumed = optim.Adam([second], lr=1.0)
    resumed.load_state_dict(mj.load(tmp_path / "optimizer.npz"))
    assert resumed.param_groups[0]["lr"] == 0.05 and resumed.param_groups[0]["betas"] == (0.9, 0.999)
    assert resumed.state[second]["step"] == 3
    for gradient in gradients[3:]:
        first.grad, second.grad = mj.array(gradient), mj.array(gradient)
        optimizer.step()
        resumed.step()
    np.testing.assert_array_equal(first.numpy(), second.numpy())


def test_load_state_dict_from_torch_optimizer():
    rng = np.random.default_rng(2)
    start = rng.standard_normal(4)
    theirs = torch.tensor(start, requires_grad=True)
    their_optimizer = torch.optim.SGD([theirs], lr=0.1, momentum=0.9)
    for _ in range(2):
        theirs.grad = torch.tensor(rng.standard_normal(4))
        their_optimizer.step()
    state = their_optimizer.state_dict()
    converted = {"state": {index: {name: value.numpy() if isinstance(value, torch.Tensor) else value
                                   for name, value in values.items()} for index, values in state["state"].items()},
                 "param_groups": state["param_groups"]}
    ours = mj.array(theirs.detach().numpy().copy(), requires_grad=True)
    our_optimizer = optim.SGD([ours], lr=0.1, momentum=0.9)
    our_optimizer.load_state_dict(converted)
    gradient = rng.standard_normal(4)
    ours.grad, theirs.grad = mj.array(gradient), torch.tensor(gradient)
    our_optimizer.step()
    their_optimizer.step()
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12)


def test_bad_arguments_raise_clear_errors():
    p = mj.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="single Var"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(TypeError, match="floating-point"):
        optim.SGD([mj.zeros(2, dtype="int32")], lr=0.1)
    optimizer = optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="parameter groups"):
        optimizer.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(TypeError, match="loss Var or a closure"):
        optimizer.step(3)


SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 9], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=6, eta_min=0.001)),
    ("LambdaLR", dict(lr_lambda=lambda epoch: 1.0 / (epoch + 1))),
]


@pytest.mark.parametrize("name,options", SCHEDULES)
def test_schedules_match_torch(name, options):
    ours = optim.SGD([{"params": [mj.ones(1, requires_grad=True)]},
                      {"params": [mj.ones(1, requires_grad=True)], "lr": 0.3}], lr=0.1, momentum=0.9)
    theirs = torch.optim.SGD([{"params": [torch.ones(1, requires_grad=True)]},
                              {"params": [torch.ones(1, requires_grad=True)], "lr": 0.3}], lr=0.1, momentum=0.9)
    our_schedule = getattr(lr_scheduler, name)(ours, **options)
    their_schedule = getattr(torch.optim.lr_scheduler, name)(theirs, **options)
    for _ in range(14):
        np.testing.assert_allclose(our_schedule.get_last_lr(), their_schedule.get_last_lr(), rtol=1e-10)
        np.testing.assert_allclose([group["lr"] for group in ours.param_groups],
                                   [group["lr"] for group in theirs.param_groups], rtol=1e-10)
        theirs.step()
        our_schedule.step()
        their_schedule.step()


def test_deferred_vars_are_computed_with_the_old_parameters():
    weight = mj.array(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    output = mj._autograd.defer_sync(weight * 3)  # e.g. logits kept for an accuracy metric
    optimizer = optim.SGD([weight], lr=1.0)
    optimizer.step(output.sum())
    assert output.is_computed
    np.testing.assert_array_equal(output.numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(weight.numpy(), [-2.0, -1.0])
