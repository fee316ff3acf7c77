"""fairseq_ctx: context-enhanced Transformer architectures as a fairseq plugin.

fairseq itself is deliberately not listed: the PyPI `fairseq-fixed` package
(fairseq main, importable on Python 3.11) declares a `torchaudio` requirement
whose wheel cannot import on CPU-only machines, and torch must be pinned by the
user (CPU wheel here, their own CUDA build on a GPU cluster). Use
`bash scripts/install.sh`, which installs both correctly.
"""
from setuptools import find_packages, setup

setup(
    name="fairseq_ctx",
    version="0.1.0",
    description="Context-aware Transformer architectures and a document-context task for fairseq",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    # fairseq_ctx_prep (corpus preparation) is torch-free and installed beside the plugin
    packages=find_packages(include=["fairseq_ctx", "fairseq_ctx.*", "fairseq_ctx_prep"]),
    install_requires=[
        "numpy",
        "hydra-core==1.3.2",
        "omegaconf==2.3.0",
        "sacrebleu>=2.3",
        "sentencepiece",
        "subword-nmt",
        "sacremoses",
    ],
    entry_points={
        "console_scripts": [
            "fairseq-ctx-average-checkpoints = fairseq_ctx.average_checkpoints:cli_main",
            "fairseq-ctx-translate = fairseq_ctx.translate:cli_main",
            "fairseq-ctx-score = fairseq_ctx.evaluation.score:cli_main",
            "fairseq-ctx-contrastive = fairseq_ctx.cli:contrastive",
            "fairseq-ctx-context-usage = fairseq_ctx.evaluation.context_usage:cli_main",
            "fairseq-ctx-table = fairseq_ctx.tables.__main__:main",
            "fairseq-ctx-ctxsan-gates = fairseq_ctx.cli:ctxsan_gates",
            "fairseq-ctx-ctxsan-pos = fairseq_ctx.cli:ctxsan_pos",
            "fairseq-ctx-dc-divergence = fairseq_ctx.cli:dc_divergence",
            "fairseq-ctx-ctxenc-context-attention = fairseq_ctx.cli:ctxenc_context_attention",
            "fairseq-ctx-gret-global-state = fairseq_ctx.cli:gret_global_state",
            "fairseq-ctx-probing = fairseq_ctx.cli:probing",
            "fairseq-ctx-bow-prediction = fairseq_ctx.cli:bow_prediction",
            # data preparation (fairseq_ctx_prep: no torch or fairseq needed)
            "fairseq-ctx-prepare-bible = fairseq_ctx_prep.bible:main",
            "fairseq-ctx-prepare-wmt14-en-de = fairseq_ctx_prep.wmt14_en_de:main",
            "fairseq-ctx-prepare-wmt16-ro-en = fairseq_ctx_prep.wmt16_ro_en:main",
            "fairseq-ctx-prepare-wmt17-zh-en = fairseq_ctx_prep.wmt17_zh_en:main",
            "fairseq-ctx-prepare-iwslt = fairseq_ctx_prep.iwslt:main",
            "fairseq-ctx-prepare-opensubtitles-en-ru = fairseq_ctx_prep.opensubtitles_en_ru:main",
            "fairseq-ctx-prepare-corpus = fairseq_ctx_prep.user_corpus:main",
        ]
    },
    extras_require={"plot": ["matplotlib"], "test": ["pytest"]},
    license="MIT",
)
