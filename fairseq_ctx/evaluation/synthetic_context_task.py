"""A document translation task whose context use is known, to check an
attribution method (and a model) against the right answer.

Four documents in five have two sentences:

* filler words with one *marked* word (``red`` or ``blue``) at a random
  place -> ``OK``;
* ``q`` and filler words -> ``IT IS RED`` or ``IT IS BLUE``: the colour is
  the marked word of the previous sentence, and nothing else decides it.

The fifth is a lone ``q`` sentence whose colour is drawn at random: what a
question without context should get is even odds, so that the absence of
context is no cue of its own (without them, a tiny model learns that a
sentence without context is never a question, and every target token of a
question becomes context-sensitive).  A context model that learns the task
has one context-sensitive token per question with context (the colour), and
the one context word it must rely on is the marked word; a sentence-level
model has no context-sensitive token at all.  ``python3 -m
fairseq_ctx.evaluation.synthetic_context_task DIR`` writes the raw splits
(``{train,valid,test}.{src,tgt,docids}``) for ``fairseq-preprocess``.
"""
import argparse
import random
from pathlib import Path
from typing import List, Tuple

# marked source word -> the target word it decides
MARKED = {"red": "RED", "blue": "BLUE"}
FILLER = [f"w{i}" for i in range(12)]
QUESTION = "q"
SPLITS = (("train", 800, 1), ("valid", 20, 2), ("test", 60, 3))   # (name, documents, seed)


def documents(n: int, seed: int) -> Tuple[List[str], List[str], List[str]]:
    """``(sources, targets, docids)`` of ``n`` documents (see the module docstring)."""
    rng = random.Random(seed)
    src, tgt, ids = [], [], []
    for k in range(n):
        colour = rng.choice(sorted(MARKED))
        question = [QUESTION] + [rng.choice(FILLER) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.2:   # a lone question: its colour is a coin toss
            src.append(" ".join(question))
            tgt.append(f"IT IS {MARKED[colour]}")
            ids.append(f"d{k}")
            continue
        words = [rng.choice(FILLER) for _ in range(rng.randint(2, 5))]
        words.insert(rng.randint(0, len(words)), colour)
        src += [" ".join(words), " ".join(question)]
        tgt += ["OK", f"IT IS {MARKED[colour]}"]
        ids += [f"d{k}"] * 2
    return src, tgt, ids


def write(directory) -> Path:
    """The three splits as text files in ``directory``; returns it."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for split, n, seed in SPLITS:
        src, tgt, ids = documents(n, seed)
        for ext, lines in (("src", src), ("tgt", tgt), ("docids", ids)):
            (out / f"{split}.{ext}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description="Write the synthetic context task's raw splits (see the module "
                                            "docstring of fairseq_ctx.evaluation.synthetic_context_task).")
    p.add_argument("directory")
    print(write(p.parse_args(argv).directory))


if __name__ == "__main__":
    main()
