"""OpenSubtitles2018 English-Russian as released by Voita et al.
(``scripts/prepare-opensubtitles-en-ru.sh``; ``python3 -m
fairseq_ctx_prep.opensubtitles_en_ru --help``). Steps in
``fairseq_ctx_prep.pipeline``.
"""
from __future__ import annotations

import argparse
import sys

from .pipeline import Command, Spec, pair_corpus


def make_spec(args: argparse.Namespace) -> Spec:
    """OpenSubtitles2018 En-Ru as released by Voita et al. (2019) for
    context-aware NMT: ``context_aware/{en,ru}_{train,dev,test}``, each line a
    group of 4 consecutive sentences joined by ``_eos``. Each group becomes a
    4-line document (one docid per line), so ``--task document_translation``
    gives each sentence the previous sentence(s) of its group. Already
    tokenized: no tokenizer. Joint subword-nmt BPE (one codes file, usable
    with ``fairseq_ctx.contrastive --bpe subword_nmt --bpe-codes``), separate
    dictionaries (Voita et al.: source and target vocabularies)."""
    arch = "voita-opensubs"

    def member(lang, split):
        return (f"data_to_publish/context_aware/{lang}_{split}|context_aware/{lang}_{split}")
    splits = {split: [pair_corpus("groups", arch, member("en", name), member("ru", name))]
              for split, name in (("train", "train"), ("valid", "dev"), ("test", "test"))}
    return Spec(
        name="opensubtitles-en-ru", src="en", tgt="ru", splits=splits,
        tok={"en": ("plain",), "ru": ("plain",)},
        subword={"joint": ("bpe", args.merges)}, joined_dictionary=False,
        clean_ratio=args.clean_ratio, docids=True,
        # the repository's README ("Training data") gives 1.5m for the
        # context_aware (CADec) data and no dev/test sizes: nothing checked
        paper_train="1.5m for context_aware (Voita et al. 2019 README); the 2018 paper: about 2M instances")


COMMAND = Command("opensubtitles-en-ru", "OpenSubtitles2018 En-Ru (Voita et al.)",
                  "data/opensubtitles-en-ru", make_spec, clean_ratio=0.0, extra_train=False)
main = COMMAND.main

if __name__ == "__main__":
    sys.exit(main())
