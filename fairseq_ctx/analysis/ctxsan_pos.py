"""Context gates by part of speech (Yang et al., AAAI 2019, Figure 4: "the
weights of deep-global context vectors corresponding to different POS", over
the words of the validation set, with the average of all words as a grey
line).

Reads the ``tokens.jsonl`` that :mod:`fairseq_ctx.analysis.ctxsan_gates`
writes (per sentence and model: the source subwords and each layer's
per-subword lambda_Q / lambda_K) and a part-of-speech tagging of the same
sentences, then:

1. merges subwords into words: with subword-nmt BPE a token ending in ``@@``
   continues into the next; with sentencepiece a token starting with ``▁``
   opens a word (the mode is chosen by whether any token starts with ``▁``);
   ``</s>`` is left out.  A word's lambda at a layer is the mean over its
   subwords (each word counts once, however many pieces it has);
2. averages the words' lambdas per tag, per layer and over the layers that
   have context (layer 1 of a deep-only model has none), and over all words
   (Figure 4's grey line).

Tags come from ``--tags FILE``, sentence k of the file being sentence id k of
the split (the ``id`` in ``tokens.jsonl``), tagged on the tokenization the
subwords were made from (so the word counts agree; a sentence where they do
not stops with its id):

* CoNLL-U (``--tag-format conllu``, or ``auto`` when the file has
  tab-separated 10-column lines): FORM and UPOS of the word lines; comments,
  multiword ranges (``1-2``) and empty nodes (``1.1``) skipped; a blank line
  ends a sentence;
* ``word_TAG`` (one sentence a line, the tag after the last ``_``).

Without ``--tags``, spaCy tags the merged words when it and the model
``--spacy-model`` are installed (none can be downloaded here: pass a tagged
file).  ``--universal12`` maps Universal Dependencies' 17 UPOS tags onto the
12 the paper lists (footnote 3): CCONJ/SCONJ -> CONJ, PART -> PRT, PROPN ->
NOUN, AUX -> VERB, PUNCT -> SYM (the paper lists "SYM" and no punctuation
tag), INTJ -> X; the others unchanged.

Usage::

    python3 -m fairseq_ctx.analysis.ctxsan_pos GATES_DIR/tokens.jsonl --tags valid.en.conllu \\
        --out DIR [--side encoder] [--universal12] [--model PATH]

Writes ``DIR/pos_gates.json`` and ``DIR/pos_gates.png`` (bars per tag,
lambda_Q and lambda_K, the all-word means as lines).
"""
import argparse
import json
import os
from typing import Dict, List, Sequence, Tuple

from fairseq_ctx.cli import check_file
from fairseq_ctx.errors import FairseqCtxError, install_excepthook

SLOTS = ("q", "k")
UD_TO_12 = {"CCONJ": "CONJ", "SCONJ": "CONJ", "PART": "PRT", "PROPN": "NOUN", "AUX": "VERB", "PUNCT": "SYM",
            "INTJ": "X"}


def merge_subwords(tokens: Sequence[str]) -> List[Tuple[str, List[int]]]:
    """Words of a subword sequence: (word, positions of its subwords)."""
    spm = any(t.startswith("\u2581") for t in tokens)
    words: List[Tuple[str, List[int]]] = []
    open_word = False  # BPE: the previous token ended in @@
    for i, tok in enumerate(tokens):
        if tok == "</s>":
            continue
        if spm:
            piece = tok[1:] if tok.startswith("\u2581") else tok
            if tok.startswith("\u2581") or not words:
                words.append((piece, [i]))
            else:
                words[-1] = (words[-1][0] + piece, words[-1][1] + [i])
        else:
            piece = tok[:-2] if tok.endswith("@@") else tok
            if open_word and words:
                words[-1] = (words[-1][0] + piece, words[-1][1] + [i])
            else:
                words.append((piece, [i]))
            open_word = tok.endswith("@@")
    return words


def read_tags(path: str, fmt: str = "auto") -> List[List[Tuple[str, str]]]:
    """Sentences of (word, tag) from a CoNLL-U or ``word_TAG`` file."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise FairseqCtxError(f"{path}: {e.strerror}") from None
    if fmt == "auto":
        fmt = "conllu" if any(len(line.split("\t")) == 10 for line in lines[:200]) else "word_tag"
    sentences: List[List[Tuple[str, str]]] = []
    if fmt == "conllu":
        current: List[Tuple[str, str]] = []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                if current:
                    sentences.append(current)
                current = []
                continue
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            if len(cols) != 10:
                raise FairseqCtxError(f"{path}:{n}: a CoNLL-U word line has 10 tab-separated columns, not {len(cols)}")
            if "-" in cols[0] or "." in cols[0]:  # multiword range or empty node: not a word of the tokenization
                continue
            current.append((cols[1], cols[3]))
        if current:
            sentences.append(current)
        return sentences
    if lines and lines[-1] == "":
        lines = lines[:-1]
    for n, line in enumerate(lines, 1):
        sent = []
        for item in line.split():
            word, sep, tag = item.rpartition("_")
            if not sep or not word or not tag:
                raise FairseqCtxError(f"{path}:{n}: {item!r} is not word_TAG")
            sent.append((word, tag))
        sentences.append(sent)
    return sentences


def spacy_tags(words_by_sentence: Sequence[Sequence[str]], model: str) -> List[List[Tuple[str, str]]]:
    """UPOS tags of pre-split words by an installed spaCy model."""
    try:
        import spacy
        from spacy.tokens import Doc
    except ImportError:
        raise FairseqCtxError("no --tags file and spaCy is not installed: pass a tagged file (--tags, CoNLL-U "
                              "or word_TAG)") from None
    try:
        nlp = spacy.load(model)
    except OSError:
        raise FairseqCtxError(f"no --tags file and the spaCy model {model!r} is not installed: pass a tagged "
                              "file (--tags) or install the model") from None
    out = []
    for words in words_by_sentence:
        doc = nlp(Doc(nlp.vocab, words=list(words)))  # our word split, not spaCy's tokenizer
        out.append([(t.text, t.pos_) for t in doc])
    return out


def pos_means(records: Sequence[Dict], tags: Sequence[Sequence[Tuple[str, str]]], side: str = "encoder",
              universal12: bool = False) -> Dict:
    """Per tag (and ``"all"``): word count, per-layer mean lambda_Q/K and the
    mean over the layers with context.  ``records``: lines of tokens.jsonl of
    one model; ``tags[id]``: the tagged words of sentence ``id``."""
    sums: Dict[str, Dict] = {}
    n_layers = None
    for rec in records:
        sid = rec["id"]
        if sid >= len(tags):
            raise FairseqCtxError(f"sentence id {sid}: the tagged file has only {len(tags)} sentences")
        words = merge_subwords(rec["tokens"])
        tagged = tags[sid]
        if len(words) != len(tagged):
            raise FairseqCtxError(
                f"sentence id {sid}: {len(words)} words from the subwords ({' '.join(w for w, _ in words)!r}) "
                f"but {len(tagged)} tagged words ({' '.join(w for w, _ in tagged)!r}): tag the tokenization "
                "the subwords were made from")
        lams = rec[side]
        n_layers = len(lams["lambda_q"])
        for (_, positions), (_, tag) in zip(words, tagged):
            tag = UD_TO_12.get(tag, tag) if universal12 else tag
            for key in (tag, "all"):
                acc = sums.setdefault(key, {"count": 0, **{s: [0.0] * n_layers for s in SLOTS}})
                acc["count"] += 1
                for s in SLOTS:
                    for li, layer in enumerate(lams[f"lambda_{s}"]):
                        if layer is not None:
                            acc[s][li] += sum(layer[p] for p in positions) / len(positions)
    if not sums:
        raise FairseqCtxError("no words to average")
    first = records[0][side]
    has = {s: [layer is not None for layer in first[f"lambda_{s}"]] for s in SLOTS}
    out = {}
    for key, acc in sums.items():
        row = {"count": acc["count"]}
        for s in SLOTS:
            per_layer = [acc[s][li] / acc["count"] if has[s][li] else None for li in range(n_layers)]
            present = [v for v in per_layer if v is not None]
            row[f"lambda_{s}_per_layer"] = per_layer
            row[f"lambda_{s}"] = sum(present) / len(present) if present else None
        out[key] = row
    return out


def plot(result: Dict, png: str, title: str):
    import logging

    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tags = sorted((t for t in result if t != "all"), key=lambda t: -(result[t]["lambda_q"] or 0.0))
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(tags) + 1.5), 3.4))
    xs = range(len(tags))
    for off, s, colour in ((-0.2, "q", "tab:blue"), (0.2, "k", "tab:red")):
        vals = [result[t][f"lambda_{s}"] for t in tags]
        if any(v is not None for v in vals):
            ax.bar([x + off for x in xs], [v if v is not None else 0.0 for v in vals], width=0.4, color=colour,
                   label=f"$\\lambda_{s.upper()}$")
            if result["all"][f"lambda_{s}"] is not None:
                ax.axhline(result["all"][f"lambda_{s}"], color=colour, linestyle="--", linewidth=1,
                           label=f"all words ($\\lambda_{s.upper()}$)")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{t}\n{result[t]['count']}" for t in tags], fontsize=7)
    ax.set_ylabel("mean gate (layers with context)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def get_parser():
    p = argparse.ArgumentParser(
        prog="fairseq-ctx-ctxsan-pos",
        description="Context gates by part of speech (ctxsan Figure 4) from ctxsan_gates' tokens.jsonl. Tags: "
                    "--tags FILE (CoNLL-U or word_TAG, one sentence per split sentence id, on the tokenization "
                    "the subwords came from); without it, spaCy with --spacy-model if installed (no model can be "
                    "downloaded on an offline machine: give a tagged file).",
        epilog="example (after fairseq-ctx-ctxsan-gates ... --out gates/):\n"
               "  fairseq-ctx-ctxsan-pos gates/tokens.jsonl --tags valid.en.conllu --universal12 --out pos/",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tokens", help="tokens.jsonl written by fairseq_ctx.analysis.ctxsan_gates")
    p.add_argument("--tags", help="tagged sentences: CoNLL-U (FORM, UPOS) or 'word_TAG' lines")
    p.add_argument("--tag-format", choices=("auto", "conllu", "word_tag"), default="auto")
    p.add_argument("--spacy-model", default="en_core_web_sm",
                   help="spaCy model used when no --tags is given (default en_core_web_sm)")
    p.add_argument("--universal12", action="store_true",
                   help="map UD's 17 UPOS tags to the paper's 12 (CONJ, PRT, SYM, ...)")
    p.add_argument("--side", choices=("encoder", "decoder"), default="encoder",
                   help="gates of the source words (default; the paper's Figure 4) or of the decoder inputs")
    p.add_argument("--model", help="the checkpoint path as in tokens.jsonl (default: the first model there)")
    p.add_argument("--out", required=True, metavar="DIR")
    return p


def main(argv=None):
    install_excepthook()
    args = get_parser().parse_args(argv)
    check_file(args.tokens, "TOKENS", "tokens.jsonl file (fairseq-ctx-ctxsan-gates --out DIR writes DIR/tokens.jsonl)")
    check_file(args.tags, "--tags", "tagged file")
    key = "decoder_tokens" if args.side == "decoder" else "tokens"  # the tokens the side's gates are listed by
    with open(args.tokens, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    if not records:
        raise FairseqCtxError(f"{args.tokens}: no sentences")
    model = args.model or records[0]["model"]
    records = [dict(r, tokens=r[key]) for r in records if r["model"] == model]
    if not records:
        raise FairseqCtxError(f"{args.tokens}: no sentences of model {model!r}")
    if args.side not in records[0]:
        raise FairseqCtxError(f"{args.tokens}: model {model} has no {args.side}-side gates")
    if args.tags:
        tags = read_tags(args.tags, args.tag_format)
        source = f"{args.tags} ({args.tag_format})"
    else:
        order = sorted(records, key=lambda r: r["id"])
        n = order[-1]["id"] + 1
        words: List[List[str]] = [[] for _ in range(n)]
        for r in order:
            words[r["id"]] = [w for w, _ in merge_subwords(r["tokens"])]
        tags = spacy_tags(words, args.spacy_model)
        source = f"spaCy {args.spacy_model}"
    result = pos_means(records, tags, args.side, args.universal12)
    os.makedirs(args.out, exist_ok=True)
    summary = {"model": model, "side": args.side, "tags": source, "universal12": args.universal12,
               "words": "subwords merged into words, a word's lambda the mean of its subwords'",
               "by_tag": result}
    with open(os.path.join(args.out, "pos_gates.json"), "w") as f:
        json.dump(summary, f, indent=2)
    plot(result, os.path.join(args.out, "pos_gates.png"),
         f"context gates by POS ({args.side}; {os.path.basename(model)})")
    for tag in sorted(result, key=lambda t: (t == "all", -(result[t]["lambda_q"] or 0.0))):
        r = result[tag]
        cells = "  ".join(f"lambda_{s} " + ("-" if r[f"lambda_{s}"] is None else f"{r[f'lambda_{s}']:.4f}")
                          for s in SLOTS)
        print(f"{tag:<8}{r['count']:>8} words  {cells}")
    return summary


if __name__ == "__main__":
    main()
