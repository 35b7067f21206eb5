"""mj.profile(): wall time per kernel while a block runs.

    with mj.profile() as report:
        train_step()
    print(report)          # the kernels by total time, with their user lines

Each kernel launch is timed on the host (the launch is synchronous), so the figures include the thread pool's
start-up and a library call's reorders."""
from . import _core


class Profile:
    """Collected entries (dicts with name, key, launches, seconds), largest total time first."""

    def __init__(self):
        self.entries = []

    def __enter__(self):
        _core.reset_profile()
        _core.set_profiling(True)
        return self

    def __exit__(self, *exception):
        _core.set_profiling(False)
        self.entries = _core.profile()
        return False

    @property
    def total_seconds(self):
        return sum(entry["seconds"] for entry in self.entries)

    def table(self, limit=25):
        total = self.total_seconds or 1.0
        lines = [f"{'ms':>9} {'%':>5} {'runs':>5}  kernel"]
        for entry in self.entries[:limit]:
            lines.append(f"{entry['seconds'] * 1e3:9.3f} {100 * entry['seconds'] / total:5.1f} {entry['launches']:5d}  "
                         f"{entry['name']}")
        if len(self.entries) > limit:
            rest = sum(entry["seconds"] for entry in self.entries[limit:])
            lines.append(f"{rest * 1e3:9.3f} {100 * rest / total:5.1f}        "
                         f"({len(self.entries) - limit} more kernels)")
        lines.append(f"{self.total_seconds * 1e3:9.3f} total in kernels")
        return "\n".join(lines)

    def __str__(self):
        return self.table()


def profile():
    """A context manager timing every kernel launched inside it; see Profile."""
    return Profile()
