"""What a contrastive test set is, whatever its format: groups of candidate
translations of which one is right, the tie rules of the suites' own
scripts, and the error of a test-set file that cannot be read.  Every
other module of :mod:`fairseq_ctx.evaluation.contrastive` works on these.
"""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from fairseq_ctx.errors import FairseqCtxError

FORMATS = ("voita", "contrapro", "bawden")
TIE_MODES = ("official", "wrong", "right", "half")
# How each suite's own evaluation script treats a tie for the best score
# (``--ties official``): Voita's evaluate_consistency.py takes ``np.argmin`` of
# the losses, so the first of the tied candidates wins; ContraPro's
# evaluate.py and Bawden's evaluate.py compare strictly, so a tie is wrong.
OFFICIAL_RULE = {"voita": "first", "contrapro": "strict", "bawden": "strict"}
TIE_RULES = ("first", "strict")


class ContrastiveDataError(FairseqCtxError):
    """A contrastive test set file that cannot be read as its format says."""


@dataclass
class Candidate:
    """One translation to score: ``target`` given ``source``, the source
    context sentences and the target context sentences (the previous
    translations), both oldest first.  ``where`` names its file and line."""
    source: str
    target: str
    source_context: List[str] = field(default_factory=list)
    where: str = ""
    target_context: List[str] = field(default_factory=list)


@dataclass
class Group:
    """One contrastive example: candidates of which ``true_index`` is right;
    ``meta`` holds the values results are broken down by; ``rule`` is the
    official tie rule of its suite (``first`` or ``strict``, see
    ``OFFICIAL_RULE``); ``block`` the id of the block of examples it belongs
    to (Bawden et al. report how many blocks are entirely right)."""
    candidates: List[Candidate]
    true_index: int
    meta: Dict[str, Any] = field(default_factory=dict)
    where: str = ""
    rule: str = "strict"
    block: Optional[str] = None
