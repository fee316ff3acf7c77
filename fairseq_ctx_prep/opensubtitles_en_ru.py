"""OpenSubtitles2018 English-Russian as released by Voita et al.
(``scripts/prepare-opensubtitles-en-ru.sh``; ``python3 -m
fairseq_ctx_prep.opensubtitles_en_ru --help``). Steps in
``fairseq_ctx_prep.pipeline``.
"""
from __future__ import annotations

import argparse
import sys

from .archives import voita2018
from .pipeline import Command, Corpus, Spec, pair_corpus


def make_spec(args: argparse.Namespace) -> Spec:
    """``--release 2018`` (default): the data of Voita et al. 2018, the
    paper of the Voita table (data.statmt.org/acl18_contextnmt_data):
    {train,dev,test}.{en,ru} with the previous English sentence of every
    instance in ``.en.context``; already tokenized. Every instance keeps its
    context as an explicit context file (``bin/{split}.en-ru.context.en``,
    read by ``--task document_translation``; no docids); separate subword-nmt
    BPE per language (``--merges`` each: "source and target vocabularies of
    about 32k"), separate dictionaries.

    ``--release 2019``: Voita et al. 2019's ``context_aware/{en,ru}_{train,
    dev,test}``, each line a group of 4 consecutive sentences joined by
    ``_eos``; each group becomes a 4-line document (one docid per line), so
    the document task gives each sentence the previous sentence(s) of its
    group (none for the first of a group), and ``next``/``random`` context
    and the consistency test sets work. Joint subword-nmt BPE (one codes
    file, usable with ``fairseq_ctx.evaluation.contrastive --bpe subword_nmt
    --bpe-codes``), separate dictionaries."""
    if args.release == "2018":
        def corpus(name):
            return Corpus("plain", (voita2018(f"{name}.en"), None), (voita2018(f"{name}.ru"), None),
                          ctx=(voita2018(f"{name}.en.context"), None))
        splits = {split: [corpus(name)] for split, name in (("train", "train"), ("valid", "dev"),
                                                              ("test", "test"))}
        return Spec(
            name="opensubtitles-en-ru", src="en", tgt="ru", splits=splits,
            tok={"en": ("plain",), "ru": ("plain",)},
            subword={"en": ("bpe", args.merges), "ru": ("bpe", args.merges)}, joined_dictionary=False,
            clean_ratio=args.clean_ratio, context=True, settings={"release": "2018"},
            # Voita et al. 2018 as summarised in shared/papers/ctxenc-...-summary.md:
            # "two subsets of 10000 instances" (dev, test), "around 2 million" for training
            expected={"valid": (10000, "dev of Voita et al. 2018"), "test": (10000, "test of Voita et al. 2018")},
            paper_train="about 2M instances (Voita et al. 2018)")
    arch = "voita-opensubs"

    def member(lang, split):
        return (f"data_to_publish/context_aware/{lang}_{split}|context_aware/{lang}_{split}")
    splits = {split: [pair_corpus("groups", arch, member("en", name), member("ru", name))]
              for split, name in (("train", "train"), ("valid", "dev"), ("test", "test"))}
    return Spec(
        name="opensubtitles-en-ru-2019", src="en", tgt="ru", splits=splits,
        tok={"en": ("plain",), "ru": ("plain",)},
        subword={"joint": ("bpe", args.merges)}, joined_dictionary=False,
        clean_ratio=args.clean_ratio, docids=True, settings={"release": "2019"},
        # the repository's README ("Training data") gives 1.5m for the
        # context_aware (CADec) data and no dev/test sizes: nothing checked
        paper_train="1.5m for context_aware (Voita et al. 2019 README)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--release", choices=("2018", "2019"), default="2018",
                        help="2018 (default): Voita et al. 2018's data, every instance with its previous "
                             "sentence (the Voita table; DEST data/opensubtitles-en-ru); 2019: the groups "
                             "of 4 of Voita et al. 2019 as documents with docids (next/random context, "
                             "consistency test sets; DEST data/opensubtitles-en-ru-2019)")


COMMAND = Command("opensubtitles-en-ru", "OpenSubtitles2018 En-Ru (Voita et al.)",
                  "data/opensubtitles-en-ru (2019 release: data/opensubtitles-en-ru-2019)", make_spec,
                  add_arguments, clean_ratio=0.0, extra_train=False)
main = COMMAND.main

if __name__ == "__main__":
    sys.exit(main())
