"""The `weights` / `pretrained` keywords of the torchvision-style model constructors.

metajit has no network access and no copy of torchvision's checkpoints, so the only accepted value is "no
pretrained weights" (weights=None, or the legacy pretrained=False); anything else raises an error that says how
to use a torchvision checkpoint file the user already has. Must not download anything or look for files.
"""

__all__ = ["check_no_pretrained_weights"]


def check_no_pretrained_weights(model_name, weights, keywords):
    """Raises unless `weights` is None and a legacy `pretrained` keyword (popped from `keywords`) is false; also
    drops torchvision's `progress` keyword, which only concerns downloads."""
    pretrained = keywords.pop("pretrained", False)
    keywords.pop("progress", None)
    if weights is None and not pretrained:
        return
    asked = f"weights={weights!r}" if weights is not None else f"pretrained={pretrained!r}"
    raise NotImplementedError(
        f"{model_name}({asked}): metajit cannot download pretrained weights. Build the model with weights=None "
        f"and load a torchvision checkpoint file you already have, e.g. model = mj.models.{model_name}(); "
        f"model.load_state_dict(mj.load('{model_name}.pth')) (mj.load reads torch.save files without PyTorch; "
        "see docs/models.md)")
