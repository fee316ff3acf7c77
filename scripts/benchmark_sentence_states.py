#!/usr/bin/env python3
"""Decoding speed of transformer_ctxenc with ``--reuse-sentence-states``
(each sentence through the shared encoder layers once), as
ratios to plain ``transformer`` measured in the same run.

Three decodes of the same subset with ``fairseq-generate`` (beam search,
every sentence), alternated for ``--repeats`` rounds, each in a fresh
process pinned to what this process may use:

* ``transformer``: the baseline checkpoint, ``--task document_translation``;
* ``ctxenc``: the context model, ordinary batching (sorted by length);
* ``ctxenc_reuse``: the same model with ``--reuse-sentence-states`` (each
  sentence's pass through the shared layers kept and reused when it comes
  back as a source or as a context).

Speed is sentences per CPU second of the decoding process (its user + system
time, from ``resource``, start-up included), so other load on the machine
does not enter; the wall time is printed beside it, and the number of output
tokens (decoding steps), which differs between two models and so enters
their ratio. Ratios pair each run with the baseline run
of the same round and take the median. The two ctxenc decodes must give the
same hypotheses (checked; scores to 1e-4 as printed).

Example (checkpoints of the converged study, ``docs/study.md``)::

    OMP_NUM_THREADS=1 taskset -c 0 python3 scripts/benchmark_sentence_states.py data/bible/bin \\
        --baseline runs/study/transformer/checkpoint_best.pt \\
        --ctxenc runs/study/transformer_ctxenc/checkpoint_best.pt --repeats 3 --json out.json
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC_TASK = ["--task", "document_translation", "--context-size", "1"]


def decode(opts, checkpoint, extra):
    """(sentences, CPU seconds, wall seconds, {id: (hypothesis, score)})."""
    cmd = [sys.executable, "-m", "fairseq_cli.generate", opts.data, "--user-dir", os.path.join(REPO, "fairseq_ctx"),
           "--path", checkpoint, *DOC_TASK, *extra, "--gen-subset", opts.subset, "--beam", str(opts.beam),
           "--batch-size", str(opts.batch_size), "--required-batch-size-multiple", "1", "--cpu",
           "--no-progress-bar"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"benchmark_sentence_states: {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    hyps = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^H-(\d+)\t(\S+)\t(.*)$", line)
        if m:
            hyps[int(m.group(1))] = (m.group(3), float(m.group(2)))
    return len(hyps), cpu, wall, hyps


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("Example")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", help="binarized data with .docids (fairseq-preprocess output)")
    p.add_argument("--baseline", required=True, help="a transformer checkpoint")
    p.add_argument("--ctxenc", required=True, help="a transformer_ctxenc checkpoint")
    p.add_argument("--subset", default="test")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", help="write the results here")
    opts = p.parse_args(argv)
    runs = {"transformer": (opts.baseline, []), "ctxenc": (opts.ctxenc, []),
            "ctxenc_reuse": (opts.ctxenc, ["--reuse-sentence-states"])}
    results = {name: [] for name in runs}
    for r in range(opts.repeats):
        outputs = {}
        for name, (ckpt, extra) in runs.items():
            n, cpu, wall, hyps = decode(opts, ckpt, extra)
            tokens = sum(len(h.split()) + 1 for h, _ in hyps.values())  # + </s>: the decoding steps
            results[name].append({"sentences": n, "cpu_s": cpu, "wall_s": wall, "sent_per_cpu_s": n / cpu,
                                  "output_tokens": tokens})
            outputs[name] = hyps
            print(f"[round {r + 1}/{opts.repeats}] {name}: {n} sentences, {cpu:.1f} CPU s, {wall:.1f} s wall",
                  file=sys.stderr, flush=True)
        a, b = outputs["ctxenc"], outputs["ctxenc_reuse"]
        if sorted(a) != sorted(b) or any(a[i][0] != b[i][0] or abs(a[i][1] - b[i][1]) > 1e-4 for i in a):
            sys.exit("benchmark_sentence_states: --reuse-sentence-states changed the translations")
    table = {}
    for name, rs in results.items():
        ratio = statistics.median(x["sent_per_cpu_s"] / base["sent_per_cpu_s"]
                                  for x, base in zip(rs, results["transformer"]))
        table[name] = {"sent_per_cpu_s": statistics.median(x["sent_per_cpu_s"] for x in rs),
                       "wall_s": statistics.median(x["wall_s"] for x in rs), "ratio": ratio,
                       "sentences": rs[0]["sentences"], "output_tokens": rs[0]["output_tokens"], "runs": rs}
    print(f"\n{'decode':<20}{'sent / CPU s':>14}{'wall s':>10}{'ratio':>8}{'output tokens':>15}"
          f"   ({opts.repeats} rounds, beam {opts.beam})")
    for name, row in table.items():
        print(f"{name:<20}{row['sent_per_cpu_s']:>14.2f}{row['wall_s']:>10.1f}{row['ratio']:>8.3f}"
              f"{row['output_tokens']:>15}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"subset": opts.subset, "beam": opts.beam, "batch_size": opts.batch_size,
                       "repeats": opts.repeats, "identical_translations": True, "results": table,
                       "doc_order_decode_ratio": table["ctxenc_reuse"]["ratio"],
                       "decode_ratio": table["ctxenc"]["ratio"]}, f, indent=1)


if __name__ == "__main__":
    main()
