"""Loaded by every Python process that ``scripts/suite_census.py`` starts
(its directory goes first on PYTHONPATH): at exit, one line per process
appended to $SUITE_CENSUS_LOG: pid, parent pid, wall seconds since the
process began (forked ones included: read from /proc), its own CPU seconds,
the test that was running (pytest's PYTEST_CURRENT_TEST, which child
processes inherit) and the command. Nothing else: no output, only the
standard library, no change to what the process does."""
import os

if os.environ.get("SUITE_CENSUS_LOG"):
    import atexit

    def _record():
        import resource
        import sys

        with open("/proc/self/stat") as f:  # field 22: start, in clock ticks after boot
            started = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as f:
            wall = float(f.read().split()[0]) - started
        usage = resource.getrusage(resource.RUSAGE_SELF)
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        line = "\t".join([str(os.getpid()), str(os.getppid()), f"{wall:.2f}", f"{usage.ru_utime + usage.ru_stime:.2f}",
                          test, " ".join(sys.argv)[:300].replace("\t", " ").replace("\n", " ")])
        with open(os.environ["SUITE_CENSUS_LOG"], "a") as f:  # one short append: lines do not interleave
            f.write(line + "\n")

    atexit.register(_record)
