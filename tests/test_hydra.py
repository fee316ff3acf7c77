"""fairseq-hydra-train: the architectures' dataclass configs and the recipes
as hydra YAML (docs/hydra.md).

* ``configs/hydra/`` is what ``fairseq_ctx.tables.hydra_configs`` generates
  from ``configs/**/*.args`` (the source of truth), one file per training
  config, and fairseq accepts every file (its sections merged with their
  dataclasses, as fairseq-hydra-train does).
* Parity, for each architecture: the config that fairseq-hydra-train
  composes from a recipe equals fairseq-train's config of the same
  ``.args`` file section by section, and builds the same model (same
  architecture settings, parameter names, shapes and, with the same seed,
  values).
* The dataclass is the one source of the flags (names, help, choices) and of
  hydra's validation; an architecture named in ``model._name`` gets its
  preset; checkpoints whose model arguments are the legacy namespace load.
* End to end (one subprocess): a DC recipe trains two updates through
  ``python3 -m fairseq_cli.hydra_train`` and gives the same weights as
  ``fairseq-train`` with the equivalent flags.
"""
import argparse
import os
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

import fairseq_ctx
from fairseq_ctx.architectures import RECIPES, TINY_FLAGS, VARIANTS, grid_archs, option_grid
from fairseq_ctx.errors import ConfigError
from fairseq_ctx.tables import all_tables, hydra_configs
from fairseq_ctx.tables.config import read_args
from tests.utils import REPO, USER_DIR, run_cli, toy_dictionary

fairseq_ctx.register()

from fairseq import checkpoint_utils, options, tasks, utils  # noqa: E402
from fairseq.dataclass.configs import FairseqConfig  # noqa: E402
from fairseq.dataclass.initialize import add_defaults, hydra_init  # noqa: E402
from fairseq.dataclass.utils import convert_namespace_to_omegaconf, merge_with_parent  # noqa: E402
from fairseq.models import ARCH_MODEL_REGISTRY, MODEL_DATACLASS_REGISTRY, MODEL_REGISTRY  # noqa: E402

torch.set_num_threads(1)

CONFIGS = REPO / "configs"
HYDRA_DIR = CONFIGS / "hydra"
# one recipe per architecture (the argument file; its YAML is configs/hydra/<name>.yaml):
# fairseq_ctx.architectures.RECIPES
PARITY = dict(RECIPES)
# sections that only fairseq-generate reads (fairseq-train's parser fills scoring: bleu)
NOT_TRAINING = {"scoring"}


def yaml_name(args_file: str) -> str:
    return hydra_configs.config_name(Path(args_file))


def tiny_overrides():
    """TINY_FLAGS as hydra overrides (``++``: set whether or not the recipe has the key)."""
    pairs = zip(TINY_FLAGS[::2], TINY_FLAGS[1::2])
    return [f"++model.{flag[2:].replace('-', '_')}={value}" for flag, value in pairs]


def hydra_config(name, overrides):
    """The config fairseq-hydra-train trains with: hydra's composition of
    ``configs/hydra/<name>.yaml`` (fairseq_cli.hydra_train's schema and
    version), then ``_hydra_main``'s and ``fairseq_cli.train.main``'s steps
    up to building the task and model."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    hydra_init(name)
    try:
        with initialize_config_dir(config_dir=str(HYDRA_DIR), version_base="1.1"):
            cfg = compose(name, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()
    add_defaults(cfg)
    cfg = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    OmegaConf.set_struct(cfg, True)
    utils.import_user_module(cfg.common)
    add_defaults(cfg)
    return cfg


def train_config(argv):
    """fairseq-train's config of a command line."""
    return convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), argv))


def build(cfg):
    task = tasks.setup_task(cfg.task)
    torch.manual_seed(7)
    return task.build_model(cfg.model)


def section(cfg, name):
    value = cfg.get(name)
    return OmegaConf.to_container(value, resolve=True, enum_to_str=True) if OmegaConf.is_config(value) else value


# ---------------------------------------------------------------------------
# the generated configs


@pytest.mark.slow
def test_generated_configs_are_up_to_date():
    problems = hydra_configs.stale(CONFIGS)
    assert not problems, "\n".join(problems) + "\nrun: python3 -m fairseq_ctx.tables.hydra_configs"
    for table in all_tables():
        for row in table.rows:
            if row.train:
                assert (HYDRA_DIR / f"{yaml_name(row.train)}.yaml").is_file(), (table.name, row.label)
    assert {p.stem for p in (HYDRA_DIR / "data").glob("*.yaml")} == {
        p.stem for p in hydra_configs.data_configs(CONFIGS)}


@pytest.mark.slow
def test_every_recipe_is_accepted_by_fairseq():
    """Each section merged with its dataclass, as fairseq-hydra-train does
    (add_defaults): unknown keys and wrong types would raise here."""
    schema = OmegaConf.structured(FairseqConfig)
    recipes = sorted(HYDRA_DIR.glob("*.yaml"))
    assert len(recipes) == len(hydra_configs.training_configs(CONFIGS)) > 40
    for path in recipes + sorted((HYDRA_DIR / "data").glob("*.yaml")):
        raw = OmegaConf.load(path)
        body = {k: v for k, v in raw.items() if k not in ("defaults", "hydra")}
        cfg = OmegaConf.merge(schema, body)
        add_defaults(cfg)
        if path.parent == HYDRA_DIR:
            assert cfg.model._name in ARCH_MODEL_REGISTRY, path.name
            assert OmegaConf.is_missing(raw.task, "data"), path.name  # given on the command line
            assert raw.hydra.job.chdir is False and raw.defaults == ["_self_", {"data": None}]


# ---------------------------------------------------------------------------
# parity with fairseq-train


@pytest.mark.parametrize("arch", list(PARITY))
def test_same_config_and_model_as_fairseq_train(arch, doc_corpus):
    args_file = PARITY[arch]
    data = str(doc_corpus[1])
    hydra = hydra_config(yaml_name(args_file), [f"task.data={data}", f"common.user_dir={USER_DIR}",
                                                *tiny_overrides()])
    train = train_config([data, *read_args(CONFIGS / args_file), *TINY_FLAGS, "--user-dir", USER_DIR])
    assert hydra.model._name == train.model._name and ARCH_MODEL_REGISTRY[hydra.model._name] is MODEL_REGISTRY[arch]
    for name in FairseqConfig.__dataclass_fields__:
        if name not in ("_name", "model") and name not in NOT_TRAINING:
            assert section(hydra, name) == section(train, name), name

    from_hydra, from_train = build(hydra), build(train)
    assert type(from_hydra) is type(from_train)
    fields = MODEL_DATACLASS_REGISTRY[arch].__dataclass_fields__
    settings = [{k: getattr(m.args, k, None) for k in fields if k != "_name"} for m in (from_hydra, from_train)]
    assert settings[0] == settings[1]
    assert settings[0]["encoder_embed_dim"] == 16  # the override reached the model
    a, b = from_hydra.state_dict(), from_train.state_dict()
    assert list(a) == list(b)
    for key in a:
        assert a[key].shape == b[key].shape and torch.equal(a[key], b[key]), key


# ---------------------------------------------------------------------------
# the dataclasses


@pytest.mark.unit
@pytest.mark.parametrize("arch", grid_archs())
def test_the_dataclass_is_the_source_of_the_flags(arch):
    dc = MODEL_DATACLASS_REGISTRY[arch]
    parser = argparse.ArgumentParser(argument_default=argparse.SUPPRESS)
    MODEL_REGISTRY[arch].add_args(parser)
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    fields = {k: f for k, f in dc.__dataclass_fields__.items() if k != "_name"}
    assert set(actions) == set(fields)
    own = {k: f for k, f in fields.items() if k.startswith(arch.split("_")[1] + "_")}
    # every option of the architecture's grid (fairseq_ctx.architectures) is one of its own flags
    grid = option_grid(arch)
    assert {k for v in grid for k in v.settings} <= set(own)
    for name, f in own.items():
        assert actions[name].help == f.metadata["help"]
        assert actions[name].option_strings == ["--" + name.replace("_", "-")]
        if "choices" in f.metadata:  # free-form flags checked by validate_<arch>_args (ConfigError naming the flag)
            assert actions[name].choices is None
        if actions[name].choices is not None:  # an enum: argparse's choices are the values the grid covers
            assert list(actions[name].choices) == list(dict.fromkeys(v.settings[name] for v in grid))
    assert actions["encoder_embed_dim"].help == "encoder: embedding dimension"  # fairseq's help, as before
    # no argparse defaults: the architecture functions set them
    assert not any(hasattr(a, "default") and a.default not in (argparse.SUPPRESS, None) for a in actions.values())


@pytest.mark.unit
def test_hydra_validation_comes_from_the_dataclass():
    gret = MODEL_DATACLASS_REGISTRY["transformer_gret"]
    with pytest.raises(ValidationError, match="gret_routing_softmax"):
        merge_with_parent(gret(), OmegaConf.create({"gret_routing_softmax": "bogus"}))
    with pytest.raises(ValidationError, match="gret_capsules"):
        merge_with_parent(gret(), OmegaConf.create({"gret_capsules": "many"}))
    with pytest.raises(ConfigKeyError, match="gret_capsule"):
        merge_with_parent(gret(), OmegaConf.create({"gret_capsule": 4}))
    # free-form values reach the architecture's own check, which names the flag
    with pytest.raises(ConfigError, match="--ctxsan-context"):
        build_from_model_section({"_name": "transformer_ctxsan_tiny", "ctxsan_context": "deepglobal"})
    with pytest.raises(ConfigError, match="--dc-encoder-layers: layer 3 is outside the stack of 2"):
        build_from_model_section({"_name": "transformer_dc_tiny", "dc_encoder_layers": "1-3"})


def build_from_model_section(model, meta=True):
    """A model from a hydra ``model:`` section as fairseq builds it
    (merged with the dataclass of the model, the architecture by its name)."""
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, build_model
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    root = OmegaConf.create({"model": model})
    name = ARCH_MODEL_NAME_REGISTRY[model["_name"]]
    root.model = merge_with_parent(MODEL_DATACLASS_REGISTRY[name](), root.model)
    d = toy_dictionary()
    task = TranslationTask(TranslationConfig(), d, d)
    if meta:
        with torch.device("meta"):
            return build_model(root.model, task)
    return build_model(root.model, task)


@pytest.mark.unit
def test_an_architecture_named_in_model_name_gets_its_preset():
    iwslt = build_from_model_section({"_name": "transformer_dc_iwslt"})
    assert (iwslt.args.encoder_embed_dim, iwslt.args.encoder_layers, iwslt.args.encoder_ffn_embed_dim) == (256, 4, 1024)
    assert (iwslt.args.dc_kernel_size, iwslt.args.dc_encoder_layers, iwslt.args.dc_decoder_layers) == (2, "all", "none")
    dec = build_from_model_section({"_name": "transformer_dc_dec_iwslt", "encoder_embed_dim": 128,
                                    "decoder_embed_dim": 128})
    assert (dec.args.encoder_embed_dim, dec.args.decoder_layers, dec.args.dc_decoder_layers) == (128, 4, "all")
    tiny = build_from_model_section({"_name": "transformer_ctxsan_tiny", "ctxsan_side": "both"})
    assert (tiny.args.encoder_embed_dim, tiny.args.ctxsan_side, tiny.args.ctxsan_context) == (16, "both",
                                                                                             "deep-global+deep")
    base = build_from_model_section({"_name": "transformer_gret"})
    assert (base.args.encoder_embed_dim, base.args.gret_capsules, base.args.gret_routing_softmax) == (512, 32,
                                                                                                       "capsules")


# the first Base variant of each architecture with an option grid
@pytest.mark.parametrize("name", [next(v.name for v in VARIANTS if v.arch == arch) for arch in grid_archs()])
def test_checkpoints_with_legacy_namespace_arguments_load(name, trained_checkpoint, doc_corpus, tmp_path):
    """Checkpoints written before the dataclasses store the model arguments
    as fairseq-train's namespace (``_name`` = the arch); they load through
    fairseq's loader as before and give the same model."""
    path = trained_checkpoint(name)
    state = checkpoint_utils.load_checkpoint_to_cpu(str(path))
    model_cfg = state["cfg"]["model"]
    legacy = options.parse_args_and_arch(options.get_training_parser(), [
        str(doc_corpus[1]), "--arch", model_cfg._name, *TINY_FLAGS, *_variant_flags(name)])
    legacy._name = model_cfg._name
    old = torch.load(path, weights_only=False)
    old["cfg"]["model"] = legacy
    legacy_path = tmp_path / "legacy.pt"
    torch.save(old, legacy_path)
    models = [checkpoint_utils.load_model_ensemble([str(p)], arg_overrides={"data": str(doc_corpus[1])})[0][0]
              for p in (path, legacy_path)]
    assert isinstance(checkpoint_utils.load_checkpoint_to_cpu(str(legacy_path))["cfg"]["model"], argparse.Namespace)
    assert type(models[0]) is type(models[1])
    a, b = models[0].state_dict(), models[1].state_dict()
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)
    for k in MODEL_DATACLASS_REGISTRY[models[0].args._name].__dataclass_fields__:
        if k != "_name":
            assert getattr(models[0].args, k, None) == getattr(models[1].args, k, None), k


def _variant_flags(name):
    from fairseq_ctx.architectures import BY_NAME

    return [*BY_NAME[name].flags, *BY_NAME[name].task]


# ---------------------------------------------------------------------------
# end to end


def test_fairseq_hydra_train_trains_a_recipe_like_fairseq_train(doc_corpus, tmp_path):
    """The Enc-DC IWSLT recipe at tiny size, two updates, through
    ``python3 -m fairseq_cli.hydra_train`` (from another directory: paths
    absolute), and the same through fairseq-train's own main with the
    recipe's flags: the same weights."""
    from fairseq_cli import train as fairseq_train

    args_file = PARITY["transformer_dc"]
    data = str(doc_corpus[1])
    hydra_dir, train_dir = tmp_path / "hydra", tmp_path / "train"
    run = tmp_path / "cwd"
    run.mkdir()
    proc = run_cli("fairseq_cli.hydra_train", [
        "--config-dir", HYDRA_DIR, "--config-name", yaml_name(args_file),
        f"task.data={data}", f"common.user_dir={USER_DIR}", *tiny_overrides(),
        "optimization.max_update=2", f"checkpoint.save_dir={hydra_dir}", "common.cpu=true",
        "dataset.num_workers=0", "checkpoint.no_save_optimizer_state=true",
    ], cwd=run)
    assert "num_updates 2" in proc.stdout + proc.stderr
    assert (hydra_dir / ".hydra" / "config.yaml").is_file()  # hydra's record beside the checkpoints
    assert os.listdir(run) == []  # no change of directory, nothing written where it ran

    fairseq_train.main(train_config([
        data, *read_args(CONFIGS / args_file), *TINY_FLAGS, "--user-dir", USER_DIR, "--max-update", "2",
        "--save-dir", str(train_dir), "--cpu", "--num-workers", "0", "--no-save-optimizer-state"]))

    states = [checkpoint_utils.load_checkpoint_to_cpu(str(d / "checkpoint_last.pt")) for d in (hydra_dir, train_dir)]
    assert [s["cfg"]["model"]["_name"] for s in states] == ["transformer_dc_iwslt"] * 2
    assert [s["optimizer_history"][-1]["num_updates"] for s in states] == [2, 2]
    a, b = states[0]["model"], states[1]["model"]
    assert list(a) == list(b)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)
    models = checkpoint_utils.load_model_ensemble([str(hydra_dir / "checkpoint_last.pt")],
                                                  arg_overrides={"data": data})[0]
    assert type(models[0]).__name__ == "TransformerDCModel" and models[0].args.dc_kernel_size == 2
    assert len(models[0].encoder.dc_modules()) == 2  # Enc-DC: every (tiny) encoder layer


def test_gret_warm_start_is_cleared_from_the_stored_hydra_config(trained_checkpoint, doc_corpus, tmp_path):
    """As with fairseq-train (tests/test_gret.py): once the baseline is
    loaded, the config that the checkpoints store no longer names it, here
    for fairseq-hydra-train's config (fairseq builds from a merged copy)."""
    baseline = trained_checkpoint("transformer")
    cfg = hydra_config(yaml_name("gret/gret.args"), [
        f"task.data={doc_corpus[1]}", f"common.user_dir={USER_DIR}", *tiny_overrides(),
        f"++model.gret_warm_start={baseline}", f"checkpoint.save_dir={tmp_path}"])
    assert cfg.model._name == "transformer_gret" and cfg.model.gret_warm_start == str(baseline)
    model = build(cfg)
    assert cfg.model.gret_warm_start is None and model.args.gret_warm_start is None
    base = checkpoint_utils.load_checkpoint_to_cpu(str(baseline))["model"]
    assert torch.equal(model.state_dict()["encoder.layers.0.fc1.weight"], base["encoder.layers.0.fc1.weight"])
