"""Every planted bug of ``scripts/mutation_check.py`` still applies to the
code as it is: its file exists, its text occurs exactly once there, the
replacement changes the file, and the tests it names exist. (The mutation
check itself is slow and not part of the suite; this keeps its list from
rotting when code moves. docs/mutation.md states how many mutants there are.)
"""
import re

import pytest

from tests.utils import REPO, load_script

pytestmark = pytest.mark.unit


MUTATION = load_script("mutation_check")
MUTANTS = MUTATION.MUTANTS


def test_names_are_unique():
    names = [m.name for m in MUTANTS]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_pattern_occurs_exactly_once(mutant):
    path = REPO / mutant.file
    assert path.is_file(), f"{mutant.name}: no file {mutant.file}"
    source = path.read_text()
    assert source.count(mutant.old) == 1, (
        f"{mutant.name}: {mutant.old!r} occurs {source.count(mutant.old)} times in {mutant.file}")
    assert mutant.new != mutant.old and source.replace(mutant.old, mutant.new) != source
    # the mutant is still Python: a stale replacement would be a syntax error, not a bug to catch
    compile(source.replace(mutant.old, mutant.new), str(path), "exec")
    # the check reports exactly this entry as applicable
    assert MUTATION.check_entry(REPO, mutant) == ""


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_covering_tests_exist(mutant):
    assert mutant.tests
    for test in mutant.tests:
        file, _, node = test.partition("::")
        path = REPO / file
        assert path.is_file(), f"{mutant.name}: no test file {file}"
        if node:
            name = node.split("[")[0]
            assert re.search(rf"^def {re.escape(name)}\(", path.read_text(), re.M), f"{mutant.name}: no {test}"


@pytest.mark.parametrize("prefix", MUTATION.NOT_EQUATION_TESTS)
def test_deselected_tests_exist(prefix):
    """Each node-id prefix the check deselects names a test file, and a
    test function when it has a ``::`` part (pytest matches by prefix)."""
    file, _, node = prefix.partition("::")
    path = REPO / file
    assert path.is_file(), f"no test file {file}"
    if node:
        assert re.search(rf"^def {re.escape(node)}", path.read_text(), re.M), f"no test starts with {prefix}"


def test_docs_state_the_number_of_mutants():
    text = (REPO / "docs" / "mutation.md").read_text()
    m = re.search(r"The list holds (\d+) mutants", text)
    assert m, "docs/mutation.md: no 'The list holds N mutants'"
    assert int(m.group(1)) == len(MUTANTS)
