#!/usr/bin/env python3
"""Speed and memory of fairseq_ctx architectures against plain ``transformer``.

For each variant (an ``--arch`` plus optional flags) this measures, on the same
binarized data and with the same model size:

* training throughput: target tokens/s over ``--train-updates`` updates
  (forward, backward, Adam step) after ``--warmup-updates`` untimed ones;
* beam-search decoding: sentences/s and generated tokens/s over
  ``--decode-sentences`` sentences of ``--gen-subset`` (whole batches in a
  seeded random order, the same for every variant). By default every
  hypothesis is exactly ``--decode-length`` tokens long (EOS is blocked until
  then), so that models which stop at different lengths (untrained ones
  above all) still compare like with like; ``--decode-length 0`` decodes
  freely with the output length capped by ``--max-len-a``/``--max-len-b``;
* peak memory (CUDA: max allocated; CPU: the process's peak RSS) and the
  number of parameters;
* the FLOPs per token of the same training batches (forward and backward) and
  of the same decoding batches (the whole beam search, encoder included),
  counted by ``torch.utils.flop_counter`` on the shapes the model really runs
  (matrix products and attention; elementwise ops are not counted), in an
  untimed pass after the timed ones. Their ratio to the baseline's,
  ``baseline FLOPs/token / variant FLOPs/token``, is the speed ratio the
  variant would reach if time followed the FLOPs: its FLOP bound
  (``train_bound``, ``decode_bound``), printed beside the measured ratio
  (``train_ratio``, ``decode_ratio``: tokens/s against the baseline). Padding
  that a variant computes counts as its work (a context batch padded to its
  longest context lowers the bound);
* document-order decoding (variants whose encoder can keep each sentence's
  shared-layer states, ``transformer_ctxenc``; skipped with
  ``--no-doc-order``): every sentence of ``--gen-subset`` in fairseq-generate's
  order, decoded ordinarily (``full_decode_ratio``) and with the
  ``--reuse-sentence-states`` cache (``doc_order_decode_ratio``), each against
  the baseline's decode of the same sentences and beside its FLOP bound, and
  the reused decode against the ordinary one of the same process
  (``doc_order_speedup``); the hypotheses that differ between the two
  (``doc_order_differing``, the tests require none) and the largest score
  difference among the others (``doc_order_max_score_diff``) are recorded;
* with ``--profile-steps``, one more training update and one decoded batch
  under the profiler (``train_profile``, ``decode_profile``;
  scripts/step_profile.py), after the timed ones: the share of the wall
  time the GPU was busy, and the host's time inside operations, waiting for the GPU and between
  operations, which says whether a ratio below its FLOP bound comes from
  launches, Python or the GPU's work;

each as a ratio against plain ``transformer`` measured in the same run. Times
are the process's CPU time when it runs one thread on CPU (``--clock auto``,
the default with ``--threads 1``): on one thread CPU time equals wall time on
a quiet machine, and on a machine shared with other jobs it does not count
the time the process waits for a core, so rates stay comparable (measured on
the development machine with both cores training: the baseline's training
rate was within 5% of a quiet run's, and ctxenc's ratio by CPU time and by
wall time 0.692 and 0.696 in the same alternating run). With several threads
or on CUDA it is wall time (``--clock wall``; CPU time would add up the
threads). Every
variant runs in a fresh subprocess (so peak memory is its own), variants
alternate over ``--repeats`` rounds; values are medians over rounds, and
ratios are medians of the per-round ratios (each variant against the baseline
of its own round).

The variants are named with ``--variants NAME ...`` (the list of
``fairseq_ctx/architectures.py``: each name's arch, model flags and task
flags), ``--archs ARCH ...`` (an arch with no flags) and ``--variant LABEL
ARCH FLAGS``; with none of the three, every variant of the list. Variants
that read context (``concat``, ``ctxenc``) use the document task, so their
data needs ``.docids``.

Examples::

    # CPU, tiny models, on the Bible corpus: every variant of the list
    python3 scripts/benchmark.py data/bible/bin --size tiny
    # some of them
    python3 scripts/benchmark.py data/bible/bin --size tiny --variants ctxsan dc gret
    # the documentation's Markdown table of a saved run
    python3 scripts/benchmark.py --markdown-of benchmarks/cpu-small-1thread.json
    # GPU, Transformer-Base, with a variant carrying its own flags
    python3 scripts/benchmark.py data-bin/wmt14_en_de --size base --device cuda \\
        --variant enc-dc transformer_dc "" --variant full-dc transformer_dc_full ""
"""
import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
from collections import Counter
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:  # this checkout's list, whether or not the package is installed
    sys.path.insert(0, REPO)
from fairseq_ctx import architectures  # noqa: E402  (torch-free)

SIZES = {
    # d, ffn, heads, encoder layers, decoder layers
    "tiny": (64, 256, 4, 2, 2),
    "small": (256, 1024, 4, 3, 3),
    "base": None,  # each arch's own Base preset
}


def size_flags(size):
    if SIZES[size] is None:
        return []
    d, ffn, heads, enc, dec = SIZES[size]
    return [
        "--encoder-embed-dim", str(d), "--decoder-embed-dim", str(d),
        "--encoder-ffn-embed-dim", str(ffn), "--decoder-ffn-embed-dim", str(ffn),
        "--encoder-attention-heads", str(heads), "--decoder-attention-heads", str(heads),
        "--encoder-layers", str(enc), "--decoder-layers", str(dec),
    ]


# ---------------------------------------------------------------- one variant
def fairseq_cli_args(data, arch, size, flags, device, precision, max_tokens, optimizer="adam"):
    """The ``fairseq-train`` command line of one measured model: the
    benchmark's recipe (Adam, label smoothing, dropout 0.1), the size's
    flags, the variant's, and the precision as fairseq-train takes it
    (``--fp16``: FP16Optimizer with dynamic loss scaling; ``--bf16``:
    FP16Optimizer without it). On CPU, which fairseq-train does not run in
    half precision, two settings make fairseq's same optimizer classes run
    there (a rehearsal, not a measurement of what users run): fp16 with
    ``--fp16-no-flatten-grads`` (fairseq puts flattened float32 masters on
    the current CUDA device), and bf16 with ``--tpu`` taken back off after
    parsing (:func:`parse_train_args`)."""
    cli = [data, "--user-dir", os.path.join(REPO, "fairseq_ctx"), "--arch", arch,
           "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
           "--optimizer", optimizer, "--adam-betas", "(0.9, 0.98)", "--lr", "0.0005",
           "--max-tokens", str(max_tokens), "--required-batch-size-multiple", "1", "--dropout", "0.1",
           "--seed", "1", "--num-workers", "0"]
    cli += list(size) + list(flags)
    if precision != "fp32":
        cli.append("--" + precision)
    if device == "cpu":
        cli.append("--cpu")
        if precision == "fp16":
            cli.append("--fp16-no-flatten-grads")
    return cli


def parse_train_args(cli, device):
    """fairseq-train's parse of ``cli`` as an omegaconf config. fairseq 0.12
    turns ``--bf16`` into ``--tpu``; on a GPU fairseq_ctx/bf16_on_cuda.py
    turns it back off as in fairseq-train, on CPU (rehearsals only) it is
    turned off here."""
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), input_args=cli)
    if device == "cpu":
        args.tpu = False
    return convert_namespace_to_omegaconf(args)


def build_trainer(cfg):
    """(task, model, criterion, fairseq Trainer) as fairseq-train builds them:
    the Trainer casts the model for --fp16/--bf16, moves it to the device
    and picks the optimizer class (FP16Optimizer in half precision)."""
    from fairseq import tasks
    from fairseq.trainer import Trainer

    task = tasks.setup_task(cfg.task)
    model = task.build_model(cfg.model)
    criterion = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, criterion)
    return task, trainer.model, trainer.criterion, trainer


def optimizer_record(trainer) -> dict:
    """What fairseq-train's optimizer is: its class, the wrapped optimizer's
    class, and the loss scale (None without loss scaling)."""
    opt = trainer.optimizer
    inner = getattr(opt, "fp32_optimizer", None) or getattr(opt, "wrapped_optimizer", None)
    scaler = getattr(opt, "scaler", None)
    return {"optimizer": type(opt).__name__, "inner_optimizer": type(inner).__name__ if inner is not None else None,
            "loss_scale": float(scaler.loss_scale) if scaler is not None else None}


def measure(opts):
    """Runs in the child process: build one model, time it, print JSON.

    Training updates are fairseq-train's (``Trainer.train_step``: forward,
    backward, the optimizer of the precision, loss scaling and its overflow
    skips for fp16), on the batches fairseq-train would draw; the model is
    the one the Trainer cast and moved. ``phase_s``: the seconds of each
    phase of the child (set-up: imports, the model and Trainer; training,
    the untimed updates and the one whose kernels are recorded included;
    decoding; the document-order decodes; with ``--profile-steps`` the
    profiled update and decoded batch; the FLOP count), so that a GPU call can be
    sized and its overhead seen; the child's start-up before them is the
    piece's ``seconds`` less their sum."""
    phase_start = time.perf_counter()
    phases = {}

    def phase_done(name):
        nonlocal phase_start
        now = time.perf_counter()
        phases[name] = round(now - phase_start, 3)
        phase_start = now

    import torch
    from fairseq import utils

    from fairseq_ctx.modules import fused_attention

    torch.manual_seed(1)
    if opts.threads:
        torch.set_num_threads(opts.threads)
    device = torch.device(opts.device)
    clock = time.process_time if opts.clock == "cpu" else time.perf_counter
    cli = fairseq_cli_args(opts.data, opts.arch, size_flags(opts.size), opts.flags, opts.device, opts.precision,
                           opts.max_tokens, opts.optimizer)
    cfg = parse_train_args(cli, opts.device)
    task, model, criterion, trainer = build_trainer(cfg)
    from fairseq_ctx.modules.ctxenc_state_cache import SharedStateCache  # imported by --user-dir above
    params = sum(p.numel() for p in model.parameters())
    phase_done("setup")

    def batches(split, max_tokens=None, max_sentences=None, shuffle=True, to_device=True):
        task.load_dataset(split)
        itr = task.get_batch_iterator(
            dataset=task.dataset(split), max_tokens=max_tokens, max_sentences=max_sentences,
            max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
            ignore_invalid_inputs=True, required_batch_size_multiple=1, seed=1, num_workers=0,
        ).next_epoch_itr(shuffle=shuffle)
        for sample in itr:
            yield utils.move_to_cuda(sample, device) if to_device and device.type == "cuda" else sample

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    # training: fairseq's Trainer takes the batches as the iterator gives them (it moves them itself)
    train_iter = batches("train", max_tokens=opts.max_tokens, to_device=False)
    tokens, elapsed = 0, 0.0
    timed_samples = []  # kept for the FLOP count
    for step in range(opts.warmup_updates + opts.train_updates):
        try:
            sample = next(train_iter)
        except StopIteration:
            train_iter = batches("train", max_tokens=opts.max_tokens, to_device=False)
            sample = next(train_iter)
        sync()
        start = clock()
        trainer.train_step([sample])
        sync()
        if step >= opts.warmup_updates:
            elapsed += clock() - start
            tokens += int(sample["ntokens"])
            timed_samples.append(sample)
    train_tok_s = tokens / elapsed
    # updates fp16's loss scaling skipped (an overflow: the step is dropped, the scale halved)
    skipped = opts.warmup_updates + opts.train_updates - trainer.get_num_updates()
    optim = optimizer_record(trainer)
    # the attention kernels that ran in one more (untimed) update, by the profiler
    with fused_attention.recorded_kernels() as train_kernels:
        trainer.train_step([timed_samples[0]])
    timed_samples = [utils.move_to_cuda(s, device) if device.type == "cuda" else s for s in timed_samples]
    phase_done("train")

    # decoding
    model.eval()
    if opts.decode_length > 0:
        lengths = dict(min_len=opts.decode_length, max_len_a=0, max_len_b=opts.decode_length)
    else:
        lengths = dict(min_len=1, max_len_a=opts.max_len_a, max_len_b=opts.max_len_b)
    gen_args = argparse.Namespace(beam=opts.beam, lenpen=1.0, unkpen=0.0, nbest=1, **lengths)
    generator = task.build_generator([model], gen_args)

    def timed_decode(samples, cache_class=None):
        """Generated tokens per second over ``samples`` (one untimed batch
        first), the best hypotheses by sentence id and the number of
        generated tokens; with ``cache_class``, decoded with a state cache
        that is new after the warm-up batch (neither its states nor its
        counts carry over), returned last (else None)."""
        n_tokens, elapsed, best = 0, 0.0, {}
        with torch.no_grad():
            with fused_attention.recorded_kernels() as kernels:
                task.inference_step(generator, [model], samples[0])
            decode_kernels.update(kernels)
            cache = None
            if cache_class is not None:
                cache = model.encoder.state_cache = cache_class()
            for sample in samples:
                sync()
                start = clock()
                hypos = task.inference_step(generator, [model], sample)
                sync()
                elapsed += clock() - start
                n_tokens += sum(int(h[0]["tokens"].numel()) for h in hypos)
                for i, h in zip(sample["id"].tolist(), hypos):
                    best[i] = (h[0]["tokens"].tolist(), float(h[0]["score"]))
        if cache_class is not None:
            model.encoder.state_cache = None  # every other measurement runs the ordinary path
        return n_tokens / elapsed, best, n_tokens, cache

    decode_kernels = Counter()  # the attention kernels of each decode's untimed first batch
    # Batches in a seeded random order: the first batches of the length-sorted
    # order hold only the shortest sources, whose document contexts are
    # longer than they are, which would overstate a context model's cost.
    decode_samples, sents = [], 0  # kept for the FLOP count
    for sample in batches(opts.gen_subset, max_sentences=opts.decode_batch_size, shuffle=True):
        decode_samples.append(sample)
        sents += len(sample["id"])
        if sents >= opts.decode_sentences:
            break
    decode_tok_s, _, gen_tokens, _ = timed_decode(decode_samples)
    phase_done("decode")
    # read before the document-order decodes, which only the baseline and
    # ctxenc run (all their batches held, and ctxenc's cached states)
    if device.type == "cuda":
        peak_mb = torch.cuda.max_memory_allocated() / 2 ** 20
    else:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    # Document order: every sentence of the subset in
    # fairseq-generate's order, for the baseline and for models that can keep
    # each sentence's shared-layer states (transformer_ctxenc): ordinary, then
    # with --reuse-sentence-states' cache, which must give the same hypotheses.
    can_reuse = reuses_sentence_states(opts.arch)
    full = {}
    if opts.doc_order and (can_reuse or opts.baseline):
        full_samples = list(batches(opts.gen_subset, max_sentences=opts.decode_batch_size, shuffle=False))
        full["full_decode_tok_s"], ordinary, full_tokens, _ = timed_decode(full_samples)
        if can_reuse:
            full["doc_order_decode_tok_s"], reused, _, cache = timed_decode(full_samples, SharedStateCache)
            # the same process's two decodes: less noisy than two ratios to the baseline
            full["doc_order_speedup"] = full["doc_order_decode_tok_s"] / full["full_decode_tok_s"]
            full["doc_order_hits"], full["doc_order_misses"] = cache.hits, cache.misses
            full["doc_order_differing"], full["doc_order_max_score_diff"] = compare_decodes(ordinary, reused)
    phase_done("doc_order")

    # --profile-steps: after every timed phase and the peak memory (the traces take host memory)
    profiles = {}
    if opts.profile_steps:
        import step_profile  # this directory's

        model.train()
        profiles["train_profile"] = step_profile.profile_or_error(
            lambda: trainer.train_step([timed_samples[0]]), device.type == "cuda")
        model.eval()
        with torch.no_grad():
            profiles["decode_profile"] = step_profile.profile_or_error(
                lambda: task.inference_step(generator, [model], decode_samples[0]), device.type == "cuda")
        phase_done("profile")

    # FLOPs of the timed batches, counted after the peak memory was read (the
    # counting passes repeat the work). Adam's step is elementwise (0 FLOPs).
    # Every round runs the same seeded batches, so rounds after the first
    # take their counts from the first (--no-flops; the parent checks that
    # the batches were the same).
    flops = {} if opts.no_flops else count_model_flops(
        model, criterion, task, generator, timed_samples, decode_samples,
        full_samples if full else [], SharedStateCache if "doc_order_decode_tok_s" in full else None)
    if flops:
        flops["train_flops_tok"] /= tokens
        flops["decode_flops_tok"] /= gen_tokens
        for key in ("full_decode_flops_tok", "doc_order_decode_flops_tok"):
            if key in flops:
                flops[key] /= full_tokens
    phase_done("flops")
    if full:
        full["full_decode_tokens"] = full_tokens
    # what the FLOP counts depend on: every counted batch's sentences and shapes
    digest = hashlib.sha1()
    for sample in timed_samples + decode_samples + (full_samples if full else []):
        digest.update(sample["id"].cpu().numpy().tobytes())
        digest.update(str(tuple(sample["net_input"]["src_tokens"].shape)).encode())
        if sample["net_input"].get("ctx_tokens") is not None:
            digest.update(str(tuple(sample["net_input"]["ctx_tokens"].shape)).encode())
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {"device_name": gpu or "cpu", "peak_flops": peak_flops(gpu, opts.precision, opts.peak_tflops),
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
            "sdpa_policy": fused_attention.ensure_policy(), "sdpa_state": fused_attention.sdpa_state(),
            "sdpa_kernels_train": dict(train_kernels), "sdpa_kernels_decode": dict(decode_kernels),
            "skipped_updates": skipped, **optim,
            "batches_sha1": digest.hexdigest(), "params": params, "train_tok_s": train_tok_s,
            "decode_sent_s": decode_tok_s * sents / gen_tokens, "decode_tok_s": decode_tok_s, "peak_mem_mb": peak_mb,
            "decoded_sentences": sents, "decoded_tokens": gen_tokens, "timed_train_tokens": tokens, **full, **flops,
            **profiles, "phase_s": phases}


def count_model_flops(model, criterion, task, generator, timed_samples, decode_samples, full_samples,
                      state_cache_class):
    """FLOPs (totals, not per token) of the timed training steps, the timed
    decoding batches and, when ``full_samples`` are given, the document-order
    decodes (ordinary, and with a fresh state cache when ``state_cache_class``)."""
    import torch

    model.train()
    train_flops = 0
    for sample in timed_samples:
        def step(sample=sample):  # the model is in the Trainer's precision already
            loss, _, _ = criterion(model, sample)
            loss.backward()
        train_flops += count_flops(step)
        model.zero_grad(set_to_none=True)
    model.eval()

    def decode_flops(samples):
        with torch.no_grad():
            return sum(count_flops(lambda sample=sample: task.inference_step(generator, [model], sample))
                       for sample in samples)
    out = {"train_flops_tok": train_flops, "decode_flops_tok": decode_flops(decode_samples)}
    if full_samples:
        if state_cache_class is not None:
            model.encoder.state_cache = None
        out["full_decode_flops_tok"] = decode_flops(full_samples)
        if state_cache_class is not None:
            model.encoder.state_cache = state_cache_class()
            out["doc_order_decode_flops_tok"] = decode_flops(full_samples)
            model.encoder.state_cache = None
    return out


def compare_decodes(a, b):
    """(sentences whose best hypotheses differ, largest score difference
    among the others) of two decodes of the same sentences. Reused states
    are the same numbers computed in other batch shapes, so a differing
    hypothesis is a near-tie flipped by rounding or a bug: reported, and
    the tests require none."""
    if a.keys() != b.keys():
        sys.exit("benchmark: the document-order decodes translated different sentences")
    same = [i for i in a if a[i][0] == b[i][0]]
    return len(a) - len(same), max((abs(a[i][1] - b[i][1]) for i in same), default=0.0)


def count_flops(fn) -> int:
    """FLOPs of ``fn()`` (matrix products and attention), by torch's FLOP counter."""
    import torch
    from torch.utils import flop_counter

    # torch counts the CUDA attention kernels but not the CPU one, which
    # F.scaled_dot_product_attention (ctxsan, fairseq's attention) runs on CPU;
    # without it attention would be free on CPU and bounds off. Same formulas
    # as torch's for the CUDA kernels (forward 2 products, backward 5: the
    # scores are recomputed).
    aten = torch.ops.aten
    cpu_fwd = aten._scaled_dot_product_flash_attention_for_cpu
    cpu_bwd = aten._scaled_dot_product_flash_attention_for_cpu_backward
    if cpu_fwd not in flop_counter.flop_registry:
        @flop_counter.register_flop_formula(cpu_fwd)
        def _cpu_sdpa(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
            return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)
    if cpu_bwd not in flop_counter.flop_registry:
        @flop_counter.register_flop_formula(cpu_bwd)
        def _cpu_sdpa_backward(grad_out_shape, query_shape, key_shape, value_shape, *args,
                               out_shape=None, **kwargs) -> int:
            return flop_counter.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)
    with flop_counter.FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


# ---------------------------------------------------------------- GPU peak
# Dense tensor-core peaks from NVIDIA's datasheets, FLOP/s: (GPU name
# fragment, {precision: peak}); fp32 is the CUDA-core rate (PyTorch does not
# use TF32 for float32 matmuls unless told to). The first fragment found in
# torch.cuda.get_device_name() wins, so the specific ones come first.
GPU_PEAKS = [
    ("H100 PCIe", {"fp16": 756e12, "bf16": 756e12, "fp32": 51.2e12}),
    ("H100", {"fp16": 989.4e12, "bf16": 989.4e12, "fp32": 66.9e12}),  # SXM5 (HBM3)
    ("H200", {"fp16": 989.4e12, "bf16": 989.4e12, "fp32": 66.9e12}),
    ("A100", {"fp16": 312e12, "bf16": 312e12, "fp32": 19.5e12}),
]


def peak_flops(gpu_name, precision, override_tflops=0.0):
    """The GPU's peak FLOP/s at ``precision`` (None on CPU or for a GPU not
    in :data:`GPU_PEAKS`; ``--peak-tflops`` overrides)."""
    if override_tflops:
        return override_tflops * 1e12
    if gpu_name is None:
        return None
    for fragment, peaks in GPU_PEAKS:
        if fragment in gpu_name:
            return peaks[precision]
    return None


def add_mfu(results):
    """``train_mfu``/``decode_mfu``: the share of the GPU's peak that the
    counted FLOPs per token times tokens per second make (model FLOPs
    utilisation; elementwise work is not counted, so it is a lower bound)."""
    for res in results.values():
        peak = res.get("peak_flops")
        if peak:
            res["train_mfu"] = res["train_flops_tok"] * res["train_tok_s"] / peak
            res["decode_mfu"] = res["decode_flops_tok"] * res["decode_tok_s"] / peak


# ---------------------------------------------------------------- orchestration
METRICS = [("params", "params"), ("train_tok_s", "train tok/s"), ("decode_sent_s", "dec sent/s"),
           ("decode_tok_s", "dec tok/s"), ("peak_mem_mb", "peak MB"),
           ("train_flops_tok", "train FLOP/tok"), ("decode_flops_tok", "dec FLOP/tok")]
# measured speed ratio -> its FLOP bound (the variant's speed if time followed the FLOPs)
BOUNDS = [("train_ratio", "train_tok_s", "train_bound", "train_flops_tok"),
          ("decode_ratio", "decode_tok_s", "decode_bound", "decode_flops_tok")]
# Document order: every sentence of the subset in fairseq-generate's order;
# the baseline's ordinary decode of it against a variant's ordinary decode
# (full_decode_*) and its decode with reused sentence states (doc_order_decode_*).
DOC_ORDER = [("full_decode_ratio", "full_decode_tok_s", "full_decode_bound", "full_decode_flops_tok"),
             ("doc_order_decode_ratio", "doc_order_decode_tok_s", "doc_order_decode_bound",
              "doc_order_decode_flops_tok")]


def add_bounds(results, runs, baseline="transformer"):
    """``train_ratio``/``decode_ratio`` (tokens/s against the baseline) and
    ``train_bound``/``decode_bound`` (baseline FLOPs per token over the
    variant's), medians of per-round pairs like every other ratio."""
    base_runs = runs[baseline]
    for label, res in results.items():
        for ratio_key, speed_key, bound_key, flops_key in BOUNDS:
            res[ratio_key] = res[speed_key + "_ratio"]
            res[bound_key] = statistics.median(b[flops_key] / r[flops_key] for r, b in zip(runs[label], base_runs))
        for ratio_key, speed_key, bound_key, flops_key in DOC_ORDER:
            if label == baseline or speed_key not in runs[label][0]:
                continue
            pairs = list(zip(runs[label], base_runs))
            res[speed_key] = statistics.median(r[speed_key] for r, _ in pairs)
            res[ratio_key] = statistics.median(r[speed_key] / b["full_decode_tok_s"] for r, b in pairs)
            res[bound_key] = statistics.median(b["full_decode_flops_tok"] / r[flops_key] for r, b in pairs)
        if label != baseline and "doc_order_hits" in runs[label][0]:
            res["doc_order_speedup"] = statistics.median(r["doc_order_speedup"] for r in runs[label])
            res["doc_order_hits"] = runs[label][0]["doc_order_hits"]
            res["doc_order_misses"] = runs[label][0]["doc_order_misses"]
            res["doc_order_differing"] = max(r["doc_order_differing"] for r in runs[label])
            res["doc_order_max_score_diff"] = max(r["doc_order_max_score_diff"] for r in runs[label])


def markdown_table(doc) -> str:
    """The documentation's table of a results JSON: each speed ratio beside
    its FLOP bound and their quotient (1.00 = at the bound), then the
    document-order decodes."""
    results, settings = doc["results"], doc["settings"]

    def quotient(res, ratio, bound):
        return f"{res[ratio]:.2f}x | {res[bound]:.2f}x | {res[ratio] / res[bound]:.2f}"
    base = results["transformer"]
    gpu = "train_mfu" in base  # MFU columns: a GPU run whose peak is known
    kernels = "sdpa_kernels_train" in base  # which attention kernels ran (runs since they are recorded)
    profiled = any("wall_ms" in res.get("train_profile", {}) for res in results.values())  # --profile-steps
    lines = ["| variant | params | training: ratio | bound | ratio / bound | decoding: ratio | bound "
             "| ratio / bound | peak memory |" + (" train MFU | decode MFU |" if gpu else "")
             + (" attention kernels, training update |" if kernels else "")
             + (" profiled update: GPU busy, between ops | profiled decode batch: GPU busy, between ops |"
                if profiled else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|---|" if gpu else "") + ("---|" if kernels else "")
             + ("---|---|" if profiled else "")]
    for label, res in results.items():
        name = f"`{label}` ({base['train_tok_s']:.0f} train tok/s, {base['decode_tok_s']:.0f} decode tok/s)" \
            if label == "transformer" else f"`{label}`"
        mfu = f" {res['train_mfu']:.1%} | {res['decode_mfu']:.1%} |" if gpu else ""
        ran = f" {kernel_summary(res.get('sdpa_kernels_train', {}))} |" if kernels else ""
        shares = "".join(f" {profile_shares(res.get(key))} |" for key in ("train_profile", "decode_profile")) \
            if profiled else ""
        lines.append(f"| {name} | {res['params'] / 1e6:.2f}M | {quotient(res, 'train_ratio', 'train_bound')} "
                     f"| {quotient(res, 'decode_ratio', 'decode_bound')} | {res['peak_mem_mb_ratio']:.2f}x |{mfu}{ran}"
                     f"{shares}")
    doc_rows = [(label, res) for label, res in results.items() if "doc_order_decode_ratio" in res]
    if doc_rows:
        lines += ["", f"Every `{settings['gen_subset']}` sentence in fairseq-generate's order, against the "
                  "baseline's decode of the same sentences:", "",
                  "| variant | decode | ratio | bound | ratio / bound |", "|---|---|---|---|---|"]
        for label, res in doc_rows:
            lines.append(f"| `{label}` | ordinary | {quotient(res, 'full_decode_ratio', 'full_decode_bound')} |")
            lines.append(f"| `{label}` | reused sentence states ({res['doc_order_hits']} reused; "
                         f"{res['doc_order_speedup']:.3f}x its ordinary decode) "
                         f"| {quotient(res, 'doc_order_decode_ratio', 'doc_order_decode_bound')} |")
    return "\n".join(lines) + "\n"


def profile_shares(profile) -> str:
    """``41%, 23%`` from a step profile (scripts/step_profile.py): the share
    of its wall time the GPU was busy (``-`` on CPU) and the share outside
    every operation (Python and the framework); the profiler's error, or
    ``-`` where there is none."""
    import step_profile  # this directory's (torch-free)

    if not profile:
        return "-"
    if "error" in profile:
        return f"not profiled ({profile['error'][:60]})"
    shares = step_profile.shares(profile)
    busy = f"{shares['busy']:.0%}" if shares["busy"] is not None else "-"
    return f"{busy}, {shares['between']:.0%}"


def kernel_summary(counts) -> str:
    """``efficient 12 + bwd 12, math 4`` from recorded kernel counts
    (fused_attention.recorded_kernels): the forward kernels that ran, with
    their backward calls where they have their own."""
    parts = []
    for kernel in ("flash", "efficient", "cudnn", "cpu_fused", "math", "overrideable"):
        if counts.get(kernel):
            back = counts.get(kernel + "_backward")
            parts.append(f"{kernel} {counts[kernel]}" + (f" + bwd {back}" if back else ""))
    return ", ".join(parts) or "none"


def variants_of(opts):
    """``(label, arch, flags)`` of every variant to run, the plain
    ``transformer`` baseline first: ``--variants`` (names of
    fairseq_ctx/architectures.py: arch, model and task flags), ``--archs``,
    ``--variant``; with none of them, every variant of the list."""
    listed = opts.variants
    if not (opts.variants or opts.archs is not None or opts.variant):
        listed = architectures.names()
    variants = [("transformer", "transformer", opts.baseline_flags.split())]
    # (the list's own "transformer" is the baseline)
    variants += [(v.name, v.arch, [*v.flags, *v.task])
                 for v in (architectures.select(listed) if listed else []) if v.name != "transformer"]
    variants += [(arch, arch, []) for arch in opts.archs or [] if arch != "transformer"]
    variants += [(label, arch, flags.split()) for label, arch, flags in opts.variant]
    return variants


def reuses_sentence_states(arch: str) -> bool:
    """Whether ``arch`` can keep each sentence's shared-layer states for the
    next sentence's context (the document-order decode measures it)."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    from fairseq_ctx.models.transformer_ctxenc import TransformerCtxEncModel

    model = ARCH_MODEL_REGISTRY.get(arch)  # an unknown one fails in its child, with the child's message
    return model is not None and issubclass(model, TransformerCtxEncModel)


FLOP_KEYS = ("train_flops_tok", "decode_flops_tok", "full_decode_flops_tok", "doc_order_decode_flops_tok")
SAME_WORK = ("batches_sha1", "timed_train_tokens", "decoded_sentences", "decoded_tokens", "full_decode_tokens")


class ChildFailed(Exception):
    """A measurement's process failed (its message names the variant and
    ends with the child's stderr)."""


class ChildCut(Exception):
    """A measurement's process ran into the deadline and was killed."""


def run_child(opts, label, arch, flags, first=None, timeout=None):
    """One measurement in a fresh process. ``first``: the variant's first
    round, whose FLOP counts this round takes after checking that it ran the
    same batches (FLOPs follow from the shapes alone). ``timeout``: seconds
    after which the process is killed (ChildCut)."""
    cmd = [sys.executable, os.path.abspath(__file__), opts.data, "--child", "--arch", arch,
           "--flags", json.dumps(flags)]
    for name in ("size", "device", "precision", "peak_tflops", "max_tokens", "train_updates", "warmup_updates",
                 "decode_sentences", "decode_batch_size", "beam", "decode_length", "max_len_a", "max_len_b",
                 "gen_subset", "threads", "clock", "optimizer"):
        cmd += ["--" + name.replace("_", "-"), str(getattr(opts, name))]
    if not opts.doc_order:
        cmd.append("--no-doc-order")
    if getattr(opts, "profile_steps", False):
        cmd.append("--profile-steps")
    if label == "transformer":
        cmd.append("--baseline")  # decodes every sentence for the document-order ratios
    if first is not None:
        cmd.append("--no-flops")
    env = dict(os.environ)
    if getattr(opts, "sdpa", None):
        env["FAIRSEQ_CTX_SDPA"] = opts.sdpa  # the plugin applies it when it registers (fused_attention.py)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        raise ChildCut(f"benchmark: variant {label} cut at the deadline after {timeout:.0f} s; its stderr ended:\n"
                       f"{err[-1500:]}") from None
    lines = [line for line in proc.stdout.splitlines() if line.startswith("BENCHMARK_JSON ")]
    if proc.returncode != 0 or not lines:
        raise ChildFailed(f"benchmark: variant {label} ({arch} {' '.join(flags)}) failed (exit {proc.returncode}):\n"
                          f"{proc.stderr[-3000:]}")
    result = json.loads(lines[-1][len("BENCHMARK_JSON "):])
    if first is not None:
        differ = [k for k in SAME_WORK if result.get(k) != first.get(k)]
        if differ:
            raise ChildFailed(f"benchmark: variant {label} ran other batches than in its first round "
                              f"({', '.join(differ)} differ), so the first round's FLOP counts do not apply")
        result.update({k: first[k] for k in FLOP_KEYS if k in first})
    return result


def new_run_id():
    """A run's name in its files' names: the UTC time it started (as
    scripts/gpu-call.sh names its calls) and its process id."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{os.getpid()}"


def write_json_atomically(path, doc):
    """``doc`` to ``path`` through a temporary file and a rename: a process
    killed while writing leaves the old file or none, never half a file."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, path)


def write_piece(pieces, run_id, round_, label, arch, flags, result, settings, seconds, failed=None):
    """One child's result as its own JSON file in ``pieces``, the moment the
    child has finished: a call killed later keeps it (``seconds``: the
    child's wall time, start-up included, for sizing calls).  A child that
    failed leaves ``failed`` (its message) instead of a result."""
    os.makedirs(pieces, exist_ok=True)
    name = f"{settings['precision']}-{run_id}-r{round_ + 1}-{label}.json"
    write_json_atomically(os.path.join(pieces, name), {
        "run_id": run_id, "round": round_, "label": label, "arch": arch, "flags": flags,
        "settings": settings, "seconds": round(seconds, 1),
        **({"failed": failed} if failed is not None else {"result": result})})


def aggregate(runs):
    """The results table of ``runs`` (label -> one result per round, the
    baseline's rounds first): medians over rounds, ratios as medians of
    per-round ratios against the baseline of the same round, FLOP bounds,
    MFU."""
    results = {label: {k: statistics.median(r[k] for r in rs) for k, _ in METRICS} for label, rs in runs.items()}
    # Ratios pair each variant with the baseline of the same round, then take
    # the median: a machine that speeds up or slows down between rounds
    # (thermal state, other load) moves both sides of a pair alike.
    base_runs = runs["transformer"]
    for label, res in results.items():
        for key, _ in METRICS:
            res[key + "_ratio"] = statistics.median(r[key] / b[key] for r, b in zip(runs[label], base_runs))
    add_bounds(results, runs)
    for label, res in results.items():
        first = runs[label][0]
        res["device_name"], res["peak_flops"] = first["device_name"], first["peak_flops"]
        for key in ("optimizer", "loss_scale", "sdpa_policy", "sdpa_kernels_train", "sdpa_kernels_decode",
                    "train_profile", "decode_profile"):
            if key in first:
                res[key] = first[key]
    add_mfu(results)
    return results


def collect_pieces(pieces):
    """``(settings, results)`` per call of the pieces in directory ``pieces``
    and its subdirectories (several calls' pieces may share one; a GPU call
    keeps its own, ``bench/CALL``): for each call (run id) and precision, the
    variants with a baseline of the same round, aggregated as one run is;
    rounds without their baseline are left out. ValueError where there is
    no piece."""
    by_run, count = {}, 0
    for folder, _, files in sorted(os.walk(pieces)):
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(folder, name)) as f:
                piece = json.load(f)
            if "run_id" not in piece:
                raise ValueError(f"{os.path.relpath(os.path.join(folder, name), pieces)} is not a piece (no run_id)")
            count += 1
            if "failed" in piece:  # its variant has one round less than the baseline: left out below
                continue
            by_run.setdefault(piece["run_id"], []).append(piece)
    if not count:
        raise ValueError(f"no piece (a --pieces JSON) in {pieces} or below")
    out = []
    for run_id, found in sorted(by_run.items()):
        base_rounds = {pc["round"]: pc["result"] for pc in found if pc["label"] == "transformer"}
        runs = {"transformer": []}
        for rnd in sorted(base_rounds):
            runs["transformer"].append(base_rounds[rnd])
            for pc in found:
                if pc["label"] != "transformer" and pc["round"] == rnd:
                    runs.setdefault(pc["label"], []).append(pc["result"])
        # a variant enters the table with as many rounds as the baseline has
        runs = {label: rs for label, rs in runs.items() if len(rs) == len(runs["transformer"])}
        if not runs["transformer"]:
            out.append((found[0]["settings"], run_id, None))
            continue
        out.append((found[0]["settings"], run_id, aggregate(runs)))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", help="binarized data directory (fairseq-preprocess output)")
    p.add_argument("--variants", nargs="+", default=[], metavar="NAME", choices=architectures.names(),
                   help="variants of fairseq_ctx/architectures.py, each with its flags and task flags: "
                   + ", ".join(architectures.names())
                   + " (default, when neither --archs nor --variant is given either: all of them)")
    p.add_argument("--archs", nargs="*", help="architectures (no flags) to compare with plain transformer")
    p.add_argument("--variant", nargs=3, action="append", default=[], metavar=("LABEL", "ARCH", "FLAGS"),
                   help="a labelled variant with extra fairseq flags (quoted string, may be empty)")
    p.add_argument("--baseline-flags", default="", help="extra flags for the transformer baseline (e.g. a task)")
    p.add_argument("--size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--precision", choices=["fp32", "fp16", "bf16"], default="fp32")
    p.add_argument("--peak-tflops", type=float, default=0.0,
                   help="the GPU's peak TFLOP/s at --precision for the MFU columns (default: from the GPU's name, "
                        "H100/H200/A100 known)")
    p.add_argument("--max-tokens", type=int, default=2048)
    p.add_argument("--train-updates", type=int, default=20)
    p.add_argument("--warmup-updates", type=int, default=3)
    p.add_argument("--decode-sentences", type=int, default=200)
    p.add_argument("--decode-batch-size", type=int, default=32)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--decode-length", type=int, default=30,
                   help="force every hypothesis to this many tokens (0: free decoding, capped)")
    p.add_argument("--max-len-a", type=float, default=1.2)
    p.add_argument("--max-len-b", type=int, default=10)
    p.add_argument("--gen-subset", default="valid")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--repeats", type=int, default=1, help="alternating rounds; the median is reported")
    p.add_argument("--clock", choices=["auto", "cpu", "wall"], default="auto",
                   help="cpu: the process's CPU time (one thread on CPU only); wall: elapsed time; auto (default): "
                        "cpu with --threads 1 on CPU, else wall")
    p.add_argument("--no-doc-order", dest="doc_order", action="store_false",
                   help="skip the document-order decode (every sentence of --gen-subset, ordinary and with "
                        "reused sentence states, for the baseline and transformer_ctxenc; skipped anyway when no variant "
                        "can reuse states)")
    p.add_argument("--profile-steps", action="store_true",
                   help="profile one more training update and one decoded batch of each child "
                        "(scripts/step_profile.py: GPU busy time, host time in operations, waits and between them)")
    p.add_argument("--optimizer", default="adam",
                   help="fairseq's --optimizer (default adam; any Adam-like optimizer that takes --adam-betas)")
    p.add_argument("--sdpa", metavar="POLICY",
                   help="the attention kernel policy of every child (FAIRSEQ_CTX_SDPA, "
                        "fairseq_ctx/modules/fused_attention.py): torch, cudnn-last, no-cudnn, flash, efficient, "
                        "cudnn, math (default: the environment's, else the plugin's default, no-cudnn)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--pieces", metavar="DIR",
                   help="write each child's result to its own JSON file in DIR as soon as it finishes (a run "
                        "killed later keeps them; --markdown-of DIR makes the tables)")
    p.add_argument("--deadline-s", type=float, default=0.0,
                   help="start no child after this many seconds, nor one that would end after them by the "
                        "longest child so far (0: no deadline), and kill one still running then; the children "
                        "not run or cut are listed")
    p.add_argument("--markdown-of", metavar="JSON",
                   help="print the Markdown table of a results JSON written by --json, or the tables of the "
                        "pieces in a --pieces directory or below it (one per call), and run nothing")
    # internal: one measurement in a child process
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--arch", help=argparse.SUPPRESS)
    p.add_argument("--flags", default="[]", help=argparse.SUPPRESS)
    p.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--no-flops", action="store_true", help=argparse.SUPPRESS)
    opts = p.parse_args()

    if opts.markdown_of:
        try:
            if os.path.isdir(opts.markdown_of):
                table = ""
                for settings, run_id, results in collect_pieces(opts.markdown_of):
                    # the policy each child applied (sdpa_policy), where --sdpa did not name one
                    policies = sorted({r["sdpa_policy"] for r in results.values() if r.get("sdpa_policy")})
                    policy = settings.get("sdpa") or "/".join(policies) or "torch"
                    table += (f"\nCall {run_id}: {settings['device']}, {settings['precision']}, size "
                              f"{settings['size']}, SDPA policy {policy}\n\n")
                    table += markdown_table({"settings": settings, "results": results}) if results else \
                        "(no baseline piece: no ratios)\n"
            else:
                with open(opts.markdown_of) as f:
                    doc = json.load(f)
                table = markdown_table(doc)
        except (OSError, ValueError, KeyError) as e:
            p.error(f"--markdown-of {opts.markdown_of}: not a results JSON or pieces directory of this script "
                    f"({e!r})")
        print(table, end="")
        return
    if opts.data is None:
        p.error("the data directory is required (unless --markdown-of)")
    if not os.path.isdir(opts.data):
        p.error(f"data directory not found: {opts.data}")
    if opts.child:
        opts.flags = json.loads(opts.flags)
        print("BENCHMARK_JSON " + json.dumps(measure(opts)), flush=True)
        return
    if opts.repeats < 1 or opts.train_updates < 1 or opts.decode_sentences < 1:
        p.error("--repeats, --train-updates and --decode-sentences must be at least 1")
    if opts.clock == "auto":
        opts.clock = "cpu" if opts.threads == 1 and opts.device == "cpu" else "wall"
    if opts.clock == "cpu" and (opts.threads != 1 or opts.device != "cpu"):
        p.error("--clock cpu: needs --threads 1 and --device cpu (CPU time adds up threads and does not see a GPU)")

    variants = variants_of(opts)
    if opts.doc_order and not any(reuses_sentence_states(arch) for _, arch, _ in variants):
        opts.doc_order = False  # the baseline's whole-subset decode would be compared with nothing
    if opts.sdpa:
        from fairseq_ctx.modules.fused_attention import POLICIES

        if opts.sdpa not in POLICIES:
            p.error(f"--sdpa {opts.sdpa}: not an SDPA policy (one of {', '.join(POLICIES)})")
    runs = {label: [] for label, _, _ in variants}
    run_id = new_run_id()
    settings = {k: v for k, v in vars(opts).items() if k not in ("child", "arch", "flags")}
    started, longest, not_run, failed = time.monotonic(), 0.0, [], []
    for round_ in range(opts.repeats):
        for label, arch, flags in variants:
            elapsed = time.monotonic() - started
            if opts.deadline_s and (not_run or (longest and elapsed + longest > opts.deadline_s)):
                not_run.append(f"{label} (round {round_ + 1})")
                continue
            print(f"[round {round_ + 1}/{opts.repeats}] {label} ...", file=sys.stderr, flush=True)
            t = time.monotonic()
            try:
                # a child that outgrows the longest so far is killed at the deadline: the call
                # then ends in its own time, with its JSON and tables, not at the tool's limit
                runs[label].append(run_child(opts, label, arch, flags,
                                             first=runs[label][0] if round_ and runs[label] else None,
                                             timeout=max(opts.deadline_s - elapsed, 0.0) if opts.deadline_s else None))
            except ChildCut as e:
                print(e, file=sys.stderr, flush=True)
                not_run.append(f"{label} (round {round_ + 1}, cut at the deadline)")
                if opts.pieces:  # its time is a lower bound for sizing the next call
                    write_piece(opts.pieces, run_id, round_, label, arch, flags, None, settings,
                                time.monotonic() - t, failed=str(e))
                continue
            except ChildFailed as e:
                # with pieces (a GPU call) one variant's crash must not cost the others their turn
                if not opts.pieces or label == "transformer":
                    sys.exit(str(e))
                print(e, file=sys.stderr, flush=True)
                failed.append(f"{label} (round {round_ + 1})")
                write_piece(opts.pieces, run_id, round_, label, arch, flags, None, settings,
                            time.monotonic() - t, failed=str(e)[-3000:])
                continue
            took = time.monotonic() - t
            longest = max(longest, took)
            if opts.pieces:
                write_piece(opts.pieces, run_id, round_, label, arch, flags, runs[label][-1], settings, took)
    if not_run:
        print(f"benchmark: stopped at the deadline ({opts.deadline_s:.0f} s); not run: {', '.join(not_run)}",
              file=sys.stderr)
    # every round the baseline ran; variants with all of those rounds
    rounds = len(runs["transformer"])
    runs = {label: rs[:rounds] for label, rs in runs.items() if rounds and len(rs) >= rounds}
    if not runs:
        sys.exit("benchmark: the deadline left no time for the baseline")
    results = aggregate(runs)

    header = f"{'variant':<28}" + "".join(f"{name:>22}" for _, name in METRICS) \
        + "".join(f"{name:>26}" for name in ("train ratio / bound", "dec ratio / bound"))
    print(f"\nsize={opts.size} device={opts.device} precision={opts.precision} "
          f"max_tokens={opts.max_tokens} beam={opts.beam} repeats={opts.repeats} clock={opts.clock} "
          "(value, ratio to transformer)")
    print(header)
    print("-" * len(header))
    for label, res in results.items():
        cells = []
        for key, _ in METRICS:
            value = f"{res[key] / 1e6:.2f}M" if key in ("params", "train_flops_tok", "decode_flops_tok") \
                else f"{res[key]:.1f}"
            cells.append(f"{value + ' (' + format(res[key + '_ratio'], '.2f') + 'x)':>22}")
        for ratio_key, _, bound_key, _ in BOUNDS:
            cells.append(f"{format(res[ratio_key], '.2f') + 'x / ' + format(res[bound_key], '.2f') + 'x':>26}")
        print(f"{label:<28}" + "".join(cells))
    for label, res in results.items():
        if "doc_order_decode_ratio" in res:
            print(f"{label}: every {opts.gen_subset} sentence in fairseq-generate's order, against the baseline's "
                  f"decode of it: ordinary {res['full_decode_ratio']:.2f}x / {res['full_decode_bound']:.2f}x, "
                  f"reused sentence states {res['doc_order_decode_ratio']:.2f}x / {res['doc_order_decode_bound']:.2f}x "
                  f"(ratio / bound); reused / ordinary in the same process {res['doc_order_speedup']:.3f}; "
                  f"{res['doc_order_hits']} states reused, {res['doc_order_misses']} encoded; "
                  f"{res['doc_order_differing']} hypotheses differ, the others' scores within "
                  f"{res['doc_order_max_score_diff']:.1e}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"settings": settings, "results": results, "runs": runs, "not_run": not_run,
                       "failed": failed}, f, indent=2)
        print(f"\nwrote {opts.json}")
    print("\n" + markdown_table({"settings": vars(opts), "results": results}), end="")
    if failed:
        sys.exit(f"benchmark: failed (their pieces hold the error): {', '.join(failed)}")


if __name__ == "__main__":
    main()
