"""What a tuning shows while it runs (``progress=True``): a line redrawn in place on a
terminal, a line updated in place in a notebook, and only one summary line elsewhere."""

import io

from kerntune._progress import _Progress


class Stream(io.StringIO):
    def __init__(self, terminal):
        super().__init__()
        self.terminal = terminal

    def isatty(self):
        return self.terminal


def run(progress):
    for done, best in [(1, None), (2, 0.5), (3, 0.25)]:
        progress(done, 3, best)
    progress.close()


def test_without_a_terminal_a_run_writes_one_summary_line_at_the_end():
    stream = Stream(terminal=False)
    progress = _Progress("matmul_kernel", "time", stream=stream, display=None)
    progress(1, 3, None)
    assert stream.getvalue() == "", "nothing while the run goes"
    progress(3, 3, 0.25)
    progress.close()
    assert stream.getvalue() == "kerntune: matmul_kernel: 3/3 configurations, best 0.25 ms\n"


def test_on_a_terminal_the_line_is_redrawn_in_place_and_ended_once():
    stream = Stream(terminal=True)
    run(_Progress("matmul_kernel", "TFLOP/s", stream=stream))
    text = stream.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1, repr(text)
    assert "\rkerntune: matmul_kernel: 1/3 configurations, no configuration has worked yet" in text
    assert "\rkerntune: matmul_kernel: 3/3 configurations, best 0.25 TFLOP/s" in text


def test_in_a_notebook_one_output_is_updated_in_place():
    shown = []

    class Handle:
        def update(self, text):
            shown.append(("update", text))

    def display(text, display_id=False):
        shown.append(("display", text))
        return Handle() if display_id else None

    stream = Stream(terminal=False)
    progress = _Progress("matmul_kernel", "time", stream=stream, display=display)
    progress.NOTEBOOK_INTERVAL = 0.0
    run(progress)
    assert stream.getvalue() == "", "the notebook's line, not standard error"
    assert [kind for kind, _ in shown] == ["display", "update", "update", "update"], shown
    assert shown[-1][1] == "kerntune: matmul_kernel: 3/3 configurations, best 0.25 ms"


def test_a_run_that_evaluated_nothing_says_nothing():
    stream = Stream(terminal=False)
    _Progress("matmul_kernel", "time", stream=stream, display=None).close()
    assert stream.getvalue() == ""
