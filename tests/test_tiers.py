"""The test tiers (tests/conftest.py): which tier a test's markers put it in,
and the hand-kept list of slowest files holds no file of unit tests only."""
import re
from pathlib import Path

import pytest

from tests.conftest import SLOWEST_FILES_FIRST, TIERS, tier

pytestmark = pytest.mark.unit

HERE = Path(__file__).parent


@pytest.mark.parametrize("marks, expected", [
    ({"unit"}, "unit"),
    ({"parametrize", "slow"}, "slow"),
    ({"integration", "skipif"}, "integration"),
    (set(), "integration"),  # names none
    ({"parametrize"}, "integration"),
    ({"gpu", "skipif"}, None),
    ({"gpu", "unit"}, "unit"),
])
def test_the_tier_a_tests_markers_name(marks, expected):
    assert tier(marks) == expected


def test_two_tiers_are_an_error():
    with pytest.raises(ValueError, match="one tier, not integration and unit"):
        tier({"unit", "integration"})


def test_the_tiers_are_unit_slow_integration():
    assert list(TIERS) == ["unit", "slow", "integration"]


@pytest.mark.parametrize("name", SLOWEST_FILES_FIRST)
def test_the_slowest_files_are_not_unit_only(name):
    """The list orders files for the full run's two workers; a file of unit
    tests only (its module marked unit) takes seconds and has no place in it."""
    text = (HERE / name).read_text()
    assert not re.search(r"^pytestmark = pytest\.mark\.unit$", text, re.M), name
