"""mj.profile(): wall time and memory per kernel while a block runs.

    with mj.profile() as report:
        train_step()
    print(report)                                   # the kernels by total time, with their user lines
    report.export_memory_timeline("memory.png")    # bytes in use after each launch, over time

Each kernel launch is timed on the host (the launch is synchronous), so the figures include the thread pool's
start-up and a library call's reorders. The memory of a launch is what metajit's allocators hand out right after
it: its outputs allocated, the buffers it was the last reader of not yet released."""
import json

from . import _core


class Profile:
    """Collected entries (dicts with name, key, launches, seconds), largest total time first."""

    def __init__(self):
        self.entries = []
        self.timeline = []  # per launch: dicts with name, start, seconds, host_bytes, device_bytes

    def __enter__(self):
        _core.reset_profile()
        _core.set_profiling(True)
        return self

    def __exit__(self, *exception):
        _core.set_profiling(False)
        self.entries = _core.profile()
        self.timeline = [dict(zip(("name", "start", "seconds", "host_bytes", "device_bytes"), event))
                         for event in _core.profile_timeline()]
        return False

    @property
    def total_seconds(self):
        return sum(entry["seconds"] for entry in self.entries)

    @property
    def peak_bytes(self):
        """The most bytes in use (host and GPU together) right after any launch of the block."""
        return max((event["host_bytes"] + event["device_bytes"] for event in self.timeline), default=0)

    def table(self, limit=25):
        total = self.total_seconds or 1.0
        lines = [f"{'ms':>9} {'%':>5} {'runs':>5} {'MiB':>8}  kernel   (MiB: in use right after its launch, at most)"]
        for entry in self.entries[:limit]:
            mebibytes = (entry["peak_host_bytes"] + entry["peak_device_bytes"]) / 2**20
            lines.append(f"{entry['seconds'] * 1e3:9.3f} {100 * entry['seconds'] / total:5.1f} {entry['launches']:5d} "
                         f"{mebibytes:8.1f}  {entry['name']}")
        if len(self.entries) > limit:
            rest = sum(entry["seconds"] for entry in self.entries[limit:])
            lines.append(f"{rest * 1e3:9.3f} {100 * rest / total:5.1f}        "
                         f"({len(self.entries) - limit} more kernels)")
        lines.append(f"{self.total_seconds * 1e3:9.3f} total in kernels, {self.peak_bytes / 2**20:.1f} MiB at the peak")
        return "\n".join(lines)

    def export_memory_timeline(self, path):
        """Writes the bytes in use after each launch: a chart for a path ending in .png (PyTorch's name; its
        profiler writes HTML), the launches as JSON for .json."""
        if path.endswith(".json"):
            with open(path, "w") as stream:
                json.dump(self.timeline, stream, indent=1)
            return
        if not path.endswith(".png"):
            raise ValueError(f"export_memory_timeline: the path must end in .png or .json, got {path!r}")
        if not self.timeline:
            raise ValueError("export_memory_timeline: no kernel ran inside the profiled block")
        _draw_memory_timeline(self.timeline, path)

    def __str__(self):
        return self.table()


def profile():
    """A context manager timing every kernel launched inside it; see Profile."""
    return Profile()


def _draw_memory_timeline(timeline, path):
    """Host and GPU MiB as steps over milliseconds, the peak marked with the kernel that reached it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot
    figure, axes = pyplot.subplots(figsize=(10, 4.5))
    ends = [1e3 * (event["start"] + event["seconds"]) for event in timeline]
    for key, label, colour in (("host_bytes", "host", "tab:blue"), ("device_bytes", "GPU", "tab:orange")):
        mebibytes = [event[key] / 2**20 for event in timeline]
        if not any(mebibytes):
            continue
        axes.step(ends, mebibytes, where="post", label=label, color=colour)
        axes.fill_between(ends, mebibytes, step="post", alpha=0.2, color=colour)
        peak = max(range(len(timeline)), key=lambda index: mebibytes[index])
        name = timeline[peak]["name"]
        axes.annotate(f"peak {mebibytes[peak]:.1f} MiB\n{name[:70]}", (ends[peak], mebibytes[peak]),
                      xytext=(10, -30), textcoords="offset points", fontsize=8,
                      arrowprops=dict(arrowstyle="->", color="gray"))
    axes.set_xlabel("milliseconds since the profile started (end of each launch)")
    axes.set_ylabel("MiB in use")
    axes.set_title(f"metajit memory over {len(timeline)} launches")
    axes.legend(loc="upper left")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
