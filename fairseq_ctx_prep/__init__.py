"""fairseq_ctx_prep: corpus preparation for fairseq_ctx, kept outside the
plugin so that it needs neither torch nor fairseq (``fairseq-preprocess``
runs as a subprocess); ``tests/test_prepare_scripts.py`` checks the import
in a virtual environment without them.

One module per corpus, each runnable as ``python3 -m fairseq_ctx_prep.NAME``
and wrapped by ``scripts/prepare-NAME.sh``: ``bible``, ``wmt14_en_de``,
``wmt16_ro_en``, ``wmt17_zh_en``, ``iwslt``, ``opensubtitles_en_ru``. What
they share, by concern: ``files`` (markers, atomic outputs, line counts),
``download`` (fetching, checksums, unpacking) with ``archives`` (the official
URLs), ``text`` (cleaning, SGML, tokenizer and subword line processors) and
``pipeline`` (the steps from raw files to binarized data).
"""
