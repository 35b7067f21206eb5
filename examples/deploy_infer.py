"""Deployment, step 2 of 2: run the model trained by examples/deploy_train.py on a machine that never compiles.

Every kernel comes from the bundle model.mjb (matrix products and convolutions are oneDNN calls and need no
kernel). The script checks that the logits are bit-for-bit those computed at training time and that nothing
was compiled; it exits with status 1 otherwise.

    PYTHONPATH=python python examples/deploy_train.py --output-dir /tmp/deploy
    METAJIT_CACHE_DIR=$(mktemp -d) PYTHONPATH=python python examples/deploy_infer.py --output-dir /tmp/deploy
"""
import argparse
import os
import sys
import tempfile

# metajit reads these when it is imported, so they are set before the import. METAJIT_COMPILE=never turns a
# kernel missing from the bundle into an error instead of a silent compile; an empty kernel cache directory
# makes sure no kernel is found in a cache left over from training, so the bundle alone has to serve them.
os.environ.setdefault("METAJIT_COMPILE", "never")
if "METAJIT_CACHE_DIR" not in os.environ:
    _empty_cache = tempfile.TemporaryDirectory(prefix="metajit-deploy-cache-")  # removed at exit
    os.environ["METAJIT_CACHE_DIR"] = _empty_cache.name

import numpy as np  # noqa: E402

import metajit as mj  # noqa: E402
from deploy_train import DEFAULT_OUTPUT, build_model, predict  # noqa: E402  (same model, same batches)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT, help="where deploy_train.py wrote its files")
    arguments = parser.parse_args()
    folder = arguments.output_dir

    manifest = mj.cache.load_bundle(os.path.join(folder, "model.mjb"))
    print(f"bundle: {len(manifest['entries'])} kernels for cpu={manifest['cpu']}, created {manifest['created']}")
    model = build_model()
    model.load_state_dict(mj.load(os.path.join(folder, "weights.npz")))
    images = np.load(os.path.join(folder, "test_images.npy"))
    labels = np.load(os.path.join(folder, "test_labels.npy"))
    expected = np.load(os.path.join(folder, "expected_logits.npy"))

    logits = predict(model, images)
    stats = mj.stats()  # counted since the import: loading the weights included
    compiled, from_bundle = int(stats["kernels_compiled"]), int(stats["kernels_loaded_from_bundle"])
    identical = np.array_equal(logits, expected)
    print(f"test accuracy {float((logits.argmax(axis=1) == labels).mean()) * 100:.1f}% on {len(labels)} images")
    print(f"logits identical to training time: {identical}")
    print(f"kernels compiled {compiled}, loaded from bundle {from_bundle}")
    if not identical or compiled != 0:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
