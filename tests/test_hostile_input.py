"""Hostile input: every case ends in one line ``fairseq_ctx: error:
...`` naming the flag, file or sentence, a non-zero exit status, no stack
trace, and no output taken as valid; or, where fairseq's own behaviour is
the right one (an empty line with ``--task translation``, skipping
over-long sentences when asked to), that behaviour, pinned.

One tiny dataset and two checkpoints trained for two updates serve every
test. Each case runs the real command-line tool once in a fresh process (the
style of fairseq's ``tests/test_binaries.py``: exit status, stderr, the
excepthook's one line); its variants call the same tools' ``cli_main`` in
this process (as fairseq's own tests call ``train.main``), which saves the
~4 s of CPU an interpreter start with fairseq costs, and check the error
that the excepthook would print (:func:`fairseq_ctx.errors.user_error`).
"""
import importlib
import io
import re
import shutil
import sys
from unittest import mock

import pytest
import torch

import fairseq_ctx  # noqa: F401  (registers the archs and the task, installs the checks)
from fairseq_ctx.checkpoint_checks import explain_mismatch
from fairseq_ctx.errors import CheckpointMismatchError, ConfigError, user_error
from tests.utils import (
    TINY_MODEL_FLAGS,
    USER_DIR,
    build_model,
    generate,
    make_parallel_data,
    padded_batch,
    parse_generate,
    preprocess,
    tiny_model,
    toy_dictionary,
    train,
)

torch.set_num_threads(1)

TASK = ["--task", "document_translation"]
SKIP = ["--skip-invalid-size-inputs-valid-test"]
LIMIT = 8  # source/target positions of the ctxenc and 2-to-2 checkpoints; test sentences have up to 12 words
TWO_TO_TWO = ["--concat-context", "--target-context"]


def one_line_error(proc, *needles):
    """The run failed with our one-line error containing every needle, and no traceback."""
    assert proc.returncode != 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fairseq_ctx: error: "), proc.stderr[-3000:]
    for needle in needles:
        assert str(needle) in last, f"{needle!r} not in: {last}"
    return last


def cli_in_process(module, args, stdin=""):
    """Run ``fairseq_cli.<module>.cli_main`` here with ``args`` as its command
    line and ``stdin`` as its input; return the exception it ended with, or None."""
    main = importlib.import_module(f"fairseq_cli.{module}").cli_main
    with mock.patch.object(sys, "argv", [module] + [str(a) for a in args]), \
            mock.patch.object(sys, "stdin", io.StringIO(stdin)):
        try:
            main()
        except Exception as e:  # noqa: BLE001  (the test inspects it)
            return e
    return None


def user_line(exc, *needles):
    """What the excepthook prints for ``exc`` is our one line with every needle."""
    ours = user_error(exc)
    assert ours is not None, f"not a user error: {exc!r}"
    for needle in needles:
        assert str(needle) in str(ours), f"{needle!r} not in: {ours}"
    return str(ours)


def hyp_ids(stdout):
    return sorted(int(line.split("\t")[0][2:]) for line in stdout.splitlines() if line.startswith("H-"))


# ---------------------------------------------------------------------------
# fixtures: one tiny dataset, a ctxsan checkpoint (--task translation) and a
# ctxenc checkpoint (--task document_translation, 8 learned positions)
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    raw = make_parallel_data(root / "raw", num_train=64, num_valid=8, num_test=8)
    return raw, preprocess(raw, root / "bin")


@pytest.fixture(scope="module")
def other_dicts(data, tmp_path_factory):
    """The same data with 6 more symbols in both dictionaries (as if binarized
    with another vocabulary)."""
    _, bin_dir = data
    other = tmp_path_factory.mktemp("other") / "bin"
    shutil.copytree(bin_dir, other)
    for side in ("src", "tgt"):
        with open(other / f"dict.{side}.txt", "a") as f:
            f.writelines(f"extra{i} 1\n" for i in range(6))
    return other


@pytest.fixture(scope="module")
def ctxsan(data, tmp_path_factory):
    save = tmp_path_factory.mktemp("ctxsan")
    train(data[1], save, arch="transformer_ctxsan", max_update=2)
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def two_to_two(data, tmp_path_factory):
    """The 2-to-2 concatenation (context glued to source and target) with
    ctxenc's positions."""
    save = tmp_path_factory.mktemp("two_to_two")
    pos = ["--max-source-positions", LIMIT, "--max-target-positions", LIMIT]
    train(data[1], save, arch="transformer", task_flags=[*TASK, *TWO_TO_TWO], max_update=2,
          extra=pos + ["--encoder-learned-pos", "--decoder-learned-pos"] + SKIP)
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def ctxenc(data, tmp_path_factory):
    save = tmp_path_factory.mktemp("ctxenc")
    pos = ["--max-source-positions", LIMIT, "--max-target-positions", LIMIT]
    # learned positions: a context longer than the limit would index past the table
    train(data[1], save, arch="transformer_ctxenc", task_flags=TASK, max_update=2,
          extra=pos + ["--encoder-learned-pos", "--decoder-learned-pos"] + SKIP)
    return save / "checkpoint_last.pt"


# ---------------------------------------------------------------------------
# 1. contradictory or out-of-range architecture flags
# ---------------------------------------------------------------------------

BAD_FLAGS = [
    ("transformer_ctxsan", ["--ctxsan-context", "bogus"], "--ctxsan-context"),
    ("transformer_ctxsan", ["--ctxsan-side", "sideways"], "--ctxsan-side"),
    ("transformer_ctxsan", ["--ctxsan-side", "decoder", "--cross-self-attention"], "--cross-self-attention"),
    ("transformer_ctxsan", ["--ctxsan-side", "decoder", "--decoder-layerdrop", "0.1"], "--decoder-layerdrop"),
    ("transformer_ctxsan", ["--decoder-attention-heads", "3"], "--decoder-attention-heads 3"),
    ("transformer_dc", ["--dc-kernel-size", "0"], "--dc-kernel-size"),
    ("transformer_dc", ["--dc-encoder-layers", "9"], "--dc-encoder-layers: layer 9 is outside the stack of 2"),
    ("transformer_dc", ["--dc-decoder-layers", "2-1"], "--dc-decoder-layers: empty range"),
    ("transformer_dc", ["--dc-decoder-layers", "1", "--cross-self-attention"], "--cross-self-attention"),
    ("transformer_dc", ["--encoder-attention-heads", "3"], "--encoder-attention-heads 3"),
    ("transformer_gret", ["--gret-capsules", "0"], "--gret-capsules"),
    ("transformer_gret", ["--gret-routing-iters", "0"], "--gret-routing-iters"),
    ("transformer_gret", ["--encoder-layerdrop", "0.2"], "--encoder-layerdrop"),
    ("transformer_ctxenc", ["--encoder-layerdrop", "0.2"], "--encoder-layerdrop"),
    ("transformer_ctxenc", ["--encoder-attention-heads", "5"], "--encoder-attention-heads 5"),
    # fairseq's quantization noise would reach fairseq's layers only
    ("transformer_ctxsan", ["--quant-noise-pq", "0.1"], "--quant-noise-pq is not supported by transformer_ctxsan"),
    ("transformer_dc", ["--quant-noise-scalar", "0.1"], "--quant-noise-scalar is not supported by transformer_dc"),
    ("transformer_gret", ["--quant-noise-pq", "0.1"], "--quant-noise-pq is not supported by transformer_gret"),
    # fairseq's xFormers attention would reach fairseq's attention only (checked before xFormers is imported)
    ("transformer_ctxsan", ["--encoder-xformers-att-config", "{'name': 'linformer'}"],
     "--encoder-xformers-att-config is not supported by transformer_ctxsan: its context-aware self-attention"),
    ("transformer_ctxsan", ["--ctxsan-side", "decoder", "--decoder-xformers-att-config", "{'name': 'linformer'}"],
     "--decoder-xformers-att-config is not supported by transformer_ctxsan"),
    ("transformer_dc", ["--dc-decoder-layers", "1", "--decoder-xformers-att-config", "{'name': 'linformer'}"],
     "--decoder-xformers-att-config is not supported by transformer_dc: the Dual Contextual modules of its decoder"),
    ("transformer_ctxenc", ["--encoder-xformers-att-config", "{'name': 'linformer'}"],
     "--encoder-xformers-att-config is not supported by transformer_ctxenc"),
]


@pytest.mark.unit
@pytest.mark.parametrize("arch,flags,needle", BAD_FLAGS, ids=[f"{a}{' '.join(f)}" for a, f, _ in BAD_FLAGS])
def test_bad_flags_are_user_errors(arch, flags, needle):
    """In-process: every bad value stops at model build time with our error
    (a ValueError too), naming the flag."""
    with pytest.raises(ConfigError) as info:
        build_model(arch, TINY_MODEL_FLAGS + flags)
    assert needle in str(info.value)


@pytest.mark.unit
def test_one_encoder_layer_is_fine_for_ctxenc_and_gret():
    """Not a contradiction: ctxenc then shares no layer with its context
    encoder, whose output is its own last layer over the context's
    embeddings; GRET routes its one layer: the global state is one GRU step
    (from s^0 = 0) over the capsules pooled from that layer's output."""
    one = ["--encoder-layers", "1"]
    src = padded_batch([6, 4, 5], seed=1)
    ctx = padded_batch([3, 5, 2], seed=2)
    src_mask, ctx_mask = src.eq(1), ctx.eq(1)

    enc = tiny_model("ctxenc", one).encoder
    assert len(enc.layers) == 1
    with torch.no_grad():
        out = enc(src, ctx_tokens=ctx, return_context=True)["ctx_out"][0]  # T x B x C
        x = enc.forward_embedding(ctx)[0] * (~ctx_mask).unsqueeze(-1)
        want = enc.ctx_layer(x.transpose(0, 1), encoder_padding_mask=ctx_mask)
    real = (~ctx_mask).t().unsqueeze(-1)
    torch.testing.assert_close(out * real, want * real, atol=1e-5, rtol=1e-5)

    enc = tiny_model("gret", one).encoder
    glob = enc.gret_global
    assert len(glob.routing) == len(glob.pooling) == 1
    with torch.no_grad():
        out = enc(src, torch.tensor([6, 4, 5]))
        states = out["encoder_out"][0].transpose(0, 1)  # B x T x C, the one layer's output
        pooled = glob.pooling[0](glob.routing[0](states, src_mask))
        want = glob.gru(pooled, torch.zeros_like(pooled))
    torch.testing.assert_close(out["gret_global"][0], want, atol=1e-5, rtol=1e-5)


def test_bad_flag_through_fairseq_train(data, tmp_path):
    """The same errors from the command line: one line (the in-process test
    above covers the other flags; they take the same path)."""
    proc = train(data[1], tmp_path / "ck", arch="transformer_dc", extra=["--dc-encoder-layers", "9"],
                 max_update=1, check=False)
    one_line_error(proc, "--dc-encoder-layers: layer 9 is outside the stack of 2 layers")
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


# ---------------------------------------------------------------------------
# 2. a checkpoint of another architecture
# ---------------------------------------------------------------------------

def test_restore_checkpoint_of_another_architecture(data, ctxsan, tmp_path):
    """fairseq says "Cannot load model parameters ... ensure that the
    architectures match" over two stack traces; we say which and how."""
    proc = train(data[1], tmp_path / "ck", arch="transformer_dc", extra=["--restore-file", ctxsan],
                 max_update=3, check=False)
    last = one_line_error(proc, f"checkpoint {ctxsan} holds a transformer_ctxsan model that does not fit "
                                "this transformer_dc model", "--arch")
    assert "self_attn" in last
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


def test_gret_warm_start_from_another_architecture(data, ctxsan, tmp_path):
    """Used to load the matching half (FFNs, embeddings) and silently start
    the self-attention fresh. (fairseq-train in this process: it stops while
    building the model.)"""
    exc = cli_in_process("train", [data[1], "--user-dir", USER_DIR, "--arch", "transformer_gret", *TINY_MODEL_FLAGS,
                                   "--gret-warm-start", ctxsan, "--save-dir", tmp_path / "ck", "--cpu",
                                   "--max-tokens", 500, "--max-update", 1, "--optimizer", "adam", "--lr", 0.001])
    user_line(exc, f"--gret-warm-start {ctxsan}: the checkpoint (a transformer_ctxsan model) lacks",
              "self_attn", "plain --arch transformer checkpoint")
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


# ---------------------------------------------------------------------------
# 3. dictionaries that do not match the checkpoint
# ---------------------------------------------------------------------------

def test_generate_with_other_dictionaries(other_dicts, ctxsan):
    proc = generate(other_dicts, ctxsan, check=False)[2]
    one_line_error(proc, f"checkpoint {ctxsan} does not fit the dictionaries",
                   "56 source / 56 target symbols", f"{other_dicts}/dict.src.txt and {other_dicts}/dict.tgt.txt "
                   "give 62 / 62")
    assert "H-" not in proc.stdout


def test_interactive_with_other_dictionaries_document_task(other_dicts, ctxenc, capsys):
    exc = cli_in_process("interactive", [other_dicts, "--user-dir", USER_DIR, "--path", ctxenc, "--cpu", *TASK],
                         stdin="w1 w2\n")
    user_line(exc, f"checkpoint {ctxenc} does not fit", "57 source / 57 target", f"{other_dicts}/dict.src.txt",
              "give 63 / 63", "the <sep> that --task document_translation adds")
    assert "H-" not in capsys.readouterr().out


def test_validate_with_other_dictionaries(other_dicts, ctxsan, capsys):
    exc = cli_in_process("validate", [other_dicts, "--user-dir", USER_DIR, "--path", ctxsan, "--cpu",
                                      "--max-tokens", 500, "--task", "translation"])
    user_line(exc, f"checkpoint {ctxsan} does not fit", "56 source / 56 target", f"{other_dicts}/dict.src.txt",
              "give 62 / 62")
    assert "| loss" not in capsys.readouterr().out


def test_decoding_with_other_document_flags_than_training(data, ctxenc, capsys):
    """A flag that changes the input format (here --concat-context, which
    the ctxenc checkpoint was trained without; the other way round a
    --concat-context model would translate as a sentence-level one) stops
    generate and interactive in one line; another --context-size is said
    in a warning, and decoded."""
    said = ("--concat-context: the checkpoint was trained with no --concat-context, this command gives "
            "--concat-context; decode with the document-task flags it was trained with")
    proc = generate(data[1], ctxenc, task_flags=[*TASK, "--concat-context"], extra=SKIP, check=False)[2]
    one_line_error(proc, said)
    assert "H-" not in proc.stdout
    exc = cli_in_process("interactive", [data[1], "--user-dir", USER_DIR, "--path", ctxenc, "--cpu", *TASK,
                                         "--concat-context"], stdin="w1 w2\n")
    user_line(exc, said)
    assert "H-" not in capsys.readouterr().out
    _, _, proc = generate(data[1], ctxenc, task_flags=[*TASK, "--context-size", "2"], extra=SKIP)  # exit 0
    assert ("--context-size: the checkpoint was trained with --context-size 1, this command gives --context-size 2 "
            "(the context it is evaluated with differs from its training)") in proc.stderr


def test_other_document_flags_wherever_the_checkpoint_is_loaded(data, ctxenc, tmp_path, capsys, monkeypatch):
    """The flags a checkpoint was trained with are recorded in its task
    state, which arg_overrides do not reach: fairseq-validate's flags and
    the hubs' keyword arguments (written into the checkpoint's configuration
    as it loads) are checked too, and --model-overrides is compared with
    what was trained, not with itself. A checkpoint saved without the
    record is checked against its configuration as loaded."""
    from fairseq_ctx import hub
    from fairseq_ctx.tasks import document_translation

    said = ("--concat-context: the checkpoint was trained with no --concat-context, this command gives "
            "--concat-context; decode with the document-task flags it was trained with")
    recorded = torch.load(ctxenc, weights_only=True)["task_state"]["document_flags"]
    assert recorded == {"concat_context": False, "target_context": False, "context_separator": "<sep>",
                        "context_size": 1, "context_mode": "previous"}
    exc = cli_in_process("validate", [data[1], "--user-dir", USER_DIR, "--path", ctxenc, "--cpu",
                                      "--max-tokens", 500, *TASK, "--concat-context", *SKIP])
    user_line(exc, said)
    assert "| loss" not in capsys.readouterr().out
    with pytest.raises(ConfigError, match=said):
        hub.from_pretrained(str(ctxenc.parent), checkpoint_file=ctxenc.name, data_name_or_path=str(data[1]),
                            concat_context=True)
    size = ("--context-size: the checkpoint was trained with --context-size 1, this command gives --context-size 2 "
            "(the context it is evaluated with differs from its training)")
    warned = []
    monkeypatch.setattr(document_translation.logger, "warning", warned.append)
    hub.from_pretrained(str(ctxenc.parent), checkpoint_file=ctxenc.name, data_name_or_path=str(data[1]),
                        context_size=2)
    assert warned == [size]
    # the override changes what the checkpoint's configuration says, not what it was trained with
    overrides = ["--model-overrides", "{'context_size': 2}"]
    _, _, proc = generate(data[1], ctxenc, task_flags=[*TASK, "--context-size", "2"], extra=[*SKIP, *overrides])
    assert size in proc.stderr
    _, _, proc = generate(data[1], ctxenc, task_flags=TASK, extra=[*SKIP, "--model-overrides",
                                                                   "{'concat_context': True}"])
    assert "trained with" not in proc.stderr and "H-" in proc.stdout
    # saved without the record: its configuration as loaded
    state = torch.load(ctxenc, weights_only=True)
    state["task_state"].pop("document_flags")
    unrecorded = tmp_path / "unrecorded.pt"
    torch.save(state, unrecorded)
    one_line_error(generate(data[1], unrecorded, task_flags=[*TASK, "--concat-context"], extra=SKIP,
                            check=False)[2], said)


def test_a_fine_tuned_checkpoint_records_its_own_flags(data):
    """The task state a checkpoint saves holds the flags of the task that
    saved it, even after that task loaded another checkpoint's (fine-tuning
    a sentence-level model into a --concat-context one records
    --concat-context)."""
    from fairseq import options, tasks

    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(data[1]), "--user-dir", USER_DIR, "--arch", "transformer", *TASK, "--concat-context",
        "--context-size", "2"])
    task = tasks.setup_task(args)
    task.load_state_dict({"document_flags": {"concat_context": False, "target_context": False,
                                             "context_separator": "<sep>", "context_size": 1,
                                             "context_mode": "previous"}})
    assert task.state_dict()["document_flags"] == {"concat_context": True, "target_context": False,
                                                   "context_separator": "<sep>", "context_size": 2,
                                                   "context_mode": "previous"}


def test_checkpoint_of_another_task(data, ctxsan):
    """Trained with --task translation, decoded with document_translation
    (which adds <sep>): one symbol apart, and the message says why. In-process,
    through the same loader fairseq-generate uses."""
    from fairseq import checkpoint_utils, options, tasks

    parser = options.get_generation_parser()
    args = options.parse_args_and_arch(parser, [str(data[1]), "--user-dir", USER_DIR, "--path", str(ctxsan), *TASK])
    task = tasks.setup_task(args)
    with pytest.raises(CheckpointMismatchError) as info:
        checkpoint_utils.load_model_ensemble([str(ctxsan)], task=task)
    msg = str(info.value)
    assert "56 source / 56 target" in msg and "give 57 / 57" in msg and f"{data[1]}/dict.src.txt" in msg
    assert "it was trained with --task translation, this run uses --task document_translation" in msg


@pytest.mark.unit
def test_plain_transformer_checkpoint_of_other_dictionaries():
    """The check sits in fairseq's BaseFairseqModel.load_state_dict, so plain
    --arch transformer (e.g. the concatenation baseline) gets it too."""
    small = build_model("transformer", TINY_MODEL_FLAGS, dictionary=toy_dictionary(20))
    big = build_model("transformer", TINY_MODEL_FLAGS, dictionary=toy_dictionary(30))
    with pytest.raises(CheckpointMismatchError, match=r"trained with 24 source / 24 target symbols, but .* 34 / 34"):
        big.load_state_dict(small.state_dict())
    assert explain_mismatch(small, small.state_dict()) is None
    # fairseq's trainer wraps any load failure into a bare Exception: ours is what the user sees
    with pytest.raises(Exception) as info:
        try:
            big.load_state_dict(small.state_dict())
        except Exception:
            raise Exception("Cannot load model parameters from checkpoint x.pt")
    assert type(info.value) is Exception and isinstance(user_error(info.value), CheckpointMismatchError)
    assert user_error(ValueError("a bug")) is None


# ---------------------------------------------------------------------------
# 4. an empty input line with --task translation
# ---------------------------------------------------------------------------

def test_empty_line_with_translation_task_is_translated_like_fairseq(data, ctxsan, capsys):
    """fairseq translates every input line, an empty one as an empty source,
    so there is one H- line per input line; our architectures do the same
    (with --task document_translation an empty line starts a new document
    instead and gets no H- line: tests/test_document_task.py)."""
    exc = cli_in_process("interactive", [data[1], "--user-dir", USER_DIR, "--path", ctxsan, "--cpu",
                                         "--beam", 2, "--max-len-b", 5], stdin="w1 w2\n\nw3 w4\n")
    assert exc is None, exc
    out = capsys.readouterr().out
    assert hyp_ids(out) == [0, 1, 2]
    assert "S-1\t\n" in out


@pytest.mark.unit
@pytest.mark.parametrize("arch", ["transformer_dc_full", "transformer_gret", "transformer_ctxenc"])
def test_every_architecture_decodes_an_empty_source(arch):
    from fairseq.sequence_generator import SequenceGenerator

    d = toy_dictionary()
    model = build_model(arch, TINY_MODEL_FLAGS, dictionary=d).eval()
    gen = SequenceGenerator([model], d, beam_size=2, max_len_b=5)
    sample = {"net_input": {"src_tokens": torch.tensor([[d.eos()]]), "src_lengths": torch.tensor([1])}}
    hyps = gen.forward(sample)
    assert len(hyps) == 1 and len(hyps[0]) == 2 and all(torch.isfinite(h["score"]) for h in hyps[0])


# ---------------------------------------------------------------------------
# 5. sentences longer than the model's positions
# ---------------------------------------------------------------------------

def _short_ids(raw):
    return [i for i, line in enumerate((raw / "test.src").read_text().splitlines()) if len(line.split()) < LIMIT]


def test_too_long_sentence_is_an_error_naming_it(data, ctxenc):
    raw, bin_dir = data
    assert len(_short_ids(raw)) < 8  # some test sentences are too long
    proc = generate(bin_dir, ctxenc, task_flags=TASK, check=False)[2]
    one_line_error(proc, "of 'test' (line ", f"than the ({LIMIT}, {LIMIT}) the model takes",
                   "--skip-invalid-size-inputs-valid-test")
    assert "H-" not in proc.stdout


def _generate_in_process(bin_dir, ckpt, flags, capsys):
    exc = cli_in_process("generate", [bin_dir, "--user-dir", USER_DIR, "--path", ckpt, "--gen-subset", "test",
                                      "--beam", 2, "--max-len-b", 5, "--batch-size", 8, "--cpu",
                                      "--required-batch-size-multiple", 1, *flags])
    assert exc is None, exc
    hyps, srcs = parse_generate(capsys.readouterr().out)
    return hyps, srcs


def test_too_long_sentences_skipped_and_long_context_cut(data, ctxenc, capsys, caplog):
    """With the skip flag: fairseq's behaviour (skipped, with its warning); the
    ctxenc context, longer than the limit for some sentences, is cut to it
    (its oldest tokens) with a warning: the checkpoint has learned positions,
    so an uncut context would index past its position table."""
    raw, bin_dir = data
    hyps, srcs = _generate_in_process(bin_dir, ctxenc, TASK + SKIP, capsys)
    assert sorted(hyps) == sorted(srcs) == _short_ids(raw)
    assert "samples have invalid sizes and will be skipped" in caplog.text
    assert f"have a context longer than the model's source limit of {LIMIT} tokens" in caplog.text


def test_concat_context_is_cut_to_the_limit(data, two_to_two, capsys, caplog):
    """Glued to the source and to the target (2-to-2), the context is cut to
    the model's limits, oldest tokens first, each with a warning."""
    raw, bin_dir = data
    hyps, srcs = _generate_in_process(bin_dir, two_to_two, TASK + SKIP + TWO_TO_TWO, capsys)
    assert sorted(hyps) == sorted(srcs) == _short_ids(raw)
    assert all(len(s.split()) < LIMIT for s in srcs.values())  # context + <sep> + source, without EOS
    assert any("<sep>" in s for s in srcs.values())
    assert "counting the sentence itself with --concat-context" in caplog.text
    assert (f"have a target context longer than the model's target limit of {LIMIT} tokens "
            "(--max-target-positions, counting the sentence itself with --target-context)") in caplog.text


def test_interactive_cuts_a_separate_context_as_generate_does(data, ctxenc, capsys):
    """fairseq-interactive carries a ctxenc line's context glued to it (its
    batches keep only the source) and splits it off again for the model; the
    context is cut to the model's limit on its own, as fairseq-generate cuts
    it, not counting the line it travels with. So near the limit both give
    the same translations: the test set's documents, an empty line between
    them, with the same beam and length limits, too-long lines skipped by
    both (still the context of the line after them)."""
    raw, bin_dir = data
    lines = (raw / "test.src").read_text().splitlines()
    docids = (raw / "test.docids").read_text().splitlines()
    # lines whose previous line is a whole context on its own, and too long with the line
    sizes = [len(line.split()) + 1 for line in lines]
    near = [i for i in range(1, len(lines)) if docids[i] == docids[i - 1] and sizes[i] < LIMIT and
            sizes[i - 1] <= LIMIT < sizes[i] + sizes[i - 1]]
    assert near
    expected, _ = _generate_in_process(bin_dir, ctxenc, TASK + SKIP, capsys)
    stream, ids = [], []
    for i, line in enumerate(lines):
        if i and docids[i] != docids[i - 1]:
            stream.append("")
        ids.append(len(stream))
        stream.append(line)
    exc = cli_in_process("interactive", [bin_dir, "--user-dir", USER_DIR, "--path", ctxenc, "--cpu", "--beam", 2,
                                         "--max-len-b", 5, "--buffer-size", 3, *TASK, *SKIP],
                         stdin="\n".join(stream) + "\n")
    assert exc is None, exc
    out = capsys.readouterr().out
    hyps = {int(i): (h, float(score)) for i, score, h in re.findall(r"^H-(\d+)\t(\S+)\t(.*)$", out, re.M)}
    shown = dict((int(i), s) for i, s in re.findall(r"^S-(\d+)\t(.*)$", out, re.M))
    for i in near:  # the whole previous line, glued for the journey
        assert shown[ids[i]] == f"{lines[i - 1]} <sep> {lines[i]}"
    assert sorted(hyps) == [ids[i] for i in sorted(expected)]
    for i, (text, score) in expected.items():
        assert hyps[ids[i]][0] == text and hyps[ids[i]][1] == pytest.approx(score, abs=1e-4), i


def test_too_long_interactive_line_is_an_error(data, ctxenc, capsys):
    _, bin_dir = data
    long_line = " ".join(f"w{i}" for i in range(12))
    exc = cli_in_process("interactive", [bin_dir, "--user-dir", USER_DIR, "--path", ctxenc, "--cpu",
                                         "--buffer-size", 4, *TASK], stdin=f"w1 w2\n{long_line}\n")
    user_line(exc, "input line 'w0 w1 w2", f"(13, 0) tokens, longer than the ({LIMIT}, {LIMIT})",
              "--skip-invalid-size-inputs-valid-test")
    assert "H-" not in capsys.readouterr().out


# ---------------------------------------------------------------------------
# 6. a docids file that does not match the data
# ---------------------------------------------------------------------------

def test_docids_line_count_through_generate(data, ctxenc, tmp_path):
    _, bin_dir = data
    broken = tmp_path / "bin"
    shutil.copytree(bin_dir, broken)
    docids = broken / "test.src-tgt.docids"
    docids.write_text("".join(docids.read_text().splitlines(keepends=True)[:-1]))
    proc = generate(broken, ctxenc, task_flags=TASK, extra=SKIP, check=False)[2]
    one_line_error(proc, f"{docids} has 7 lines but the split has 8 sentences")
    assert "H-" not in proc.stdout

