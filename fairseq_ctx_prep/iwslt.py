"""IWSLT14 es-en/ro-en and IWSLT15 fr-en/en-vi, the Dual Contextual paper's
IWSLT tasks (``scripts/prepare-iwslt.sh``; ``python3 -m fairseq_ctx_prep.iwslt
--help``). Steps in ``fairseq_ctx_prep.pipeline``.
"""
from __future__ import annotations

import argparse
import sys
from typing import Dict, List

from .archives import stanford_envi, wit3_archive
from .pipeline import Command, Corpus, Spec

# train: the DC paper's sizes (section 4.1). expected: published sizes of
# the valid/test sets, only where we found one: En-Vi tst2012 1553 (the DC
# paper; stefan-it/nmt-en-vi README: dev 1,553, test 1,268, train 133,317).
# No published size of the WIT3 es-en/ro-en/fr-en sets was found: not checked.
IWSLT_PAIRS = {
    "es-en": {"release": "2014", "vocab": 34000, "train": "183k pairs (DC)",
              "valid": ["tst2010", "tst2011", "tst2012", "dev2010"], "test": ["tst2014"]},
    "ro-en": {"release": "2014", "vocab": 32000, "train": "182k pairs (DC)",
              "valid": ["tst2010", "tst2011", "tst2012", "dev2010"], "test": ["tst2014"]},
    "fr-en": {"release": "2015", "vocab": 31000, "train": "207k pairs (DC)",
              "valid": ["tst2013"], "test": ["tst2014", "tst2015"]},
    "en-vi": {"release": "stanford", "vocab": 21000, "train": "133k pairs (DC)",
              "valid": ["tst2012"], "test": ["tst2013"],
              "expected": {"valid": (1553, "tst2012 of the Stanford En-Vi release"),
                           "test": (1268, "tst2013 of the Stanford En-Vi release")}},
}


def make_spec(args: argparse.Namespace) -> Spec:
    """IWSLT tasks of the DC paper; one prepared pair serves both directions.

    * es-en, ro-en: IWSLT14 (WIT3 release 2014-01, English-to-X archives
      ``texts/en/X/en-X.tgz``): train.tags, valid = tst2010+tst2011+tst2012+
      dev2010, test = tst2014 from the test release 2014-01-test.
    * fr-en: IWSLT15 (2015-01, ``texts/fr/en/fr-en.tgz``): valid = tst2013,
      test = tst2014 + tst2015; tst2015 comes from the test release
      2015-01-test, whose archives hold the source side only: the French
      from ``texts/fr/en/fr-en.tgz``, the English from ``texts/en/fr/en-fr.tgz``,
      matched by talk and segment id.
    * en-vi: the IWSLT15 En-Vi files of Luong & Manning (Stanford; 133k
      train, tst2012 valid, tst2013 test: the DC paper's sizes), already
      Moses-tokenized and Moses-escaped (``&apos;``, ``&quot;``, ``&amp;``):
      the escaping is undone when the text is read, so ``text/`` (the BLEU
      references) holds the real characters; no tokenizer.
    """
    pair = args.pair
    conf = IWSLT_PAIRS[pair]
    src, tgt = pair.split("-")
    splits: Dict[str, List[Corpus]] = {}
    if conf["release"] == "stanford":
        def files(split):
            return Corpus("unescape", (stanford_envi(f"{split}.{src}"), None),
                          (stanford_envi(f"{split}.{tgt}"), None))
        splits = {"train": [files("train")], "valid": [files(s) for s in conf["valid"]],
                  "test": [files(s) for s in conf["test"]]}
        tok = {l: ("plain",) for l in (src, tgt)}   # escaping already undone in text/
    else:
        year = conf["release"]
        yy = year[2:]
        if year == "2014":   # English-to-X archives (the only direction WIT3 listed for es, ro)
            a, b = "en", src
        else:
            a, b = src, tgt
        hint = (f"{year}-01.tgz and {year}-01-test.tgz", f"{year}-01 and https://wit3.fbk.eu/{year}-01-b")
        train_arch = wit3_archive(f"{year}-01", a, b, hint[1], hint[0])
        test_arch = wit3_archive(f"{year}-01-test", a, b, hint[1], hint[0])
        d = f"{a}-{b}"

        def xml(arch, name, lang, d=d):
            return (arch, f"{d}/IWSLT{yy}.TED.{name}.{d}.{lang}.xml")

        def sets(names):
            out = []
            for name in names:
                if name == "tst2014" and year == "2014":
                    out.append(Corpus("sgml", xml(test_arch, name, src), xml(test_arch, name, tgt)))
                elif name == "tst2015":
                    rev = wit3_archive(f"{year}-01-test", b, a, hint[1], hint[0])
                    out.append(Corpus("sgml", xml(test_arch, name, src),
                                      xml(rev, name, tgt, d=f"{b}-{a}")))
                else:
                    out.append(Corpus("sgml", xml(train_arch, name, src), xml(train_arch, name, tgt)))
            return out
        splits = {"train": [Corpus("iwslt-train", (train_arch, f"{d}/train.tags.{d}.{src}"),
                                   (train_arch, f"{d}/train.tags.{d}.{tgt}"))],
                  "valid": sets(conf["valid"]), "test": sets(conf["test"])}
        tok = {l: ("moses", l, False) for l in (src, tgt)}
    vocab = args.vocab_size or conf["vocab"]
    return Spec(
        name=f"iwslt-{pair}", src=src, tgt=tgt, splits=splits, tok=tok,
        subword={"joint": ("spm", vocab, 1.0)}, joined_dictionary=True,
        clean_ratio=args.clean_ratio, settings={"pair": pair},
        expected=conf.get("expected", {}), paper_train=conf["train"])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pair", choices=sorted(IWSLT_PAIRS), required=True)
    parser.add_argument("--vocab-size", type=int, default=0,
                        help="joint sentencepiece BPE vocabulary (default: the DC paper's: "
                             + ", ".join(f"{k} {v['vocab']}" for k, v in IWSLT_PAIRS.items()) + ")")


COMMAND = Command("iwslt", "IWSLT14 es-en/ro-en, IWSLT15 fr-en/en-vi", "data/iwslt-PAIR",
                  make_spec, add_arguments, merges=None, example_flags="--pair es-en")
main = COMMAND.main

if __name__ == "__main__":
    sys.exit(main())
