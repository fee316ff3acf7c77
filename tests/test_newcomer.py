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
    """The newcomer's record reads quickstart.py's closing table with the
    reader quickstart.py keeps beside its row format."""
    import quickstart

    rows = [dict(arch="transformer_ctxenc", params=2709888, train_minutes=17.96, updates=840, bleu=12.346),
            dict(arch="transformer", params=2412672, train_minutes=9.04, updates=1200, bleu=9.0)]
    printed = "\n".join(["noise 1.0M 2.0 3", quickstart.TABLE_HEAD] + [quickstart.format_row(r) for r in rows])
    assert newcomer.parse_results("python3 scripts/quickstart.py", printed + "\ndetokenized ...\n")["quickstart"] == \
        [dict(arch="transformer_ctxenc", params_m=2.71, train_minutes=18.0, updates=840, bleu=12.35),
         dict(arch="transformer", params_m=2.41, train_minutes=9.0, updates=1200, bleu=9.0)]


@pytest.mark.unit
def test_score_table_read_through_its_header():
    """fairseq-ctx-score's table with and without a baseline (diff and
    p-value columns), long names and every optional column, read back as
    printed; text after it and a line that is not a row end it."""
    from fairseq_ctx.evaluation.score import format_table, parse_table

    rows = [dict(name="baseline", bleu=28.755, chrf=50.9, ter=57.95, dbleu=33.5, tok_bleu=29.9),
            dict(name="a_much_longer_system", bleu=29.84, chrf=51.77, ter=56.1, dbleu=34.0, tok_bleu=30.1,
                 delta=1.09, p_value=0.012, chrf_delta=0.0031, chrf_p_value=0.5, ter_delta=-1.2,
                 ter_p_value=0.04, dbleu_delta=0.5, tok_delta=0.2, tok_p_value=0.3)]
    plain = format_table(rows, None, True, ("bleu", "chrf", "ter"), True)
    assert parse_table("2 system(s), 553 sentences\n" + plain + "\nBLEU: detokenized sacreBLEU") == {
        "baseline": {"BLEU": "28.75", "chrF": "50.90", "TER": "57.95", "d-BLEU": "33.50", "tok BLEU": "29.90"},
        "a_much_longer_system": {"BLEU": "29.84", "chrF": "51.77", "TER": "56.10", "d-BLEU": "34.00",
                                 "tok BLEU": "30.10"}}
    table = parse_table(format_table(rows, "baseline", False, ("bleu", "chrf")))
    assert table["a_much_longer_system"] == {"BLEU": "29.84", "BLEU diff": "+1.09", "BLEU p-value": "0.0120*",
                                             "chrF": "51.77", "chrF diff": "+0.0031", "chrF p-value": "0.5000"}
    assert table["baseline"]["BLEU diff"] == "-"
    assert parse_table("no table here\nsystem was down\n") == {}
