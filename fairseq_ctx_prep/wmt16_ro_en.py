"""WMT16 Romanian-English (``scripts/prepare-wmt16-ro-en.sh``;
``python3 -m fairseq_ctx_prep.wmt16_ro_en --help``). Steps in
``fairseq_ctx_prep.pipeline``.
"""
from __future__ import annotations

import argparse
import sys

from .pipeline import Command, Spec, pair_corpus


def make_spec(args: argparse.Namespace) -> Spec:
    """WMT16 Ro-En (Weng et al. 2020): Europarl v7 ro-en + SETimes2 (the
    ~0.6M pairs of the WMT16 task, as Sennrich et al.'s wmt16-scripts),
    newsdev2016 valid, newstest2016 test (GRET's "newstest2015/2016" cannot
    be: WMT15 had no Romanian; both WMT16 sets have 1999 sentences)."""
    src, tgt = args.direction.split("-")
    pair = f"{src}{tgt}"
    train = [
        pair_corpus("plain", "europarl-v7-ro", f"europarl-v7.ro-en.{src}", f"europarl-v7.ro-en.{tgt}"),
        pair_corpus("plain", "setimes2", f"SETIMES.en-ro.{src}|SETIMES2.en-ro.{src}",
                     f"SETIMES.en-ro.{tgt}|SETIMES2.en-ro.{tgt}"),
    ]
    return Spec(
        name=f"wmt16-{args.direction}", src=src, tgt=tgt,
        splits={"train": train,
                "valid": [pair_corpus("sgml", "wmt16-dev", f"dev/newsdev2016-{pair}-src.{src}.sgm",
                                       f"dev/newsdev2016-{pair}-ref.{tgt}.sgm")],
                "test": [pair_corpus("sgml", "wmt16-test", f"test/newstest2016-{pair}-src.{src}.sgm",
                                      f"test/newstest2016-{pair}-ref.{tgt}.sgm")]},
        tok={l: ("moses", l, True) for l in (src, tgt)},
        subword={"joint": ("bpe", args.merges)}, joined_dictionary=True,
        clean_ratio=args.clean_ratio,
        # huggingface/datasets datasets/wmt16/dataset_infos.json, ro-en:
        # validation (newsdev2016) 1999, test (newstest2016) 1999
        expected={"valid": (1999, "newsdev2016"), "test": (1999, "newstest2016")},
        paper_train="about 0.6M pairs (GRET)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--direction", choices=("ro-en", "en-ro"), default="ro-en")


COMMAND = Command("wmt16-ro-en", "WMT16 Romanian-English", "data/wmt16-ro-en",
                  make_spec, add_arguments)
main = COMMAND.main

if __name__ == "__main__":
    sys.exit(main())
