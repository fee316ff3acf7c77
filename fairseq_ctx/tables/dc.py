"""Ampomah et al., Machine Translation 2021, Dual Contextual module: Tables 1,
2 and 5 and the kernel-size sweep (Sect. 7.2, Figs. 3-4).

The tables themselves did not survive the conversion of the paper in the
shared papers folder (only their captions did). The paper column holds what
the text states: differences from the Transformer baseline ("Δ+0.89"), a few
absolute scores, and the parameter growth; "n/a" where the text says nothing.
The paper reports 4-gram case-sensitive BLEU (Sect. 5.1): "NIST BLEU" on
En-De (mteval-v13a, which sacreBLEU's 13a tokenizer reproduces: our BLEU
column), sacreBLEU on En-Vi, multi-bleu.pl on the other IWSLT tasks (our tok
BLEU column: Moses-tokenized, no compound splitting), and paired bootstrap
resampling with 1000 samples (compare-mt) on En-De. Its batch sizes (4960 and
2048 tokens) are given without a GPU count: taken as written, 8 GPUs with
``--batch-reading 8gpu``.
"""
from .analyses import DCDivergence, LengthBuckets, Probing
from .definition import Row, Table

BASE = "dc/wmt14_en_de_transformer.args"
ENC = "dc/wmt14_en_de_enc_dc.args"

TABLE1 = Table(
    name="dc-table1",
    bleu={"wmt14_en_de": "nist"}, gpus_stated=False,
    title="Ampomah et al. 2021, Table 1: WMT14 En->De, Transformer-Base",
    columns=("Model",),
    dataset="wmt14_en_de", generate="dc/wmt14_en_de.generate.args", baseline="Transformer",
    paper_note="from the text (Table 1 itself is lost): BLEU gains over the baseline (Full-DC: +0.25 over Dec-DC) "
               "and parameter growth; the table's training speeds are not in the text",
    rows=[
        Row("Transformer", BASE, ("Transformer",), dict(params="n/a", bleu="n/a")),
        Row("Enc-DC", ENC, ("Enc-DC",), dict(params="+12.7M", bleu="Δ+0.89")),
        Row("Dec-DC", "dc/wmt14_en_de_dec_dc.args", ("Dec-DC",), dict(params="+12.7M", bleu="Δ+0.49")),
        Row("Full-DC", "dc/wmt14_en_de_full_dc.args", ("Full-DC",), dict(params="about +25M", bleu="Δ+0.74")),
    ],
    analyses=(
        # Fig. 5: "<10, 10-20, 20-30, 30-40, 40-50, and >50" subword tokens, read as closed on the left
        # ("fewer than ten subword tokens", "greater than or equal to 20")
        LengthBuckets(edges=(10, 20, 30, 40, 50), figure="Fig. 5, 6 groups", paper_unit="subword tokens"),
        Probing(["Transformer", "Enc-DC"]),  # Table 4
    ),
)


def _table2_rows():
    # (dataset, task label, {model: paper BLEU}) as far as the text gives them
    tasks = [
        ("iwslt_en_vi", "En->Vi", {"Enc-DC": 31.28, "Dec-DC": 31.24, "Full-DC": "Δ+0.52"}),
        ("iwslt_vi_en", "Vi->En", {}),
        ("iwslt_es_en", "Es->En", {"Enc-DC": "Δ+0.38", "Dec-DC": "Δ+0.16", "Full-DC": "Δ+0.35"}),
        ("iwslt_en_es", "En->Es", {}),
        ("iwslt_fr_en", "Fr->En", {}),
        ("iwslt_en_fr", "En->Fr", {}),
        ("iwslt_ro_en", "Ro->En", {}),
        ("iwslt_en_ro", "En->Ro", {}),
    ]
    models = [("Transformer", "dc/iwslt_transformer.args"), ("Enc-DC", "dc/iwslt_enc_dc.args"),
              ("Dec-DC", "dc/iwslt_dec_dc.args"), ("Full-DC", "dc/iwslt_full_dc.args")]
    rows = []
    for dataset, task, paper in tasks:
        for model, cfg in models:
            rows.append(Row(f"{task} {model}", cfg, (task, model), dict(bleu=paper.get(model)), dataset=dataset,
                            baseline="" if model == "Transformer" else f"{task} Transformer"))
    return rows


TABLE2 = Table(
    name="dc-table2",
    bleu={"iwslt_en_vi": "sacrebleu", "iwslt_vi_en": "sacrebleu", "*": "multi-bleu"}, gpus_stated=False,
    title="Ampomah et al. 2021, Table 2: IWSLT {Vi, Es, Fr, Ro} <-> En, 4+4 layers, d=256",
    columns=("Task", "Model"),
    dataset="iwslt_en_vi", generate="dc/iwslt.generate.args", baseline="En->Vi Transformer",
    paper_note="from the text (Table 2 itself is lost): En->Vi Enc-DC 31.28, Dec-DC 31.24, Full-DC +0.52 over the "
               "baseline; Es->En gains +0.38 / +0.16 / +0.35; the other tasks' scores are not in the text",
    notes=("Speeds are relative to En->Vi Transformer for every row.",),
    rows=_table2_rows(),
)

_LAYER_ROWS = [("2", "[1-1]", "02_layers_1-1", None), ("3", "[1-2]", "03_layers_1-2", "Δ+0.61"),
               ("4", "[1-3]", "04_layers_1-3", None), ("5", "[1-4]", "05_layers_1-4", None),
               ("6", "[4-6] (guessed)", "06_layers_4-6", None), ("7", "[5-6]", "07_layers_5-6", 28.47),
               ("8", "[6-6] (guessed)", "08_layers_6-6", None)]

TABLE5 = Table(
    name="dc-table5",
    bleu={"wmt14_en_de": "nist"}, gpus_stated=False,
    title="Ampomah et al. 2021, Table 5: Enc-DC on subsets of the encoder layers, WMT14 En->De",
    columns=("#", "DC layers"),
    dataset="wmt14_en_de", generate="dc/wmt14_en_de.generate.args", baseline="Transformer",
    paper_note="from the text (Table 5 itself is lost): [1-2] +0.61 over the baseline, [5-6] 28.47 (the worst), "
               "[1-1] and [1-4] the best of the subsets, all layers best overall",
    notes=("Rows 6 and 8 are not named in the text (rows 6-8 are 'top-level layers'): [4-6] and [6-6] are guesses.",
           "Smoke runs keep 6 encoder layers so that every layer subset exists."),
    smoke_model={"encoder_layers": 6},
    rows=[Row("Transformer", BASE, ("1", "none (Transformer)"), dict(bleu="n/a"))]
    + [Row(f"layers {layers.split(' ')[0]}", f"dc/table5/{cfg}.args", (n, layers), dict(bleu=paper))
       for n, layers, cfg, paper in _LAYER_ROWS]
    + [Row("layers [1-6]", ENC, ("9", "[1-6] (all: Enc-DC)"), dict(bleu="best"))],
)

KERNEL = Table(
    name="dc-kernel",
    bleu={"wmt14_en_de": "nist"}, gpus_stated=False,
    title="Ampomah et al. 2021, Sect. 7.2, Figs. 3-4: Enc-DC kernel size f, WMT14 En->De",
    columns=("Model", "f"),
    dataset="wmt14_en_de", generate="dc/wmt14_en_de.generate.args", baseline="Transformer",
    paper_note="from the text (Fig. 3): f=2..4 best, 5..7 about equal, f=8 only +0.10 over the baseline",
    rows=[Row("Transformer", BASE, ("Transformer", "-"), dict(bleu="n/a")),
          Row("f=2", ENC, ("Enc-DC", "2"), dict(bleu="best (2-4)"))]
    + [Row(f"f={f}", f"dc/kernel/f{f}.args", ("Enc-DC", str(f)),
           dict(bleu={3: "best (2-4)", 4: "best (2-4)", 8: "Δ+0.10"}.get(f, "n/a"))) for f in range(3, 9)],
    analyses=(DCDivergence([f"f={f}" for f in range(2, 9)]),),  # Fig. 4
)

TABLES = [TABLE1, TABLE2, TABLE5, KERNEL]
