"""A tuning's progress where the caller looks: a terminal, a Jupyter notebook, or a log."""

from __future__ import annotations

import sys
import time


class _Progress:
    """A tuning's progress, where the caller looks: on a terminal, one line on standard error
    redrawn in place with the count and the best so far; in a Jupyter notebook, that line in
    the cell's output, updated in place; elsewhere (a pipe, a log file) nothing while the run
    goes, then one summary line. ``stream`` and ``display`` are for tests."""

    #: Seconds between two updates of a notebook's line (a redraw per evaluation is slow there).
    NOTEBOOK_INTERVAL = 0.25

    def __init__(self, kernel_name: str, objective: str, stream=None, display=None):
        self.kernel_name = kernel_name
        self.unit = "ms" if objective == "time" else objective
        self.stream = sys.stderr if stream is None else stream
        self.handle = None
        self.last = None
        self.updated = 0.0
        if self.stream.isatty():
            self.mode = "terminal"
        else:
            display = display or _notebook_display()
            self.mode = "quiet" if display is None else "notebook"
            self.display = display

    def line(self) -> str:
        done, total, best = self.last
        best_text = "no configuration has worked yet" if best is None else f"best {best:.5g} {self.unit}"
        return f"kerntune: {self.kernel_name}: {done}/{total} configurations, {best_text}"

    def __call__(self, done, total, best):
        self.last = (done, total, best)
        if self.mode == "terminal":
            self.stream.write(f"\r{self.line()}   ")
            self.stream.flush()
        elif self.mode == "notebook":
            now = time.monotonic()
            if self.handle is None:
                self.handle = self.display(self.line(), display_id=True)
                self.updated = now
            elif now - self.updated >= self.NOTEBOOK_INTERVAL:
                self.handle.update(self.line())
                self.updated = now

    def close(self):
        """Ends the line (terminal), shows the last state (notebook) or writes the summary."""
        if self.last is None:
            return
        if self.mode == "terminal":
            self.stream.write("\n")
        elif self.mode == "notebook":
            if self.handle is None:
                self.display(self.line())
            else:
                self.handle.update(self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()


def _notebook_display():
    """IPython's ``display`` when running in a Jupyter kernel (whose standard error is no
    terminal, but whose cell output can be updated in place), else None."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if getattr(shell, "kernel", None) is None:
        return None
    from IPython.display import display

    return display
