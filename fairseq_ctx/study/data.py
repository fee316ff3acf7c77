"""The study's training data: the corpus's training split without the
chapters that the balanced context test needs, so that test is held out
from every run.

``prepare(data, dest, per_class)`` builds, once,

* ``dest/context-set/``: the balanced he/she set of
  ``fairseq_ctx.study.context_set`` (``per_class`` items per class, test
  and validation chapters first, then training chapters held out as
  needed; their ids in ``heldout_chapters.txt``);
* ``dest/bin/``: fairseq's binarized data with the training split minus
  those chapters, and the corpus's own validation and test splits and
  dictionaries, byte for byte.

Choices.  The sentencepiece model and the dictionaries stay the corpus's
(trained on the whole training split, held-out chapters included): every
study model then shares its vocabulary with every other model trained on
``data/bible`` (the quickstart's, the pilot's), and the held-out verses
contribute subword statistics only, never a sentence pair.  The training
pairs are the corpus's sentencepiece lines filtered by chapter, so the kept
pairs are exactly the corpus's.  Re-running with the same inputs is a no-op
(``dest/done.json`` records the counts and the held-out chapters); a
different ``per_class`` is refused in one line rather than mixing runs
trained on different data.
"""
import json
import os
import shutil
import subprocess
import sys
from typing import Dict, List

SRC, TGT = "es", "en"
SPLITS = ("train", "valid", "test")


class StudyDataError(Exception):
    """One line for the user, no traceback."""


def _lines(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def _write(path: str, lines: List[str]):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def bin_dir(dest: str) -> str:
    return os.path.join(dest, "bin")


def set_dir(dest: str) -> str:
    return os.path.join(dest, "context-set")


def prepare(data: str, dest: str, per_class: int) -> Dict:
    """Build ``dest`` from the corpus at ``data`` (raw/, spm/, bin/ of
    ``scripts/prepare-bible.sh``) unless it is built already; returns what
    ``dest/done.json`` records."""
    from fairseq_ctx.study.context_set import ContextSetError, build

    done_path = os.path.join(dest, "done.json")
    if os.path.exists(done_path):
        with open(done_path) as f:
            done = json.load(f)
        if done["per_class"] != per_class:
            raise StudyDataError(f"{dest} holds the study data for {done['per_class']} context-test items per "
                                 f"class, not {per_class}; remove it to rebuild (runs trained on it would no "
                                 f"longer compare)")
        return done
    os.makedirs(dest, exist_ok=True)
    try:
        counts = build(os.path.join(data, "raw"), set_dir(dest), min_per_class=per_class)
    except ContextSetError as e:
        raise StudyDataError(str(e)) from None
    heldout = set(counts["heldout_train_chapters"])

    src_bin = os.path.join(data, "bin")
    tmp = os.path.join(dest, "bin.part")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    docids = _lines(os.path.join(data, "raw", "train.docids"))
    keep = [k for k, d in enumerate(docids) if d not in heldout]
    text = os.path.join(tmp, "text")
    os.makedirs(text)
    for lang in (SRC, TGT):
        pieces = _lines(os.path.join(data, "spm", f"train.{lang}"))
        if len(pieces) != len(docids):
            raise StudyDataError(f"{data}/spm/train.{lang}: {len(pieces)} lines, raw/train.docids {len(docids)}; "
                                 f"rerun scripts/prepare-bible.sh --force")
        _write(os.path.join(text, f"train.{lang}"), [pieces[k] for k in keep])
    cmd = [sys.executable, "-m", "fairseq_cli.preprocess", "--source-lang", SRC, "--target-lang", TGT,
           "--trainpref", os.path.join(text, "train"), "--destdir", tmp, "--workers", "1",
           "--srcdict", os.path.join(src_bin, f"dict.{SRC}.txt"),
           "--tgtdict", os.path.join(src_bin, f"dict.{TGT}.txt")]
    log = os.path.join(dest, "binarize.log")
    with open(log, "w") as f:
        if subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT) != 0:
            raise StudyDataError(f"fairseq-preprocess failed on the study's training split; see {log}")
    shutil.rmtree(text)
    _write(os.path.join(tmp, f"train.{SRC}-{TGT}.docids"), [docids[k] for k in keep])
    for split in ("valid", "test"):
        for name in os.listdir(src_bin):
            if name.startswith(f"{split}.{SRC}-{TGT}."):
                shutil.copyfile(os.path.join(src_bin, name), os.path.join(tmp, name))
    for lang in (SRC, TGT):  # the corpus's, not preprocess's copies (identical, but say so)
        shutil.copyfile(os.path.join(src_bin, f"dict.{lang}.txt"), os.path.join(tmp, f"dict.{lang}.txt"))
    _check_counts(tmp, {"train": len(keep)})
    shutil.rmtree(bin_dir(dest), ignore_errors=True)
    os.replace(tmp, bin_dir(dest))
    done = {"per_class": per_class, "source": os.path.abspath(data),
            "train_pairs": len(keep), "train_pairs_dropped": len(docids) - len(keep),
            "heldout_train_chapters": sorted(heldout), "context_set": {k: counts[k] for k in ("groups", "by_class")}}
    with open(done_path + ".part", "w") as f:
        json.dump(done, f, indent=1)
    os.replace(done_path + ".part", done_path)
    return done


def _check_counts(bin_path: str, expected: Dict[str, int]):
    """Every split's two sides and docids have the same number of lines
    (and ``expected`` where given)."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset

    for split in SPLITS:
        sizes = {lang: len(MMapIndexedDataset(os.path.join(bin_path, f"{split}.{SRC}-{TGT}.{lang}")))
                 for lang in (SRC, TGT)}
        sizes["docids"] = len(_lines(os.path.join(bin_path, f"{split}.{SRC}-{TGT}.docids")))
        if len(set(sizes.values())) != 1 or sizes[SRC] != expected.get(split, sizes[SRC]):
            raise StudyDataError(f"{bin_path}: {split} sizes disagree: {sizes} (expected {expected.get(split)})")
