"""Voita et al., ACL 2018, Context-Aware NMT Learns Anaphora Resolution: the
BLEU table (baseline, concatenation, context encoder with the previous / next /
random sentence) and the context encoder evaluated with shuffled context,
with the words that attend most to context as an analysis.

The paper's numbers are not in the summary in the shared papers folder; the
paper column holds the differences its abstract states: the context encoder
(previous sentence) +0.7 BLEU over the context-agnostic baseline and +0.6 over
concatenation. For the shuffled-context row the summary says only that BLEU
"dropped significantly".
"""
from .analyses import ContextAttention
from .definition import Row, Table

V = "voita/"

TABLE = Table(
    name="voita-bleu",
    title="Voita et al. 2018: BLEU, OpenSubtitles2018 En->Ru",
    columns=("Model", "Context"),
    dataset="opensubtitles_en_ru", generate=V + "generate.args", baseline="baseline",
    paper_note="only the abstract's differences: context encoder (previous) +0.7 over the baseline, +0.6 over "
               "concatenation; shuffled context: 'drops significantly' (no number)",
    notes=("The shuffled-context row decodes the model of 'context encoder (previous)' with --shuffle-context; "
           "its diff and p are against that row.",
           "Data: Voita et al. 2018's release (every instance with its previous sentence, explicit context); "
           "the next-sentence row trains and tests on Voita et al. 2019's groups of 4 "
           "(prepare-opensubtitles-en-ru.sh --release 2019), which the 2018 release cannot give, "
           "so it has no baseline on its test set.",),
    rows=[
        Row("baseline", V + "01_baseline.args", ("baseline (context-agnostic)", "-"), dict(bleu="n/a")),
        Row("concatenation", V + "02_concatenation.args", ("concatenation", "previous"), dict(bleu="ctx enc -0.6"),
            generate=V + "generate_concat.args"),
        Row("context encoder (previous)", V + "03_context_encoder_previous.args", ("context encoder", "previous"),
            dict(bleu="Δ+0.7"), generate=V + "generate_previous.args"),
        # the 2018 release gives each instance its previous sentence only: the next
        # sentence comes from the 2019 groups (another test set, so no baseline)
        Row("context encoder (next)", V + "04_context_encoder_next.args", ("context encoder", "next"),
            dict(bleu="n/a"), generate=V + "generate_next.args", dataset="opensubtitles_en_ru_2019", baseline=""),
        Row("context encoder (random)", V + "05_context_encoder_random.args", ("context encoder", "random"),
            dict(bleu="n/a"), generate=V + "generate_random.args"),
        Row("context encoder (previous), shuffled", model_of="context encoder (previous)",
            cells=("context encoder (previous)", "shuffled at test"), paper=dict(bleu="drops"),
            generate=V + "generate_shuffled.args", baseline="context encoder (previous)"),
    ],
    analyses=(ContextAttention("context encoder (previous)", V + "task_previous.args"),),
)

TABLES = [TABLE]
