"""Progress bars of the long-running tools (fairseq_ctx/progress.py,
fairseq_ctx_prep.files.progress_bar): drawn only on a terminal, as
fairseq's; status lines printed while a bar is shown stay whole."""
import io
import sys

import pytest

from fairseq_ctx import progress
from fairseq_ctx_prep.files import progress_bar
from fairseq_ctx_prep.text import map_file

pytestmark = pytest.mark.unit


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_step_bar_prints_above_the_bar_on_a_terminal(monkeypatch):
    out = FakeTerminal()
    monkeypatch.setattr(sys, "stdout", out)
    with progress.step_bar(2, "[table]") as bar:
        assert sys.stdout is not out
        print("[table] row A: trained", flush=True)
        bar.update()
        print("\n| table |")
        bar.update()
    assert sys.stdout is out
    text = out.getvalue()
    assert "[table]:   0%" in text and "0/2" in text  # tqdm redraws at most every 0.1 s
    lines = [line.split("\r")[-1] for line in text.splitlines()]
    assert "[table] row A: trained" in lines and "| table |" in lines


def test_step_bar_is_off_when_stdout_is_a_file(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with progress.step_bar(3, "[table]") as bar:
        assert sys.stdout is out
        print("line")
        bar.update(3)
    assert out.getvalue() == "line\n"


def test_prep_progress_bar_off_without_a_terminal(tmp_path, capsys):
    src = tmp_path / "train.en"
    src.write_text("a  b\nc\n")
    assert map_file(src, tmp_path / "out.en", ("plain",), workers=1) == 2
    assert (tmp_path / "out.en").read_text() == "a b\nc\n"
    assert capsys.readouterr().err == ""
    with progress_bar(2, "x") as bar:
        bar.update(2)
