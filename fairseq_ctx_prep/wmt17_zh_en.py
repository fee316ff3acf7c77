"""WMT17 Chinese-English (``scripts/prepare-wmt17-zh-en.sh``;
``python3 -m fairseq_ctx_prep.wmt17_zh_en --help``). Steps in
``fairseq_ctx_prep.pipeline``.
"""
from __future__ import annotations

import argparse
import sys

from .archives import CWMT, CWMT_CORPORA, cwmt_member
from .files import PrepError
from .pipeline import Command, Corpus, Spec, pair_corpus

CORPORA = ("nc-v12", "un", "cwmt")

# One preset per paper: its corpora and the training size it reports.
# ctxsan (Yang et al. 2019, "Experiments"): "all of the available parallel
# corpus from WMT17 dataset, consisting of about 20.62 million sentence pairs".
# GRET (Weng et al. 2020, Sect. 3.1): "WMT17 as training set which consists
# of about 7.5M sentence pairs", corpora not named. UN alone has 15,886,041
# lines (the comments of tensorflow/tensor2tensor data_generators/
# translate_enzh.py), more than 7.5M, so GRET cannot have used all of it;
# NC v12 (227k lines, ibid.) + CWMT (casia2015 1,050,000, casict2015 2,036,833,
# datum2015 1,000,003, datum2017 1,999,968, NEU2017 2,000,000 lines, ibid.,
# 8.09M before casict2011 and cleaning) is the reading taken here; a count more
# than 10% away from 7.5M is warned about.
PRESETS = {
    "ctxsan": {"corpora": ("nc-v12", "un", "cwmt"), "pairs": 20_620_000,
               "paper": "about 20.62M pairs (ctxsan: all of WMT17)"},
    "gret": {"corpora": ("nc-v12", "cwmt"), "pairs": 7_500_000,
             "paper": "about 7.5M pairs (GRET; corpora not named: NC v12 + CWMT taken)"},
}


def make_spec(args: argparse.Namespace) -> Spec:
    """WMT17 Zh-En (Yang et al. 2019; Weng et al. 2020); newsdev2017 valid,
    newstest2017 test. ``--corpus ctxsan`` (default): News Commentary v12,
    the UN Parallel Corpus v1.0 (OPUS copy) and CWMT, i.e. all of WMT17's
    Zh-En data, as ctxsan; ``--corpus gret``: NC v12 + CWMT (GRET's 7.5M
    pairs; see PRESETS). CWMT needs a registration: it is read from ``--from
    DIR`` (cwmt.tgz or its unpacked folders; the error says where to get it).
    ``--corpora`` overrides a preset's list; ``--extra-train`` adds any file
    pair.

    English: Moses + subword-nmt BPE. Chinese: no word segmenter; a
    sentencepiece BPE model learned on the raw Chinese text segments and
    splits into subwords in one step (datum2017's pre-segmented Chinese is
    joined back first). The papers say nothing about Chinese segmentation;
    sentencepiece needs no segmenter dictionary (jieba's output depends on
    its dictionary version, and it would be one more dependency for a step
    the papers do not describe) and is reversible (its pieces join back to
    the raw text). Separate dictionaries (no shared script)."""
    preset = PRESETS[args.corpus]
    corpora = ([c.strip() for c in args.corpora.split(",") if c.strip()] if args.corpora is not None
               else list(preset["corpora"]))
    train = []
    for c in corpora:
        if c == "nc-v12":
            train.append(pair_corpus("plain", "nc-v12", "training/news-commentary-v12.zh-en.zh",
                                     "training/news-commentary-v12.zh-en.en"))
        elif c == "un":
            train.append(pair_corpus("plain", "unpc", "UNPC.en-zh.zh", "UNPC.en-zh.en"))
        elif c == "cwmt":
            for folder, zh, en in CWMT_CORPORA:
                kind = "unsegment-src" if folder == "datum2017" else "plain"
                train.append(Corpus(kind, (CWMT, cwmt_member(folder, zh)), (CWMT, cwmt_member(folder, en))))
        else:
            raise PrepError(f"--corpora: unknown corpus {c!r} (choose from {', '.join(CORPORA)})")
    if not train and not args.extra_train:
        raise PrepError("--corpora is empty and no --extra-train was given")
    custom = args.corpora is not None or bool(args.extra_train)
    return Spec(
        # one output per preset (default DEST data/wmt17-zh-en, data/wmt17-zh-en-gret)
        name="wmt17-zh-en" + ("" if args.corpus == "ctxsan" else f"-{args.corpus}"), src="zh", tgt="en",
        splits={"train": train,
                "valid": [pair_corpus("sgml", "wmt17-dev", "dev/newsdev2017-zhen-src.zh.sgm",
                                      "dev/newsdev2017-zhen-ref.en.sgm")],
                "test": [pair_corpus("sgml", "wmt17-test", "test/newstest2017-zhen-src.zh.sgm",
                                     "test/newstest2017-zhen-ref.en.sgm")]},
        tok={"zh": ("plain",), "en": ("moses", "en", True)},
        subword={"zh": ("spm", args.zh_vocab_size, 0.9995), "en": ("bpe", args.merges)},
        joined_dictionary=False, clean_ratio=args.clean_ratio,
        settings={"corpora": corpora, "corpus": args.corpus},
        # GRET (Weng et al. 2020, Sect. 3.1 "Data-sets"): newsdev2017 2002, newstest2017 2001
        expected={"valid": (2002, "newsdev2017"), "test": (2001, "newstest2017")},
        paper_train=preset["paper"] + (" (corpora changed by --corpora/--extra-train)" if custom else ""),
        paper_train_pairs=preset["pairs"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", choices=sorted(PRESETS), default="ctxsan",
                        help="the training data of one paper: ctxsan (default) = NC v12 + UN + CWMT, all "
                             "of WMT17 (about 20.62M pairs); gret = NC v12 + CWMT (about 7.5M). CWMT is "
                             "read from --from DIR")
    parser.add_argument("--corpora", default=None,
                        help="comma-separated training corpora instead of the preset's: "
                             + ", ".join(CORPORA))
    parser.add_argument("--zh-vocab-size", type=int, default=32000,
                        help="sentencepiece BPE vocabulary of the Chinese side (default: 32000)")


COMMAND = Command("wmt17-zh-en", "WMT17 Chinese-English", "data/wmt17-zh-en (--corpus gret: data/wmt17-zh-en-gret)",
                  make_spec, add_arguments)
main = COMMAND.main

if __name__ == "__main__":
    sys.exit(main())
