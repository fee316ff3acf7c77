"""scripts/newcomer.py runs the README's commands in order and reads what they print."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import newcomer  # noqa: E402


def _readme():
    with open(os.path.join(REPO, "README.md")) as f:
        return f.read()


@pytest.mark.unit
def test_readme_commands_are_the_contract_in_order():
    commands = newcomer.readme_commands(_readme())
    with open(os.path.join(REPO, ".ci", "run")) as f:
        ci_test = [line.strip() for line in f if line.startswith("python3 -m pytest")]
    assert commands[0] == "bash scripts/install.sh"
    assert ci_test and ci_test[0] in commands   # CI runs exactly the README's test command
    assert "bash scripts/first-model.sh" in commands
    first = [i for i, c in enumerate(commands) if c.startswith("bash scripts/prepare-bible.sh")]
    quick = [i for i, c in enumerate(commands) if c.startswith("python3 scripts/quickstart.py")]
    assert first and quick and first[0] < quick[0]
    # continued lines joined, comment lines dropped
    translate = [c for c in commands if c.startswith("fairseq-ctx-translate")]
    assert translate and "\\" not in translate[0] and translate[0].endswith("--output test.ctxenc.en")
    assert not any(c.startswith("#") for c in commands)


@pytest.mark.unit
def test_missing_section_is_one_line():
    with pytest.raises(SystemExit, match="no '## Quickstart' section"):
        newcomer.readme_commands("## Set-up\n```bash\nls\n```\n")


@pytest.mark.unit
def test_pytest_summary_read():
    out = "....\n2 failed, 1300 passed, 130 skipped, 3 warnings in 605.12s (0:10:05)\n"
    assert newcomer.parse_results("python3 -m pytest tests", out)["tests"] == \
        {"failed": 2, "passed": 1300, "skipped": 130, "warnings": 3}
    assert "tests" not in newcomer.parse_results("bash scripts/install.sh", out)


@pytest.mark.integration
def test_scores_read_from_fairseq_ctx_score(tmp_path, capsys):
    """The score table as fairseq-ctx-score prints it (a hypothesis equal to
    the reference: 100 BLEU, 0 TER)."""
    from fairseq_ctx.evaluation import score

    model = os.path.join(REPO, "models", "bible")
    ref = tmp_path / "ref.en"
    with open(os.path.join(model, "test.en")) as f:
        ref.write_text("".join(f.readlines()[:40]))
    hyp = tmp_path / "hyp.en"
    hyp.write_text(ref.read_text())
    score.main(["--ref", str(ref), "--hyp", f"same={hyp}", "--metrics", "chrf,ter"])
    res = newcomer.parse_results("fairseq-ctx-score", capsys.readouterr().out)
    assert res["scores"] == {"same": {"BLEU": 100.0, "chrF": 100.0, "TER": 0.0}}


@pytest.mark.unit
def test_quickstart_table_read():
    # the row format of scripts/quickstart.py's closing table
    r = dict(arch="transformer_ctxenc", params=2709888, train_minutes=17.96, updates=840, bleu=12.346)
    row = f"{r['arch']:<40}{r['params'] / 1e6:>9.2f}M{r['train_minutes']:>11.1f}{r['updates']:>9}{r['bleu']:>7.2f}"
    with open(os.path.join(REPO, "scripts", "quickstart.py")) as f:
        assert "{r['params'] / 1e6:>9.2f}M{r['train_minutes']:>11.1f}{r['updates']:>9}{r['bleu']:>7.2f}" in f.read()
    assert newcomer.parse_results("python3 scripts/quickstart.py", row + "\n")["quickstart"] == \
        [dict(arch="transformer_ctxenc", params_m=2.71, train_minutes=18.0, updates=840, bleu=12.35)]
