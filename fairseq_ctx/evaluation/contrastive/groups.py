"""What a contrastive test set is, whatever its format: groups of candidate
translations of which one is right, the tie rules of the suites' own
scripts, and the error of a test-set file that cannot be read.  Every
other module of :mod:`fairseq_ctx.evaluation.contrastive` works on these.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

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


def text_tokens(dictionary, encode: Callable[[str], str], text: str):
    """``text`` as the model reads it: ``encode`` (the side's tokenizer and
    subword model), then ``dictionary``'s ids with ``</s>``; no new symbols."""
    return dictionary.encode_line(encode(text), add_if_not_exist=False, append_eos=True).long()


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

    def tokens(self, src_dict, tgt_dict, encode_source: Callable[[str], str], encode_target: Callable[[str], str],
               context_size: int, target_context_size: int = 0) -> Tuple:
        """``(source, source context, target, target context)`` token tensors
        as a model with ``context_size`` source and ``target_context_size``
        target context sentences reads them (the newest of each, the task's
        rule)."""
        from fairseq_ctx.data.context_selection import ContextRule

        src = text_tokens(src_dict, encode_source, self.source)
        ctx = [text_tokens(src_dict, encode_source, s) for s in ContextRule(size=context_size).newest(self.source_context)]
        tgt = text_tokens(tgt_dict, encode_target, self.target)
        tctx = [text_tokens(tgt_dict, encode_target, s)
                for s in ContextRule(size=target_context_size).newest(self.target_context)]
        return src, ctx, tgt, tctx


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
