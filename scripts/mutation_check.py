#!/usr/bin/env python3
"""Mutation check: plant small, plausible bugs one at a time in a
copy of the package and run the tests that should catch each.

Every entry of :data:`MUTANTS` is one planted bug: a file of ``fairseq_ctx``,
a piece of its source text (which must occur exactly once), the text that
replaces it, the test files or node ids that cover it, and what the bug is.
For each entry the script writes the mutated file into a temporary copy of
the repository (``fairseq_ctx/``, ``tests/``, ``configs/``, ``scripts/``;
the checkout itself is never modified), runs pytest on the covering tests in
that copy, and reports the mutant as

* ``killed``: at least one covering test failed (all failing tests listed),
* ``SURVIVED``: every covering test passed,
* ``error``: pytest could not run the tests (collection error, no tests,
  timeout), or the entry's text was not found (``stale``).

The covering tests never include the gradient- and parameter-count,
end-to-end and error-message tests listed in :data:`NOT_EQUATION_TESTS` (they
are deselected), so a kill always comes from a test of the bug's own
architecture or module that checks values.

Which package is tested: pytest puts the copy's root first on ``sys.path``
(``tests/`` is a package) and ``PYTHONPATH`` holds it too, so the copy's
``fairseq_ctx`` is found by the path finder before the editable install's
finder (which comes later in ``sys.meta_path``). A ``conftest.py`` written
into the copy checks this in every run: it records where ``fairseq_ctx`` was
imported from, and the run is an error unless that is inside the copy.
Byte-code writing is off, so a restored file is never shadowed by a stale
``.pyc`` of its mutant.

Usage (slow: one pytest process per mutant; pin it to one core)::

    OMP_NUM_THREADS=1 taskset -c 0 python3 scripts/mutation_check.py            # all
    python3 scripts/mutation_check.py --only gret_routing_iters_ignored         # some
    python3 scripts/mutation_check.py --list                                    # the list
    python3 scripts/mutation_check.py --json report.json

Exits 1 if any mutant survived or errored. Documented in ``docs/mutation.md``.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
COPIED = ("fairseq_ctx", "tests", "configs", "scripts")


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # relative to the repository root
    old: str  # must occur exactly once in the file
    new: str
    tests: Tuple[str, ...]  # test files or node ids, relative to the repository root
    description: str


# Tests that only count gradients or parameters, train and decode end to
# end, check error messages, or read the recipes: deselected from every run
# (node-id prefixes), so that no planted bug is killed by them (and the
# real-size model builds of the parameter counts do not slow every run).
NOT_EQUATION_TESTS = (
    "tests/test_ctxsan.py::test_table",
    "tests/test_ctxsan.py::test_presets",
    "tests/test_ctxsan.py::test_bad_flag_values_raise",
    "tests/test_dc.py::test_parameter_growth_matches_paper",
    "tests/test_dc.py::test_layer_spec_parsing_and_bad_flags",
    "tests/test_gret.py::test_parameter_growth_base_matches_paper",
    "tests/test_gret.py::test_presets_build",
    "tests/test_gret.py::test_bad_flag_values_raise",
    "tests/test_ctxenc.py::test_parameter_growth",
    "tests/test_ctxenc.py::test_bad_flags",
    "tests/test_document_task.py::test_bad_data",
    "tests/test_document_task.py::test_negative_context_size",
    "tests/test_ctxsan.py::test_training_step_backpropagates_into_context_parameters",
    "tests/test_ctxsan.py::test_gate_analysis_script",
    "tests/test_dc.py::test_config_files_carry_the_papers_recipe",
    "tests/test_dc.py::test_divergence_script",
    "tests/test_gret.py::test_ablations_build_and_train",
    "tests/test_gret.py::test_warm_start",
    "tests/test_gret.py::test_e2e",
    "tests/test_ctxenc.py::test_context_attention_script",
    "tests/test_document_task.py::test_generate_matches_single_sentence_with_context",
    "tests/test_document_task.py::test_interactive",
    "tests/test_document_task.py::test_shuffled_and_random_context_runs",
    "tests/test_document_task.py::test_concat_context_with_transformer",
    "tests/test_document_task.py::test_sentence_level_model_ignores_context",
    "tests/test_contract.py::test_generate",
    "tests/test_contract.py::test_score_reference",
    "tests/test_contract.py::test_interactive",
    "tests/test_contract.py::test_validate",
    "tests/test_precision.py",
    "tests/test_end_to_end.py",
)

CTXSAN = ("tests/test_ctxsan.py",)
CTXSAN_REORDER = ("tests/test_ctxsan.py", "tests/test_contract.py")
DC = ("tests/test_dc.py",)
DC_REORDER = ("tests/test_dc.py", "tests/test_contract.py")
GRET = ("tests/test_gret.py",)
GRET_REORDER = ("tests/test_gret.py", "tests/test_contract.py")
CTXENC = ("tests/test_ctxenc.py",)
CTXENC_REORDER = ("tests/test_ctxenc.py", "tests/test_contract.py")
DOC = ("tests/test_document_task.py",)

M = "fairseq_ctx/modules/"
MUTANTS: List[Mutant] = [
    # ---- equations, context routing, caches and decoding
    Mutant("gret_routing_iters_ignored", "fairseq_ctx/models/transformer_gret.py",
           "iterations=cfg.gret_routing_iters,", "iterations=1,", GRET,
           "routing built with 1 iteration whatever --gret-routing-iters says"),
    Mutant("gret_gru_wrong_layers", "fairseq_ctx/models/transformer_gret.py",
           'layer_states = list(out["encoder_states"][1:])', 'layer_states = list(out["encoder_states"][:-1])',
           GRET, "the GRU (Eq. 10) fed the embedding output and layers 1..M-1"),
    Mutant("dc_local_branch_wrong_input", M + "dual_contextual.py",
           "pl = self.lc_proj(l_c)", "pl = self.lc_proj(r)", DC,
           "h_l = FI(r, r) instead of FI(r, l_c) (Eq. 7); l_c drops out of the output"),
    Mutant("ctxenc_context_skips_own_layer", "fairseq_ctx/models/transformer_ctxenc.py",
           "x = self.ctx_layer(x, encoder_padding_mask=mask)", "x = x", CTXENC,
           "the context encoder stops after the shared layers, skipping its own last layer"),
    Mutant("gret_pooling_plain_mean", M + "gret_attentive_pooling.py",
           "pooled = torch.bmm(weights.unsqueeze(1), capsules).squeeze(1)", "pooled = capsules.mean(dim=1)",
           GRET, "attentive pooling (Eq. 7-8) replaced by the plain mean of the capsules"),
    Mutant("ctxenc_gate_wrong_branch", M + "ctxenc_gated_layer.py",
           "x = c_c + g * (c_s - c_c)", "x = c_s + g * (c_c - c_s)", CTXENC,
           "g weighs the context attention instead of the source self-attention"),
    Mutant("ctxsan_prefix_sums_not_reordered", "fairseq_ctx/models/transformer_ctxsan.py",
           'return reorder_cache(self, incremental_state, "ctx_sums", new_order)', "return incremental_state",
           CTXSAN_REORDER,
           "the decoder's running sums of the prefix means do not follow the beams"),
    Mutant("dc_conv_cache_not_reordered", M + "dual_contextual.py",
           'return reorder_cache(self, incremental_state, "dc_state", new_order)',
           'old = dict(self._get_input_buffer(incremental_state)); '
           'reorder_cache(self, incremental_state, "dc_state", new_order); '
           'self._get_input_buffer(incremental_state)["prev_input"] = old.get("prev_input"); '
           'return incremental_state', DC_REORDER,
           "the causal convolution's cached inputs do not follow the beams"),
    # ---- beam reordering, the other caches
    Mutant("dc_fi_cache_not_reordered", M + "incremental_cache.py",
           'order = cache.pop("pending_order", None)', 'cache.pop("pending_order", None); order = None',
           DC_REORDER, "the feature-interaction keys/values cache (time-major, reordered at the next append) "
           "does not follow the beams"),
    Mutant("dc_fi_cache_second_reorder_lost", M + "incremental_cache.py",
           'if value is not None and name not in _TIME_MAJOR:',
           'if value is not None and name not in _TIME_MAJOR + ("pending_order",):', DC_REORDER,
           "two beam reorders before the next step: the second is not composed into the pending order"),
    Mutant("ctxsan_key_cache_not_reordered", M + "ctxsan_attention.py",
           'return reorder_cache(self, incremental_state, "attn_state", new_order)', "return incremental_state",
           CTXSAN_REORDER,
           "the cached contextualised keys/values of ctxsan's decoder do not follow the beams"),
    Mutant("gret_gate_cache_not_reordered", M + "gret_context_gate.py",
           'return reorder_cache(self, incremental_state, "global", new_order)', "return incremental_state",
           GRET_REORDER,
           "the context gate's cached per-sentence term W_s s does not follow the beams"),
    Mutant("gret_global_not_reordered", "fairseq_ctx/models/transformer_gret.py",
           'new_out["gret_global"] = [encoder_out["gret_global"][0].index_select(0, new_order)]',
           'new_out["gret_global"] = [encoder_out["gret_global"][0]]', GRET_REORDER,
           "reorder_encoder_out leaves the global state s^M in the old order"),
    Mutant("ctxenc_ctx_out_not_reordered", "fairseq_ctx/models/transformer_ctxenc.py",
           'new["ctx_out"] = [t.index_select(1, new_order) for t in encoder_out.get("ctx_out", [])]',
           'new["ctx_out"] = [t for t in encoder_out.get("ctx_out", [])]', CTXENC_REORDER,
           "reorder_encoder_out leaves the context encoder's output in the old order"),
    Mutant("ctxenc_ctx_mask_not_reordered", "fairseq_ctx/models/transformer_ctxenc.py",
           'new["ctx_padding_mask"] = [t.index_select(0, new_order) for t in encoder_out.get("ctx_padding_mask", [])]',
           'new["ctx_padding_mask"] = [t for t in encoder_out.get("ctx_padding_mask", [])]', CTXENC_REORDER,
           "reorder_encoder_out leaves the context padding mask in the old order"),
    Mutant("kv_cache_mask_misaligned", M + "incremental_cache.py",
           "key_padding_mask = torch.cat([prev_mask, key_padding_mask], dim=1)",
           "key_padding_mask = torch.cat([key_padding_mask, prev_mask], dim=1)", ("tests/test_ctxsan.py", "tests/test_dc.py", "tests/test_contract.py"),
           "the cached key padding mask is extended on the wrong side: padding of the first steps moves"),
    # ---- ctxsan (Yang et al. 2019, Eq. 5-10)
    Mutant("ctxsan_gate_on_wrong_branch", M + "ctxsan_attention.py",
           "mixed = torch.lerp(qk, ctx, lam.unsqueeze(-1))", "mixed = torch.lerp(ctx, qk, lam.unsqueeze(-1))",
           CTXSAN, "Eq. 5 with lambda on Q/K instead of on the projected context"),
    Mutant("ctxsan_mean_counts_padding", M + "ctxsan_attention.py",
           "else x32 * self._weights", "else x32", CTXSAN,
           "global means (Eq. 8) include the padded positions"),
    Mutant("ctxsan_global_from_bottom_layer", M + "ctxsan_attention.py",
           "blocks = [history.means[l - 1]]", "blocks = [history.means[0]]", CTXSAN,
           "the global context of layer l is the mean of the embeddings, not of the layer's input (Eq. 8)"),
    Mutant("ctxsan_decoder_mean_sees_future", M + "ctxsan_attention.py",
           "xw.cumsum(0) / self._denom", "xw.sum(0, keepdim=True) / self._denom[-1:]", CTXSAN,
           "decoder-side global context is the whole target's mean, not the causal prefix mean (footnote 2)"),
    Mutant("ctxsan_no_gate_half_mix", M + "ctxsan_attention.py",
           "mixed = qk + ctx", "mixed = torch.lerp(qk, ctx, 0.5)", CTXSAN,
           "--ctxsan-no-gate mixes Q and C U half and half instead of summing them (footnote 1 read as Eq. 5 "
           "without lambda)"),
    Mutant("ctxsan_key_only_contextualises_query", M + "ctxsan_attention.py",
           '{"query": [0], "key": [1], "both": [0, 1]}', '{"query": [0], "key": [0], "both": [0, 1]}', CTXSAN,
           "--ctxsan-contextualize key mixes the context into the queries (Table 3 rows)"),
    # ---- DC (Ampomah et al. 2021, Eq. 6-9)
    Mutant("dc_centred_window_off_by_one", M + "dual_contextual.py",
           "self.pad_left = kernel_size - 1 if causal else kernel_size // 2",
           "self.pad_left = kernel_size - 1 if causal else (kernel_size - 1) // 2", DC,
           "the encoder's window starts at r_t instead of r_{t-f/2} (Eq. 6)"),
    Mutant("dc_padding_leaks_into_conv", M + "dual_contextual.py",
           "r_conv = r.masked_fill(key_padding_mask.transpose(0, 1).unsqueeze(-1), 0.0)", "r_conv = r", DC,
           "padded positions enter the convolution window of real tokens"),
    Mutant("dc_fi_keys_swapped", M + "dual_contextual.py",
           "k_parts = [k_l, k_g]",
           "k_parts = [k_g, k_l]", DC,
           "the two FI units exchange their keys (h_l keyed on r, h_g on l_c)"),
    Mutant("dc_local_unit_no_residual", M + "dual_contextual.py",
           "return self.local_layer_norm(r_hat + r)", "return self.local_layer_norm(r_hat)", DC,
           "l_c = LN(r_hat) without the residual r (Eq. 6)"),
    Mutant("dc_conv_cache_keeps_oldest", M + "dual_contextual.py",
           'saved["prev_input"] = window[window.size(0) - (self.kernel_size - 1):].transpose(0, 1)',
           'saved["prev_input"] = window[:self.kernel_size - 1].transpose(0, 1)', DC,
           "incremental decoding caches the oldest f-1 inputs instead of the newest"),
    # ---- GRET (Weng et al. 2020, Algorithm 1, Eq. 2-13)
    Mutant("gret_squash_unnormalised", M + "gret_capsule_routing.py",
           "torch.sqrt(sq_norm + eps) / (1.0 + sq_norm)", "sq_norm / (1.0 + sq_norm)", GRET,
           "squash (Eq. 4) without the division by |t|"),
    Mutant("gret_routing_logits_overwritten", M + "gret_capsule_routing.py",
           "logits = logits + torch.bmm(capsules * scale_ng, pred_t)",
           "logits = torch.bmm(capsules * scale_ng, pred_t)", GRET,
           "Eq. 6 assigns B instead of accumulating B = B + U^T H"),
    Mutant("gret_routing_softmax_wrong_dim", M + "gret_capsule_routing.py",
           "return F.softmax(logits, dim=1)", "return F.softmax(logits, dim=2)", GRET,
           "the coupling softmax over capsules (default) taken over positions"),
    Mutant("gret_routing_padding_kept", M + "gret_capsule_routing.py",
           "pred = pred.masked_fill(padding_mask.unsqueeze(-1), 0.0)", "pred = pred", GRET,
           "predictions at padded positions are routed into the capsules"),
    Mutant("gret_every_layer_first_capsules", M + "gret_global.py",
           "pooled = self.pool_layer(m, states.transpose(0, 1), padding_mask)",
           "pooled = self.pool_layer(0, states.transpose(0, 1), padding_mask)", GRET,
           "every layer routed and pooled by layer 1's capsule network"),
    Mutant("gret_no_aggregation_first_layer", M + "gret_global.py",
           "return self.pool_layer(0, layer_states[-1].transpose(0, 1), padding_mask)",
           "return self.pool_layer(0, layer_states[0].transpose(0, 1), padding_mask)", GRET,
           "--gret-no-aggregation pools the first encoder layer instead of the last"),
    Mutant("gret_pooling_one_ffn", M + "gret_attentive_pooling.py",
           "query = torch.tanh(self.query_ffn(capsules.mean(dim=1)))",
           "query = torch.tanh(self.out_ffn(capsules.mean(dim=1)))", GRET,
           "Eq. 9's FFN replaced by Eq. 7's (one FFN for both)"),
    Mutant("gret_gate_scales_state", M + "gret_context_gate.py",
           "return states + gate * glob  # Eq. 13", "return gate * states + glob", GRET,
           "Eq. 13 gates the decoder state instead of the global state"),
    # ---- ctxenc (Voita et al. 2018)
    Mutant("ctxenc_ctx_attention_ignores_padding", M + "ctxenc_gated_layer.py",
           "key_padding_mask=ctx_padding_mask,", "key_padding_mask=None,", CTXENC,
           "the context attention attends to the context's padding"),
    Mutant("ctxenc_ctx_attention_reads_source", M + "ctxenc_gated_layer.py",
           "c_c, _ = self.ctx_attn(query=x, key=ctx, value=ctx,", "c_c, _ = self.ctx_attn(query=x, key=x, value=x,",
           CTXENC, "the context attention attends to the source instead of the context encoder's output"),
    # ---- --task document_translation
    Mutant("doc_context_newest_first", "fairseq_ctx/data/context_selection.py",
           "offsets = -np.arange(context_size, 0, -1, dtype=np.int64)",
           "offsets = -np.arange(1, context_size + 1, dtype=np.int64)", DOC,
           "previous context sentences in newest-first order"),
    Mutant("doc_context_crosses_documents", "fairseq_ctx/data/context_selection.py",
           "index = np.where(inside & same_doc, index, -1)", "index = np.where(inside, index, -1)", DOC,
           "context taken across a document boundary"),
    Mutant("doc_long_context_keeps_oldest", "fairseq_ctx/data/token_layout.py",
           "out[len(out) - max_tokens:], sep)", "out[:max_tokens], sep)", DOC,
           "an over-long context loses its newest tokens instead of its oldest"),
    Mutant("doc_collater_ignores_sort", "fairseq_ctx/data/context_input.py",
           'context = [by_id[i] for i in batch["id"].tolist()]', 'context = [s["context"] for s in samples]', DOC,
           "batched contexts stay in sample order while the sources are sorted by length"),
    # ---- the contrastive scorer
    Mutant("contrastive_context_oldest", "fairseq_ctx/data/context_selection.py",
           "return list(sentences[len(sentences) - self.size:]) if self.size > 0 else []",
           "return list(sentences[:self.size]) if self.size > 0 else []",
           ("tests/test_contrastive.py::test_context_slice_keeps_the_newest",),
           "the scorer keeps the oldest --context-size context sentences instead of the newest"),
    Mutant("contrastive_ensemble_mean_logprob", "fairseq_ctx/evaluation/contrastive/scorer.py",
           "torch.logsumexp(torch.stack(token_lprobs), dim=0) - math.log(len(token_lprobs)))",
           "torch.stack(token_lprobs).mean(dim=0))",
           ("tests/test_contrastive.py::test_two_model_ensemble_matches_fairseq_sequence_scorer",),
           "an ensemble scored as the mean of log-probabilities, not the log of the mean probability"),
    # ---- fairseq's inference options reaching our modules
    Mutant("attention_dropout_not_retained", M + "fused_attention.py",
           "on = dropout_module.training or dropout_module.apply_during_inference",
           "on = dropout_module.training",
           ("tests/test_contract.py::test_retain_dropout_makes_evaluation_draw_trainings_dropout",),
           "--retain-dropout leaves ctxsan's and DC's attention probabilities undropped at inference"),
]

CONFTEST = '''"""Written by scripts/mutation_check.py: record which fairseq_ctx is imported."""
import os

import fairseq_ctx

with open(os.environ["MUTATION_IMPORT_LOG"], "a") as _log:
    _log.write(os.path.dirname(os.path.abspath(fairseq_ctx.__file__)) + "\\n")
'''


def make_copy(root: Path) -> Path:
    """Copy the parts of the repository the tests need into ``root/repo``;
    ``root/shared`` points at the checkout's ``shared/`` (tests look beside
    the repository for it)."""
    repo = root / "repo"
    repo.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        if (REPO / name).exists():
            shutil.copytree(REPO / name, repo / name, ignore=ignore)
    (repo / "conftest.py").write_text(CONFTEST)
    shared = REPO.parent / "shared"
    if shared.is_dir():
        (root / "shared").symlink_to(shared)
    return repo


def check_entry(repo: Path, m: Mutant) -> str:
    """'' if the entry applies, else why not."""
    path = repo / m.file
    if not path.exists():
        return f"stale: {m.file} does not exist"
    count = path.read_text().count(m.old)
    if count != 1:
        return f"stale: the text to replace occurs {count} times in {m.file}"
    missing = [t for t in m.tests if not (repo / t.split("::")[0]).exists()]
    if missing:
        return f"stale: no test file {', '.join(missing)}"
    return ""


def run_tests(repo: Path, tests: Sequence[str], timeout: int) -> Dict:
    """Run pytest on ``tests`` in the copy; returns rc, failing node ids,
    where fairseq_ctx was imported from, and the output's tail."""
    log = repo / "import.log"
    if log.exists():
        log.unlink()
    env = dict(os.environ)
    env.update(PYTHONPATH=str(repo), PYTHONDONTWRITEBYTECODE="1", MUTATION_IMPORT_LOG=str(log))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("FAIRSEQ_CTX_SHARED", str(REPO.parent / "shared"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-p", "no:randomly",
           *tests, *[a for t in NOT_EQUATION_TESTS for a in ("--deselect", t)]]
    start = time.time()
    try:
        proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = -1, f"timeout after {timeout} s\n{e.stdout or ''}"
    imported = sorted(set(log.read_text().split())) if log.exists() else []
    failed = [line.split()[1] for line in out.splitlines() if line.startswith("FAILED ")]
    return {"rc": rc, "failed": failed, "imported": imported, "seconds": round(time.time() - start, 1),
            "tail": out[-3000:]}


def classify(repo: Path, res: Dict) -> str:
    if res["imported"] != [str(repo / "fairseq_ctx")]:
        return "error"  # not (only) the copy was tested
    if res["rc"] == 1 and res["failed"]:
        return "killed"
    if res["rc"] == 0:
        return "SURVIVED"
    return "error"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per pytest run (default 900)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy (its path is printed)")
    args = parser.parse_args(argv)

    names = [m.name for m in MUTANTS]
    if len(set(names)) != len(names):
        parser.error("duplicate mutant names in MUTANTS")
    mutants = MUTANTS
    if args.only:
        unknown = sorted(set(args.only) - set(names))
        if unknown:
            parser.error(f"--only: unknown mutant(s) {', '.join(unknown)} (see --list)")
        mutants = [m for m in MUTANTS if m.name in args.only]
    if args.list:
        for m in mutants:
            print(f"{m.name:40s} {m.file}\n    {m.description}\n    tests: {' '.join(m.tests)}")
        return 0

    tmp = Path(tempfile.mkdtemp(prefix="fairseq_ctx_mutation_"))
    report = {"mutants": [], "baseline": None}
    started = time.time()
    try:
        repo = make_copy(tmp)
        print(f"copy: {repo}", flush=True)
        # the unmutated copy must pass every covering test, or a "kill" means nothing
        all_tests = sorted({t for m in mutants for t in m.tests})
        base = run_tests(repo, all_tests, args.timeout)
        report["baseline"] = {"tests": all_tests, "rc": base["rc"], "seconds": base["seconds"],
                              "imported": base["imported"]}
        print(f"baseline: rc {base['rc']} in {base['seconds']} s, fairseq_ctx from {base['imported']}", flush=True)
        if classify(repo, base) != "SURVIVED":
            print(base["tail"], file=sys.stderr)
            print("mutation check: the unmutated copy does not pass its covering tests; stopping", file=sys.stderr)
            return 2
        width = max(len(m.name) for m in mutants)
        for m in mutants:
            problem = check_entry(repo, m)
            path = repo / m.file
            row = {**asdict(m), "tests": list(m.tests)}
            if problem:
                row.update(result="error", detail=problem, failed=[], seconds=0.0)
            else:
                original = path.read_text()
                path.write_text(original.replace(m.old, m.new))
                try:
                    res = run_tests(repo, m.tests, args.timeout)
                finally:
                    path.write_text(original)
                row.update(result=classify(repo, res), failed=res["failed"], seconds=res["seconds"],
                           imported=res["imported"], rc=res["rc"])
                if row["result"] == "error":
                    row["detail"] = res["tail"]
            report["mutants"].append(row)
            killers = ", ".join(f.split("::", 1)[1] if "::" in f else f for f in row["failed"][:4])
            more = f" (+{len(row['failed']) - 4})" if len(row["failed"]) > 4 else ""
            print(f"{m.name:{width}s}  {row['result']:8s} {row['seconds']:6.1f}s  {killers}{more}"
                  + (f"  [{row.get('detail', '')[:200]}]" if row["result"] == "error" else ""), flush=True)
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report["seconds"] = round(time.time() - started, 1)
    counts = {k: sum(r["result"] == k for r in report["mutants"]) for k in ("killed", "SURVIVED", "error")}
    report["counts"] = counts
    print(f"{len(report['mutants'])} mutants: {counts['killed']} killed, {counts['SURVIVED']} survived, "
          f"{counts['error']} errors; {report['seconds']} s in all")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0 if counts["killed"] == len(report["mutants"]) else 1


if __name__ == "__main__":
    sys.exit(main())
