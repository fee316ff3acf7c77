#!/usr/bin/env python3
"""A few items of a study run's attribution report, as a page to read: the
context test's items whose context-sensitive tokens include a third-person
pronoun (the word the test is about), with the attribution of those
pronouns (the item's other sensitive tokens stay marked), rendered by
``fairseq_ctx.evaluation.attribution_page``, and where chromium-headless-shell
is installed a screenshot of it.

    python3 scripts/attribution-study-example.py \\
        --report runs/study/transformer_ctxenc/eval/attribution.json \\
        --html benchmarks/study-bible-budget/transformer_ctxenc-attribution-pronouns.html \\
        --png docs/images/attribution-study.png

Prints how many items and sensitive tokens it kept.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

PRONOUNS = {"he", "him", "his", "himself", "she", "her", "hers", "herself"}


def is_pronoun(piece: str) -> bool:
    return piece.replace("\u2581", "").lower() in PRONOUNS


def main(argv=None):
    from fairseq_ctx.evaluation import attribution_page

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--report", required=True, help="a study run's eval/attribution.json")
    p.add_argument("--html", required=True, help="the page to write")
    p.add_argument("--png", help="and a screenshot of it (needs chromium-headless-shell)")
    p.add_argument("--max-items", type=int, default=6, help="keep at most this many items (default 6)")
    args = p.parse_args(argv)
    if not os.path.isfile(args.report):
        sys.exit(f"fairseq_ctx: error: --report {args.report}: no such file")
    with open(args.report, encoding="utf-8") as f:
        report = json.load(f)
    # each kept item with the attribution blocks of its pronouns only (its other sensitive tokens stay
    # marked in the translation)
    kept = [dict(it, attributions=[a for a in it["attributions"] if is_pronoun(it["target"]["tokens"][a["position"]])])
            for it in report["items"]]
    kept = [it for it in kept if it["attributions"]][:args.max_items]
    report = dict(report, items=kept,
                  items_from=f"{report.get('items_from', 'the report')}: the {len(kept)} first whose "
                             "context-sensitive tokens include a third-person pronoun")
    attribution_page.write(report, args.html, title="Context attribution: pronouns of the study's context test")
    n = sum(len(it["attributions"]) for it in kept)
    print(f"{args.html}: {len(kept)} items, {n} sensitive pronouns")
    if args.png:
        browser = shutil.which("chromium-headless-shell")
        if not browser:
            sys.exit("fairseq_ctx: error: --png: no chromium-headless-shell (bash scripts/install-system-packages.sh "
                     "installs it)")
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run([browser, "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--force-device-scale-factor=1", "--window-size=1100,900", f"--user-data-dir={profile}",
                            f"--screenshot={os.path.abspath(args.png)}", f"file://{os.path.abspath(args.html)}"],
                           check=True, capture_output=True)
        print(f"screenshot: {args.png}")


if __name__ == "__main__":
    main()
