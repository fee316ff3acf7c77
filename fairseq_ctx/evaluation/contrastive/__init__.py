"""Contrastive evaluation: does a model give the best score to the right
translation, when only the context tells which one is right?

Usage::

    python3 -m fairseq_ctx.evaluation.contrastive DATA-BIN --path CKPT --format voita \\
        --src deixis_dev.src --dst deixis_dev.dst --json deixis_dev.json \\
        [--bpe sentencepiece --sentencepiece-model spm.model] \\
        [--task document_translation --context-size 1 --concat-context] \\
        [--batch-size 32] [--max-tokens N] [--length-normalize] \\
        [--ties {official,wrong,right,half}] [--results results.json] [--scores-out scores.txt]
    # scores made elsewhere (any system), no model:
    python3 -m fairseq_ctx.evaluation.contrastive --format voita --src S --dst D --json J \\
        --scores-in scores.txt [--maximize] [--results results.json]

``DATA-BIN`` holds the dictionaries (``dict.{src,tgt}.txt``) the model was
trained with.  The model and its task come from the checkpoint
(``checkpoint_utils.load_model_ensemble_and_task``); ``--context-size``,
``--concat-context``/``--no-concat-context``, ``--source-lang`` and
``--target-lang`` are given in place of the checkpoint's task flags; as in
``fairseq-generate``, a ``--context-size`` other than it was trained with is
warned about and a ``--concat-context`` other than it was trained with (another
input format) stops in one line.  ``--task`` may be
given but must name the checkpoint's task: ``document_translation`` adds a
separator symbol to the dictionaries, so a checkpoint only loads with the task
it was trained with.  ``--path a.pt:b.pt`` scores with an ensemble (the mean of
the models' probabilities per token, as fairseq's ``SequenceScorer``).
``--bpe``/``--tokenizer`` split the text as for ``fairseq-generate``;
``--source-bpe-model``/``--target-bpe-model`` give one subword model per
language; more than 5% ``<unk>`` among the scored tokens of a side is warned
about (a model trained on subword units scored on words).

Score of a candidate = log p(current target sentence | current source
sentence, source context[, target context]), summed over its tokens
including the final ``</s>`` (natural log), by teacher forcing through the
model's forward pass, batched (``--batch-size`` candidates, and at most
``--max-tokens`` padded tokens with the context counted), never beam search.
The candidates of a source are batched together and, for encoder-decoder
models, the encoder runs once per distinct source + context of a batch;
``reorder_encoder_out`` hands its output to each candidate, as beam search
does for hypotheses (``--no-share-encoder``: the model's own forward per
candidate; the same scores).  ``--length-normalize`` divides by the number
of target tokens.  Identical inputs (same tokens of source, contexts and
target after ``--tokenizer``/``--bpe`` and the dictionary; unknown words
become ``<unk>``) are scored once, so they tie exactly.

How the context reaches the model is the task's business
(``DocumentTranslationTask.build_context_dataset`` / ``model_input``): the
newest ``--context-size`` context sentences (all when a group has fewer) go
to a context-aware architecture as ``ctx_tokens``,
are glued to the source with the separator when the task has
``--concat-context``, and are dropped for a sentence-level model (or a
checkpoint trained with ``--task translation``).  A model trained with
``--concat-context --target-context`` (the 2-to-2 concatenation baseline)
also gets the newest ``--context-size`` target context sentences, glued
before the candidate as a forced decoder prefix; only the candidate's own
tokens are scored.

What a model without target context can see, per suite:

* Voita et al. (2019): the candidates of a group share the source, the
  source context and the target context, and differ only in the current
  sentence.  Deixis (T/V forms, speaker gender) and lexical cohesion
  (consistent translation of a repeated name or word) are decided by the
  previous *translations*; English source context carries neither, so a
  source-context model can at best learn biases there.  In the ellipsis
  sets the elided material is in the context sentence on both sides, so
  source context can help there.
* ContraPro (Müller et al. 2018): the German pronoun agrees with the
  antecedent's German gender: the source context gives the antecedent, the
  target context its gender as translated.
* Bawden et al. (2018): in the anaphora set the four pairs of a block share
  the same source and source context and swap the correct and incorrect
  translations, so a model blind to the target context gives the same
  score to the same sentence in both roles: it is right on at most half the
  pairs (exactly half without ties), by design.  In the lexical-choice set
  89 of the 100 blocks have different source context sentences for their
  two examples, so source context can decide those.

A group (one test example: a source, its context, 2 or more candidate
translations, one of them true) is right when the true candidate has the
best score.  Ties follow ``--ties official`` (default): each suite's own
script, exactly: Voita's ``evaluate_consistency.py`` takes ``np.argmin`` of
the losses, so the first of the candidates tied for the best wins (a group
that lists the true translation twice, as some of ellipsis_vp and
ellipsis_infl do, is right when its first copy is ``true_ind``);
ContraPro's and Bawden's ``evaluate.py`` compare strictly, so a tie is
wrong.  ``wrong``, ``right`` and ``half`` (1/k for a k-way tie) apply one
rule to every format.  Scores are compared exactly (``--tie-tolerance``
default 0, as the scripts do); the number of groups whose true candidate
tied is always reported.

Score files (``--scores-out``, ``--scores-in``): one score per candidate
line, in the order of the text files (the order the official scripts
read); losses (negated log-probabilities, lower is better, what all three
official scripts expect by default) unless ``--maximize``
(log-probabilities).  Written at full precision, so our files can be fed to
the official scripts and theirs to ours, and ``--scores-out`` then
``--scores-in`` gives the same report.  The results JSON has ``accuracy``
(a fraction), ``correct``, ``groups``, ``tied`` and ``by`` (one breakdown
per key below), and ``blocks`` for Bawden's sets.

Formats (``--format``):

``voita`` (Voita et al., ACL 2019, "When a Good Translation is Wrong in
Context"): ``--src``/``--dst`` one candidate per line, the context sentences
and the current one joined by ``_eos`` (``--segment-separator``), oldest
first; ``--json`` a list with one entry per group, ``{"src": ..., "dst":
[candidates], "true_ind": i, "ctx_dist": d}``; the group's lines are the next
``len(dst)`` lines of the text files.  Text is taken from the text files (so
they may be preprocessed), grouping and labels from the JSON; the
``.dst`` lines' context part is the target context.  Reported overall and
by ``ctx_dist`` (1, 2, 3; Voita's script prints it for all but the ellipsis
sets).

``contrapro`` (Müller et al., WMT 2018): ``--json contrapro.json`` (a list of
``{"src segment", "ref segment", "src pronoun", "ref pronoun", "ante
distance", "errors": [{"contrastive", ...}], ...}``) and the files that
ContraPro's ``conversion_scripts/json2text_and_context.pl --context K``
writes: ``--src contrapro.text.en``/``--dst contrapro.text.de`` with, per
example, the reference line followed by one line per error, and optionally
``--src-context contrapro.context.en`` and ``--tgt-context
contrapro.context.de`` with K lines (oldest first; empty at a document
start) per text line; K is ``--context-lines`` or inferred from the line
counts.  True candidate: the reference.  Reported, as ContraPro's
``evaluate.py`` prints them, by antecedent distance (0, 1, 2, 3, >3), by
``src pronoun:ref pronoun`` (lower-cased) and by ``intrasegmental``.

``bawden`` (Bawden et al., NAACL 2018, "Evaluating Discourse Phenomena in
NMT", github.com/rbawden/discourse-mt-test-sets): ``--json`` the set itself,
``anaphora.json`` (``{id: {"src": [previous, current], "trg": [{"correct" or
"semi-correct": [prev, cur], "incorrect": [prev, cur], "type": ...}, ...]}}``)
or ``lexical-choice.json`` (``{id: {"examples": [{"src": [prev, cur], "trg":
{"correct": [prev, cur], "incorrect": [prev, cur]}}], "type": ...}}``); each
correct/incorrect pair is a group.  Or the files of the repository's
``json2rawtext.py`` (possibly preprocessed): ``--src X.current.en``,
``--src-context X.prev.en``, ``--dst X.current.fr``, ``--tgt-context
X.prev.fr``, two lines per group, correct first, grouped by the JSON when
given (which adds the breakdowns), else by consecutive line pairs.
Reported by type (``m.sg`` ... for anaphora, the block type for lexical
choice), by correct/semi-correct (anaphora), and the number of blocks
entirely right, as the set's ``evaluate.py``.

Malformed input stops with one line naming the file and line (or JSON
entry), e.g. ``fairseq_ctx: error: deixis_dev.dst: 999 lines, but
deixis_dev.json lists 1000 candidates in 500 groups``.

The package, one module per concern: :mod:`~fairseq_ctx.evaluation.contrastive.groups`
(what a test set is), :mod:`~fairseq_ctx.evaluation.contrastive.readers` (the suites'
files), :mod:`~fairseq_ctx.evaluation.contrastive.scores` (scores made elsewhere),
:mod:`~fairseq_ctx.evaluation.contrastive.accuracy` (ties and results),
:mod:`~fairseq_ctx.evaluation.contrastive.scorer` (a model's scores) and
:mod:`~fairseq_ctx.evaluation.contrastive.command` (the command line).  Everything
public is importable from the package itself.
"""
from fairseq_ctx.cli import build_encoders
from fairseq_ctx.evaluation.contrastive.accuracy import evaluate, format_results, group_credit
from fairseq_ctx.evaluation.contrastive.command import build_side_encoders, get_parser, load, main, parse_args
from fairseq_ctx.evaluation.contrastive.groups import (
    FORMATS,
    OFFICIAL_RULE,
    TIE_MODES,
    TIE_RULES,
    Candidate,
    ContrastiveDataError,
    Group,
)
from fairseq_ctx.evaluation.contrastive.readers import (
    read_bawden,
    read_contrapro,
    read_groups,
    read_json,
    read_lines,
    read_voita,
    split_segments,
)
from fairseq_ctx.evaluation.contrastive.scorer import ModelScorer, score_groups
from fairseq_ctx.evaluation.contrastive.scores import read_scores, write_scores

__all__ = [
    "FORMATS", "OFFICIAL_RULE", "TIE_MODES", "TIE_RULES", "Candidate", "ContrastiveDataError", "Group",
    "read_bawden", "read_contrapro", "read_groups", "read_json", "read_lines", "read_voita", "split_segments",
    "read_scores", "write_scores", "evaluate", "format_results", "group_credit", "ModelScorer", "score_groups",
    "build_encoders", "build_side_encoders", "get_parser", "load", "main", "parse_args",
]
