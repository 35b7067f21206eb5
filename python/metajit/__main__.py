"""python -m metajit: print the version-relevant facts of this installation (for bug reports)."""
import metajit as mj

print(f"metajit kernel cache: {mj.flags.cache_dir}")
print(f"threads: {mj.flags.num_threads}")
print(f"stats: {mj.stats()}")
