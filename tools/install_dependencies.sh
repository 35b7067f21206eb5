#!/usr/bin/env bash
# Install everything metajit needs to build and test, and nothing that is already there.
#
#   bash tools/install_dependencies.sh
#
# Idempotent: each apt package is checked with `dpkg -s` and each Python package with an import
# lookup; apt-get / pip only run for what is missing, so a fully provisioned machine returns in
# well under two seconds. Honours PYTHON (default python3) so the packages land in the interpreter
# the build and the tests use.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
export DEBIAN_FRONTEND=noninteractive

log() { printf '[install_dependencies] %s\n' "$*"; }

# --------------------------------------------------------------------------------------------
# apt packages
# --------------------------------------------------------------------------------------------
APT_PACKAGES=(
  make g++                       # the Makefile, the host compiler, and the C++ library headers Code ops include
  llvm-14-dev                    # LLVM ORC LLJIT (in-process JIT)
  libclang-14-dev                # Clang C API headers
  libclang-cpp14-dev             # Clang C++ libraries (in-process compiler driver)
  libclang-common-14-dev         # Clang resource dir (builtin headers passed via -resource-dir)
  clang-14                       # subprocess compiler backend (fallback/debug)
  libgtest-dev libgmock-dev      # C++ tests
  libbenchmark-dev               # C++ micro-benchmarks
  libxxhash-dev                  # kernel-cache content hashing
  libdnnl-dev                    # oneDNN: matmul and convolution lowering (libraries/)
  nlohmann-json3-dev             # JSON for the kernel dump index (METAJIT_DUMP_DIR)
  clang-format-14                # make format-check (.clang-format; the same major version as the LLVM above)
  openmpi-bin libopenmpi-dev     # mpirun and libmpi.so.40 for metajit.distributed (loaded with dlopen at run time)
)
# ninja: use one already on PATH (for example pip's), otherwise take Debian's.
command -v ninja >/dev/null 2>&1 || APT_PACKAGES+=(ninja-build)

apt_installed() {
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

missing_apt=()
for pkg in "${APT_PACKAGES[@]}"; do
  apt_installed "$pkg" || missing_apt+=("$pkg")
done

if ((${#missing_apt[@]})); then
  log "apt: installing ${missing_apt[*]}"
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      SUDO=(sudo env DEBIAN_FRONTEND=noninteractive)
    else
      log "error: not root and sudo is unavailable; install as root: ${missing_apt[*]}" >&2
      exit 1
    fi
  fi
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing_apt[@]}"
fi

# --------------------------------------------------------------------------------------------
# Python packages (import name -> pip requirement)
# --------------------------------------------------------------------------------------------
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  log "error: $PYTHON not found (Python >= 3.9 with pip is required)" >&2
  exit 1
fi

PY_PACKAGES=(
  "numpy=numpy"
  "pytest=pytest"
  "pybind11=pybind11"
  "scikit_build_core=scikit-build-core"
  "tqdm=tqdm"
  # The demo trains on scikit-learn's bundled handwritten-digits data (shipped in the wheel; nothing is downloaded).
  "sklearn=scikit-learn"
  # PyTorch (CPU build) is only a test-time reference for numerics and gradients; pip finds the wheel locally
  # on CI machines (/opt/wheels), elsewhere on PyPI.
  "torch=torch==2.13.0"
  "matplotlib=matplotlib"  # the demo's training-curve plot
  "safetensors=safetensors"  # mj.load reads .safetensors files through it (docs/checkpoints.md)
  # The Python linter make test runs (rules in pyproject.toml); pinned, since a newer ruff may find new things.
  "ruff=ruff==0.17.6"
)

# One interpreter start for all checks: find_spec locates a package without importing it.
missing_py=()
while IFS= read -r req; do
  [[ -n $req ]] && missing_py+=("$req")
done < <("$PYTHON" - "${PY_PACKAGES[@]}" <<'PY'
import importlib.util, sys
for entry in sys.argv[1:]:
    module, requirement = entry.split("=", 1)
    if importlib.util.find_spec(module) is None:
        print(requirement)
PY
)

# cmake >= 3.20 (the one on PATH if new enough, otherwise pip's) and ninja (pip's if apt's is absent).
cmake_ok() {
  command -v cmake >/dev/null 2>&1 || return 1
  local v
  v=$(cmake --version 2>/dev/null | head -n1 | sed -n 's/^cmake version \([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p')
  [[ -n $v ]] || return 1
  set -- $v
  (( $1 > 3 || ($1 == 3 && $2 >= 20) ))
}
cmake_ok || missing_py+=("cmake>=3.20")
# NVRTC (the CUDA runtime compiler) from PyPI: the tests compile the generated CUDA kernels with it, no GPU needed.
# /usr/local/cuda has nvcc but no libnvrtc on these machines.
nvrtc_ok() {
  "$PYTHON" - <<'PY'
import importlib.util, os, sys
spec = importlib.util.find_spec("nvidia")
roots = list(spec.submodule_search_locations or []) if spec else []
sys.exit(0 if any(os.path.exists(os.path.join(root, "cu13", "lib", "libnvrtc.so.13")) for root in roots) else 1)
PY
}
nvrtc_ok || missing_py+=("nvidia-cuda-nvrtc>=13,<14")
command -v ninja >/dev/null 2>&1 || missing_py+=("ninja")

if ((${#missing_py[@]})); then
  log "pip: installing ${missing_py[*]}"
  pip_flags=()
  # Debian's system Python refuses plain `pip install` (PEP 668); a pyenv/venv Python does not.
  if "$PYTHON" -c 'import os, sys, sysconfig; sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
    pip_flags+=(--break-system-packages)
  fi
  # Non-root user without a writable site-packages: install into the user site instead.
  if ! "$PYTHON" -c 'import os, sys, sysconfig; sys.exit(0 if os.access(sysconfig.get_path("purelib"), os.W_OK) else 1)'; then
    pip_flags+=(--user)
  fi
  PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install -q "${pip_flags[@]}" "${missing_py[@]}"
  # New console scripts (cmake, ninja) need fresh shims under pyenv.
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash || true; fi
  hash -r
  if ! cmake_ok; then
    log "error: cmake >= 3.20 still not on PATH after pip install (check that pip's script directory is on PATH)" >&2
    exit 1
  fi
fi

if ((${#missing_apt[@]} + ${#missing_py[@]} == 0)); then
  log "all dependencies present"
else
  log "done"
fi
