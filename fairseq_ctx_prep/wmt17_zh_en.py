"""WMT17 Chinese-English (``scripts/prepare-wmt17-zh-en.sh``;
``python3 -m fairseq_ctx_prep.wmt17_zh_en --help``). Steps in
``fairseq_ctx_prep.pipeline``.
"""
from __future__ import annotations

import argparse
import sys

from .files import PrepError
from .pipeline import Command, Spec, pair_corpus


def make_spec(args: argparse.Namespace) -> Spec:
    """WMT17 Zh-En (Yang et al. 2019; Weng et al. 2020): News Commentary v12
    and the UN Parallel Corpus v1.0 (OPUS copy) by default, CWMT or anything
    else with --extra-train (it needs registration); newsdev2017 valid,
    newstest2017 test. English: Moses + subword-nmt BPE. Chinese: no word
    segmenter here (jieba is not a dependency; Moses cannot segment
    Chinese), so a sentencepiece BPE model is learned on the untokenized
    Chinese text and does segmentation and subwords in one step.
    Separate dictionaries (no shared script)."""
    corpora = [c.strip() for c in args.corpora.split(",") if c.strip()]
    train = []
    for c in corpora:
        if c == "nc-v12":
            train.append(pair_corpus("plain", "nc-v12", "training/news-commentary-v12.zh-en.zh",
                                      "training/news-commentary-v12.zh-en.en"))
        elif c == "un":
            train.append(pair_corpus("plain", "unpc", "UNPC.en-zh.zh", "UNPC.en-zh.en"))
        else:
            raise PrepError(f"--corpora: unknown corpus {c!r} (choose from nc-v12, un)")
    if not train and not args.extra_train:
        raise PrepError("--corpora is empty and no --extra-train was given")
    return Spec(
        name="wmt17-zh-en", src="zh", tgt="en",
        splits={"train": train,
                "valid": [pair_corpus("sgml", "wmt17-dev", "dev/newsdev2017-zhen-src.zh.sgm",
                                       "dev/newsdev2017-zhen-ref.en.sgm")],
                "test": [pair_corpus("sgml", "wmt17-test", "test/newstest2017-zhen-src.zh.sgm",
                                      "test/newstest2017-zhen-ref.en.sgm")]},
        tok={"zh": ("plain",), "en": ("moses", "en", True)},
        subword={"zh": ("spm", args.zh_vocab_size, 0.9995), "en": ("bpe", args.merges)},
        joined_dictionary=False, clean_ratio=args.clean_ratio,
        settings={"corpora": corpora},
        # GRET (Weng et al. 2020, Sect. 3.1 "Data-sets"): newsdev2017 2002, newstest2017 2001
        expected={"valid": (2002, "newsdev2017"), "test": (2001, "newstest2017")},
        paper_train="about 20.62M pairs (ctxsan, all of WMT17 incl. CWMT), about 7.5M (GRET)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpora", default="nc-v12,un",
                        help="comma-separated training corpora: nc-v12, un (default: nc-v12,un)")
    parser.add_argument("--zh-vocab-size", type=int, default=32000,
                        help="sentencepiece BPE vocabulary of the Chinese side (default: 32000)")


COMMAND = Command("wmt17-zh-en", "WMT17 Chinese-English", "data/wmt17-zh-en",
                  make_spec, add_arguments)
main = COMMAND.main

if __name__ == "__main__":
    sys.exit(main())
