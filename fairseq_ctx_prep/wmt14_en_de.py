"""WMT14 English-German, either direction (``scripts/prepare-wmt14-en-de.sh``;
``python3 -m fairseq_ctx_prep.wmt14_en_de --help``). Sources and processing
are listed in the script's header and in ``make_spec``; the steps in
``fairseq_ctx_prep.pipeline``.
"""
from __future__ import annotations

import argparse
import sys

from .pipeline import Command, Spec, pair_corpus


def make_spec(args: argparse.Namespace) -> Spec:
    """WMT14 En-De (Vaswani et al. 2017; Yang et al. 2019; Weng et al. 2020;
    Ampomah et al. 2021): Europarl v7 + CommonCrawl + News Commentary (v9 =
    WMT14's, default; v12 = fairseq's default recipe), newstest2013 valid
    (plain text of WMT17's dev.tgz), newstest2014 test (test-full: all 3003
    sentences). Same train/valid data for both directions; the direction
    picks the test SGML files and the binarized language order."""
    src, tgt = args.direction.split("-")
    nc = f"nc-{args.news_commentary}"
    train = [
        pair_corpus("plain", "europarl-v7", f"training/europarl-v7.de-en.{src}",
                     f"training/europarl-v7.de-en.{tgt}"),
        pair_corpus("plain", "commoncrawl", f"commoncrawl.de-en.{src}", f"commoncrawl.de-en.{tgt}"),
        pair_corpus("plain", nc, f"training/news-commentary-{args.news_commentary}.de-en.{src}",
                     f"training/news-commentary-{args.news_commentary}.de-en.{tgt}"),
    ]
    return Spec(
        name=f"wmt14-{args.direction}", src=src, tgt=tgt,
        splits={"train": train,
                "valid": [pair_corpus("plain", "wmt17-dev", f"dev/newstest2013.{src}",
                                       f"dev/newstest2013.{tgt}")],
                "test": [pair_corpus("sgml", "wmt14-test",
                                      f"test-full/newstest2014-deen-src.{src}.sgm",
                                      f"test-full/newstest2014-deen-ref.{tgt}.sgm")]},
        tok={l: ("moses", l, True) for l in (src, tgt)},
        subword={"joint": ("bpe", args.merges)}, joined_dictionary=True,
        clean_ratio=args.clean_ratio,
        settings={"news_commentary": args.news_commentary},
        # sizes as listed by huggingface/datasets datasets/wmt14 (README, splits
        # table: validation 3000 = newstest2013, test 3003 = newstest2014 full)
        expected={"valid": (3000, "newstest2013"), "test": (3003, "newstest2014 (full)")},
        paper_train="about 4.5M pairs (Vaswani et al. 2017; DC; GRET), 4.56M (ctxsan)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--direction", choices=("en-de", "de-en"), default="en-de")
    parser.add_argument("--news-commentary", choices=("v9", "v12"), default="v9",
                        help="News Commentary release: v9 (WMT14's, default) or v12 (fairseq's recipe)")


COMMAND = Command("wmt14-en-de", "WMT14 English-German (either direction)",
                  "data/wmt14-en-de (data/wmt14-de-en with --direction de-en)",
                  make_spec, add_arguments)
main = COMMAND.main

if __name__ == "__main__":
    sys.exit(main())
