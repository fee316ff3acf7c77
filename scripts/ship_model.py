#!/usr/bin/env python3
"""Add a study run's averaged checkpoint to a shipped model folder.

    python3 scripts/ship_model.py --run transformer --name baseline \
        --checkpoint runs/study/transformer/eval/average.pt --out models/bible
    python3 scripts/ship_model.py --run transformer_ctxenc --name ctxenc \
        --checkpoint runs/study/transformer_ctxenc/eval/average.pt --out models/bible

Writes into ``--out``:

* ``NAME.pt``: the weights in fp16 (tied embeddings stored once), no
  optimizer state, no training metrics, the configuration with the paths of
  the machine that trained it removed (no ``--user-dir``: our console
  scripts register the plugin themselves);
* ``NAME.json``: the run's record from the study's results (``--record``);
* shared by the folder's models (the study's runs share them):
  ``dict.es.txt``, ``dict.en.txt``, the study's dictionaries
  (``DATA/study/bin``), and ``spm.model`` (``DATA/spm``); the Bible test
  split, raw (``test.es``, ``test.en``, ``test.docids``: the public-domain
  Reina-Valera 1909 and World English Bible) and binarized
  (``test.es-en.*``), so the folder is the data folder that
  ``fairseq-ctx-translate`` and ``fairseq-ctx-context-usage`` take;
* ``SHA256SUMS`` of every file in the folder (``sha256sum -c SHA256SUMS``
  in the folder checks them).

The folder's README.md is written by hand; it is listed in SHA256SUMS if
present. Loading the fp16 weights into the fp32 model gives fp32 CPU
decoding.
"""
import argparse
import json
import os
import re
import shutil
import sys

from fairseq_ctx_prep.files import sha256_file as sha256  # the digest the study checks shipped files by

DEFAULT_DATA = "data/bible"


def write_sums(out):
    """``SHA256SUMS`` of every file under ``out`` but itself, sorted."""
    files = sorted(os.path.relpath(os.path.join(d, n), out) for d, _, names in os.walk(out) for n in names
                   if n != "SHA256SUMS")
    with open(os.path.join(out, "SHA256SUMS"), "w") as f:
        for rel in files:
            f.write(f"{sha256(os.path.join(out, rel))}  {rel}\n")
    return files


def slim_state(state):
    """The checkpoint's state for inference: fp16 floating-point weights,
    tied tensors stored once, no optimizer state or metrics, no paths."""
    import torch

    model, by_value, slim = state["model"], [], {}
    for name, tensor in model.items():
        if tensor.is_floating_point():
            tensor = tensor.to(torch.float16)
            for other in by_value:  # tied embeddings: one storage
                if other.shape == tensor.shape and torch.equal(other, tensor):
                    tensor = other
                    break
            else:
                by_value.append(tensor)
        slim[name] = tensor
    cfg = state["cfg"]
    for section in ("common", "task", "model", "checkpoint"):
        node = cfg.get(section) if hasattr(cfg, "get") else None
        if node is None:
            continue
        for key, value in (("user_dir", None), ("data", "."), ("save_dir", ".")):
            if isinstance(node, argparse.Namespace):
                if hasattr(node, key):
                    setattr(node, key, value)
            elif key in node:
                node[key] = value
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(cfg):
            cfg = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    except ImportError:
        pass
    last = dict(state["optimizer_history"][-1])
    last.pop("optimizer", None)
    return {"args": None, "cfg": cfg, "model": slim, "criterion": None, "optimizer_history": [last],
            # the task's record of the flags it was trained with (the document
            # task checks decoding flags against it)
            "task_state": dict(state.get("task_state") or {}),
            "extra_state": {"train_iterator": {"epoch": 0, "iterations_in_epoch": 0}}, "last_optimizer_state": None}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="the run's averaged checkpoint (RUN/eval/average.pt)")
    p.add_argument("--out", required=True, help="the model folder to write into (e.g. models/bible)")
    p.add_argument("--name", required=True, help="the model's name in the folder: NAME.pt and NAME.json")
    p.add_argument("--data", default=DEFAULT_DATA, help="the Bible corpus of scripts/prepare-bible.sh")
    p.add_argument("--run", default="transformer", help="the study run's name (its record is copied)")
    p.add_argument("--record", default="benchmarks/study-bible-budget.json", help="the study's results")
    args = p.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.name):
        p.error(f"--name {args.name!r}: letters, digits, '_' and '-' only (it names NAME.pt)")

    bin_dir = os.path.join(args.data, "study", "bin")
    inputs = [args.checkpoint, os.path.join(args.data, "spm", "spm.model"), args.record]
    inputs += [os.path.join(bin_dir, f"dict.{lang}.txt") for lang in ("es", "en")]
    inputs += [os.path.join(args.data, "raw", f"test.{ext}") for ext in ("es", "en", "docids")]
    inputs += [os.path.join(bin_dir, f"test.es-en.{ext}") for ext in ("es.bin", "es.idx", "en.bin", "en.idx", "docids")]
    missing = [path for path in inputs if not os.path.isfile(path)]
    if missing:
        sys.exit(f"fairseq_ctx: error: missing {', '.join(missing)} (run scripts/prepare-bible.sh and the study)")
    with open(args.record, encoding="utf-8") as f:
        records = [r for r in json.load(f)["runs"] if r.get("name") == args.run]
    if not records:
        sys.exit(f"fairseq_ctx: error: no run named {args.run} in {args.record}")

    import torch

    state = torch.load(args.checkpoint, map_location="cpu", weights_only=False)  # our own study's file
    os.makedirs(args.out, exist_ok=True)
    torch.save(slim_state(state), os.path.join(args.out, f"{args.name}.pt"))
    shutil.copyfile(os.path.join(args.data, "spm", "spm.model"), os.path.join(args.out, "spm.model"))
    for lang in ("es", "en"):
        shutil.copyfile(os.path.join(bin_dir, f"dict.{lang}.txt"), os.path.join(args.out, f"dict.{lang}.txt"))
    for ext in ("es", "en", "docids"):
        shutil.copyfile(os.path.join(args.data, "raw", f"test.{ext}"), os.path.join(args.out, f"test.{ext}"))
    for ext in ("es.bin", "es.idx", "en.bin", "en.idx", "docids"):
        shutil.copyfile(os.path.join(bin_dir, f"test.es-en.{ext}"), os.path.join(args.out, f"test.es-en.{ext}"))
    record = {k: v for k, v in records[0].items() if k != "history"}
    with open(os.path.join(args.out, f"{args.name}.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    files = write_sums(args.out)
    total = sum(os.path.getsize(os.path.join(args.out, rel)) for rel in files + ["SHA256SUMS"])
    print(f"wrote {args.out}: {len(files) + 1} files, {total:,} bytes; "
          f"{args.name}.pt {os.path.getsize(os.path.join(args.out, args.name + '.pt')):,} bytes")


if __name__ == "__main__":
    main()
