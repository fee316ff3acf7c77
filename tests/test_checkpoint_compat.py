"""Checkpoints stay loadable: parameter names are the checkpoint format.

``tests/fixtures/checkpoints/*.pt`` hold a tiny model of each architecture
with the outputs (full forward and step-by-step decoding) that the code of
their time computed (``tests/fixtures/make_checkpoints.py``, written by the
code before the ctxsan layers moved to fairseq's hooks). Today's code must
load every key (strict) and give the same outputs.
"""
from pathlib import Path

import pytest
import torch

import fairseq_ctx  # noqa: F401  (registers the architectures)
from tests.fixtures.make_checkpoints import VARIANTS, outputs
from tests.utils import build_model

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "checkpoints"


@pytest.mark.parametrize("name", list(VARIANTS))
def test_old_checkpoint_loads_and_gives_the_same_outputs(name):
    saved = torch.load(FIXTURES / f"{name}.pt", weights_only=True)
    assert [saved["arch"], saved["flags"]] == list(VARIANTS[name])
    model = build_model(saved["arch"], ["--dropout", "0", *saved["flags"]]).eval()
    model.load_state_dict(saved["model"], strict=True)
    full, steps = outputs(model, saved["src"], saved["lengths"], saved["prev"], saved["ctx"])
    torch.testing.assert_close(full, saved["full"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(steps, saved["steps"], atol=1e-5, rtol=1e-5)
