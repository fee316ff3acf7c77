"""scripts/suite_census.py: every Python process of a test recorded once,
attributed to its test file, summed per file."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import suite_census  # noqa: E402


@pytest.mark.unit
def test_processes_summed_per_test_file(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text('<testsuites><testsuite>'
                     '<testcase classname="tests.test_a" name="t1" time="2.5"/>'
                     '<testcase classname="tests.test_a" name="t2" time="1.0"/>'
                     '<testcase classname="tests.test_b" name="t3" time="4.0"/>'
                     '</testsuite></testsuites>')
    tsv = tmp_path / "processes.tsv"
    rows = [
        ("1", "0", "900.0", "1500.0", "", "/usr/lib/python3.11/site-packages/pytest/__main__.py tests -q"),  # runner
        ("2", "1", "5.0", "4.0", "tests/test_a.py::t1", "/site-packages/fairseq_cli/train.py data --arch x"),
        ("3", "1", "6.0", "4.5", "tests/test_a.py::t2", "/site-packages/fairseq_cli/train.py data"),
        ("4", "1", "2.0", "1.5", "tests/test_a.py::t2", "/repo/scripts/benchmark.py --json x"),
        ("5", "1", "3.0", "2.0", "tests/test_b.py::t3[p-1]", "-c"),
        ("6", "1", "1.0", "0.5", "", "-c"),  # an xdist worker: no test running when it exits
        ("7", "1", "1.0"),  # a line cut short is skipped
    ]
    tsv.write_text("".join("\t".join(r) + "\n" for r in rows))
    census = suite_census.aggregate(str(junit), str(tsv))
    assert list(census["files"]) == ["test_a.py", "test_b.py"]  # most CPU in processes first
    a = census["files"]["test_a.py"]
    assert (a["tests"], a["test_seconds"], a["processes"], a["process_cpu_s"], a["process_wall_s"]) == \
        (2, 3.5, 3, 10.0, 13.0)
    assert a["by_command"] == {"fairseq_cli/train.py": {"processes": 2, "cpu_s": 8.5},
                               "scripts/benchmark.py": {"processes": 1, "cpu_s": 1.5}}
    assert census["files"]["test_b.py"]["by_command"] == {"python -c": {"processes": 1, "cpu_s": 2.0}}
    assert census["totals"] == {"tests": 3, "test_seconds": 7.5, "processes": 4, "process_cpu_s": 12.0}
    assert census["unattributed"] == {"processes": 1, "process_cpu_s": 0.5}
    assert "test_a.py" in suite_census.table(census).splitlines()[1]


@pytest.mark.integration
def test_a_child_process_is_recorded_with_the_running_test(tmp_path):
    """The site hook, in a new interpreter started from this test: one line,
    naming this test (pytest's PYTEST_CURRENT_TEST is inherited), with the
    process's CPU time (a busy loop's, at least 0.05 s)."""
    log = tmp_path / "processes.tsv"
    env = dict(os.environ, SUITE_CENSUS_LOG=str(log), PYTHONPATH=suite_census.SITE)
    code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.1: pass"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == proc.stderr == ""  # the hook prints nothing
    (line,) = log.read_text().splitlines()
    pid, ppid, wall, cpu, test, argv = line.split("\t")
    assert int(ppid) == os.getpid() and argv == "-c"
    assert test == "tests/test_suite_census.py::test_a_child_process_is_recorded_with_the_running_test"
    assert float(cpu) >= 0.05 and float(wall) >= float(cpu) - 0.05
    # without the variable, nothing is written
    env.pop("SUITE_CENSUS_LOG")
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    assert len(log.read_text().splitlines()) == 1
