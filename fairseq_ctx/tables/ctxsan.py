"""Yang et al., AAAI 2019, Context-Aware Self-Attention Networks: Tables 1-3.

The paper's numbers are copied from its tables (the text in the shared papers
folder). Its BLEU on En-De is tokenized BLEU (Vaswani et al.'s setup), so our
"tok BLEU" column (compound-split) is the one beside it; for Zh-En the paper
names no BLEU script (compared with sacreBLEU). "Train" is
steps/second and "Decode" sentences/second on its 8 P40 GPUs; ours are
relative to the baseline row.
"""
from .analyses import CtxSanGates, LengthBuckets
from .definition import Row, Table

# Why our parameter counts differ from the paper's: printed
# under every ctxsan table beside the dictionary sizes of the data used.
PARAMS_NOTE = ("# Para.: the paper's Base 88.0M is 44.1M of layers plus three untied embedding matrices (encoder input, "
               "decoder input, output) of V x 512, so V is about 28.6k; ours use the dictionaries of the prepared "
               "data (the 'dictionaries' line), and every 1k entries more than that add 3 x 512 x 1k = 1.5M "
               "parameters, which is the whole difference between the two counts at equal layers.")

T1 = "ctxsan/table1/"
BASE, CTX = T1 + "01_transformer.args", T1 + "05_enc_deep_global_deep.args"

TABLE1 = Table(
    name="ctxsan-table1",
    notes=(PARAMS_NOTE,),
    bleu={"wmt14_en_de": "compound-split", "*": "unstated"},
    title="Yang et al. 2019, Table 1: WMT14 En->De, Transformer-Base",
    columns=("#", "Model", "Applied to", "Context vectors"),
    dataset="wmt14_en_de", generate="ctxsan/generate.args", baseline="BASE",
    speed=("train", "decode"),
    paper_note="# Para.; Train (steps/s) and Decode (sentences/s) on 8 P40 GPUs, ratio to BASE in parentheses; "
               "BLEU on newstest2014",
    rows=[
        Row("BASE", BASE, ("1", "BASE", "n/a", "n/a"),
            dict(params="88.0M", train=1.28, decode=1.52, bleu=27.31)),
        Row("enc global", T1 + "02_enc_global.args", ("2", "OURS", "encoder", "global"),
            dict(params="91.0M", train=1.26, decode=1.50, bleu=27.96)),
        Row("enc deep-global", T1 + "03_enc_deep_global.args", ("3", "", "encoder", "deep-global"),
            dict(params="99.0M", train=1.25, decode=1.48, bleu=28.15)),
        Row("enc deep", T1 + "04_enc_deep.args", ("4", "", "encoder", "deep"),
            dict(params="95.9M", train=1.18, decode=1.38, bleu=28.01)),
        Row("enc deep-global+deep", CTX, ("5", "", "encoder", "deep-global + deep"),
            dict(params="106.9M", train=1.16, decode=1.36, bleu=28.26)),
        Row("dec deep-global", T1 + "06_dec_deep_global.args", ("6", "", "decoder", "deep-global"),
            dict(params="99.0M", train=1.23, decode=1.44, bleu=27.94)),
        Row("dec deep-global+deep", T1 + "07_dec_deep_global_deep.args", ("7", "", "decoder", "deep-global + deep"),
            dict(params="106.9M", train=1.15, decode=1.35, bleu=28.02)),
        Row("both", T1 + "08_both_deep_global_deep.args", ("8", "", "both", "5 + 7"),
            dict(params="125.8M", train=1.04, decode=1.20, bleu=28.16)),
    ],
    analyses=(
        # Figure 2 (encoder models 2-5) and Figure 3 (row 8, source vs target side);
        # the decoder rows are read out as well
        CtxSanGates(["enc global", "enc deep-global", "enc deep", "enc deep-global+deep", "dec deep-global",
                     "dec deep-global+deep", "both"]),
        # Figure 5: 10 length groups (Tu et al. 2016), edges and unit not given: <10, 10-19, ..., 80-89, >=90
        # subword tokens, closed on the left as DC's groups
        LengthBuckets(edges=(10, 20, 30, 40, 50, 60, 70, 80, 90), figure="Figure 5, 10 groups",
                      paper_unit="not stated (ours: subword tokens)"),
    ),
)

TABLE2 = Table(
    name="ctxsan-table2",
    bleu={"wmt14_en_de": "compound-split", "*": "unstated"},
    title="Yang et al. 2019, Table 2: WMT17 Zh->En and WMT14 En->De, Base and Big",
    columns=("Task", "Architecture"),
    dataset="wmt14_en_de", generate="ctxsan/generate.args", baseline="En-De BASE",
    speed=("train",),
    paper_note="# Para.; Train in steps/s on 8 P40 GPUs (ratio to the Base of the same task); BLEU on newstest2017 "
               "(Zh->En) and newstest2014 (En->De); + marks p < 0.01 against the row above (bootstrap)",
    notes=(PARAMS_NOTE, "The Base rows are the models of Table 1 (rows 1 and 5), trained once for both tables.",
           "Speed ratios (ours and, in parentheses, the paper's) are relative to En-De BASE for every row."),
    rows=[
        Row("Zh-En BASE", BASE, ("Zh->En", "TRANSFORMER-BASE"),
            dict(params="107.9M", train=1.21, bleu=24.13), dataset="wmt17_zh_en", baseline=""),
        Row("Zh-En BASE+CA", CTX, ("Zh->En", "+ Context-Aware SANs"),
            dict(params="126.8M", train=1.10, bleu="24.67+"), dataset="wmt17_zh_en", baseline="Zh-En BASE"),
        Row("Zh-En BIG", "ctxsan/table2/03_transformer_big.args", ("Zh->En", "TRANSFORMER-BIG"),
            dict(params="303.9M", train=0.58, bleu=24.56), dataset="wmt17_zh_en", baseline="",
            average="recipes/average_last20.args"),
        Row("Zh-En BIG+CA", "ctxsan/table2/04_ctxsan_big.args", ("Zh->En", "+ Context-Aware SANs"),
            dict(params="379.4M", train=0.41, bleu="25.15+"), dataset="wmt17_zh_en", baseline="Zh-En BIG",
            average="recipes/average_last20.args"),
        Row("En-De BASE", BASE, ("En->De", "TRANSFORMER-BASE"),
            dict(params="88.0M", train=1.28, bleu=27.31), baseline=""),
        Row("En-De BASE+CA", CTX, ("En->De", "+ Context-Aware SANs"),
            dict(params="106.9M", train=1.16, bleu="28.26+"), baseline="En-De BASE"),
        Row("En-De BIG", "ctxsan/table2/03_transformer_big.args", ("En->De", "TRANSFORMER-BIG"),
            dict(params="264.1M", train=0.61, bleu=28.58), baseline="", average="recipes/average_last20.args"),
        Row("En-De BIG+CA", "ctxsan/table2/04_ctxsan_big.args", ("En->De", "+ Context-Aware SANs"),
            dict(params="339.6M", train=0.44, bleu=28.89), baseline="En-De BIG",
            average="recipes/average_last20.args"),
    ],
)

TABLE3 = Table(
    name="ctxsan-table3",
    bleu={"wmt14_en_de": "compound-split", "*": "unstated"},
    title="Yang et al. 2019, Table 3: context in queries and/or keys, WMT14 En->De validation set (Dev)",
    columns=("Model", "Query", "Key"),
    dataset="wmt14_en_de", generate="ctxsan/generate_dev.args", baseline="TRANSFORMER-BASE",
    paper_note="BLEU on the En->De validation set (newstest2013)",
    notes=(PARAMS_NOTE, "Rows 1 and 2 are the models of Table 1 (rows 1 and 5), decoded on the validation set.",),
    rows=[
        Row("TRANSFORMER-BASE", BASE, ("TRANSFORMER-BASE", "-", "-"), dict(bleu=25.84)),
        Row("+CA query+key", CTX, ("+ Context-Aware", "v", "v"), dict(bleu=26.42)),
        Row("+CA key", "ctxsan/table3/03_key_only.args", ("", "x", "v"), dict(bleu=26.36)),
        Row("+CA query", "ctxsan/table3/04_query_only.args", ("", "v", "x"), dict(bleu=26.20)),
    ],
)

TABLES = [TABLE1, TABLE2, TABLE3]
