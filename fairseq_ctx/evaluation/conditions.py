"""The contexts an evaluation compares: one list, used by the context-usage
report (CXMI, contrastive and generated accuracy), the attribution command
and the study.

Which sentences are a sentence's context is the rule of
:mod:`fairseq_ctx.data.context_selection`; a *condition* is that rule set
to one of four values, the ones the papers' analyses use (Voita et al. 2018,
Sect. 6: a shuffled context; Fernandes et al. 2021, CXMI: the true context
against none; Yang et al. 2019 and the study's control: random sentences):

* ``true``: the sentences before it in its document (``--context-mode
  previous``), whatever rule the model was trained with (a model trained
  on random context, the study's control, is asked what the true context
  does for it); a test-suite item: its own context sentences;
* ``none``: no context, what a document's first sentence gets
  (``--context-size 0``);
* ``shuffled``: another sentence's true context, every sentence getting a
  different sentence's (a derangement, ``--shuffle-context``); an item:
  another item's context;
* ``random``: sentences drawn uniformly from the other sentences of the
  split, any document (``--context-mode random``); an item: the context of
  another item drawn at random.

A condition gives a corpus split's rule (:meth:`Condition.rule`, passed to
``DocumentTranslationTask.load_dataset(split, context_rule=...)``: the task's
configuration is never changed) and, for items whose context is given with
them (a contrastive set), whose context each item gets
(:meth:`Condition.donors`).  Both draw from the same seed.

:data:`GENERATION` lists the contexts a translation is *decoded* with for
generated accuracy, each with the condition its forced-decoding verdicts
are crossed with.
"""
from dataclasses import dataclass, replace
from typing import Dict, Tuple

import numpy as np

from fairseq_ctx.data.context_selection import ContextRule, derange


@dataclass(frozen=True)
class Condition:
    """One context condition (see the module docstring)."""

    name: str
    meaning: str
    # the rule's fields for a corpus split: mode, shuffled, and whether any context
    mode: str = "previous"
    shuffle: bool = False
    has_context: bool = True

    def rule(self, base: ContextRule, seed: int) -> ContextRule:
        """The context rule of a split under this condition: ``base``'s size
        (the model's ``--context-size``; 0 for ``none``) with this
        condition's mode, shuffling and ``seed``."""
        return replace(base, size=base.size if self.has_context else 0, mode=self.mode, shuffle=self.shuffle,
                       seed=seed)

    def donors(self, n: int, seed: int) -> np.ndarray:
        """For ``n`` items that carry their own context: ``donors[i]`` is the
        item whose context item ``i`` gets (``i`` itself for ``true``), -1
        for none."""
        items = np.arange(n, dtype=np.int64)
        if not self.has_context:
            return np.full(n, -1, dtype=np.int64)
        if self.mode == "random":   # one item drawn among the others, as the rule draws sentences
            return ContextRule(size=1, mode="random", seed=seed).index(items)[:, 0]
        if self.shuffle:
            return derange(items, np.random.default_rng(seed))
        return items


TRUE = Condition("true", "the sentences before it in its document")
NONE = Condition("none", "no context (a document's first sentence)", has_context=False)
SHUFFLED = Condition("shuffled", "another sentence's context (a derangement)", shuffle=True)
RANDOM = Condition("random", "sentences drawn at random from the split", mode="random")

# every condition, the true context first (what the others are compared with)
CONDITIONS: Tuple[Condition, ...] = (TRUE, NONE, SHUFFLED, RANDOM)
BY_NAME: Dict[str, Condition] = {c.name: c for c in CONDITIONS}
# those the true context is compared with (CXMI against each)
CONTROLS: Tuple[Condition, ...] = tuple(c for c in CONDITIONS if c is not TRUE)


@dataclass(frozen=True)
class Generation:
    """A context a contrastive item's source is translated with, and the
    forced-decoding condition whose verdicts its translations are crossed
    with (the "scores right, translates wrong" matrix)."""

    name: str
    meaning: str
    scored_with: Condition
    # the item's source context reaches the model (the newest --context-size sentences)
    source_context: bool = True
    # the item's reference target context is forced as the decoder's prefix
    # (only a model that takes target context can be given it)
    reference_prefix: bool = False
    # a model that takes target context gets its own translations of the
    # item's context sentences, decoded in order before the item
    own_translations: bool = False


GENERATION: Tuple[Generation, ...] = (
    Generation("own", "the item's context sentences decoded in order before it (a --target-context model gets "
               "its own previous translations; any other model the source context)", TRUE, own_translations=True),
    Generation("reference", "the source context, and the item's reference target context forced as the "
               "decoder's prefix", TRUE, reference_prefix=True),
    Generation("none", "the source alone, what a document's first sentence gets", NONE, source_context=False),
)
