"""Where each corpus's raw files live: official URLs and the md5 sums that
sacreBLEU publishes, with the page or script each address was taken from.
"""
from __future__ import annotations

from .download import Archive

STATMT = "https://statmt.org"
DATA_STATMT = "https://data.statmt.org"
OPUS = "https://object.pouta.csc.fi"
# md5 sums as published in sacreBLEU's dataset table (sacrebleu 2.6.0,
# sacrebleu/dataset/__init__.py): stable statmt.org test/dev archives.
ARCHIVES = {
    # fairseq examples/translation/prepare-wmt14en2de.sh (URLS)
    "europarl-v7": Archive("training-parallel-europarl-v7.tgz",
                           f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz"),
    "commoncrawl": Archive("training-parallel-commoncrawl.tgz",
                           f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz"),
    # prepare-wmt14en2de.sh --icml17 (WMT14's own news commentary)
    "nc-v9": Archive("training-parallel-nc-v9.tgz", f"{STATMT}/wmt14/training-parallel-nc-v9.tgz"),
    "nc-v12": Archive("training-parallel-nc-v12.tgz",
                      f"{DATA_STATMT}/wmt17/translation-task/training-parallel-nc-v12.tgz"),
    "wmt17-dev": Archive("dev.tgz", f"{DATA_STATMT}/wmt17/translation-task/dev.tgz",
                         "9b1aa63c1cf49dccdd20b962fe313989"),
    "wmt14-test": Archive("test-full.tgz", f"{STATMT}/wmt14/test-full.tgz",
                          "a8cd784e006feb32ac6f3d9ec7eb389a"),
    "wmt17-test": Archive("test.tgz", f"{DATA_STATMT}/wmt17/translation-task/test.tgz",
                          "86a1724c276004aa25455ae2a04cef26"),
    # UN Parallel Corpus v1.0 as distributed by OPUS (moses format); the
    # official release (conferences.unite.un.org/UNCorpus) needs a form.
    "unpc": Archive("OPUS-UNPC/v1.0/moses/en-zh.txt.zip", f"{OPUS}/OPUS-UNPC/v1.0/moses/en-zh.txt.zip"),
    # rsennrich/wmt16-scripts sample/download_files.sh (Europarl + SETimes2)
    "europarl-v7-ro": Archive("ro-en.tgz", "https://www.statmt.org/europarl/v7/ro-en.tgz"),
    "setimes2": Archive("OPUS-SETIMES/v2/moses/en-ro.txt.zip", f"{OPUS}/OPUS-SETIMES/v2/moses/en-ro.txt.zip"),
    "wmt16-dev": Archive("dev.tgz", f"{DATA_STATMT}/wmt16/translation-task/dev.tgz",
                         "4a3dc2760bb077f4308cce96b06e6af6"),
    "wmt16-test": Archive("test.tgz", f"{DATA_STATMT}/wmt16/translation-task/test.tgz",
                          "3d809cd0c2c86adb2c67034d15c4e446"),
    # Voita et al. 2019, github.com/lena-voita/good-translation-wrong-in-context
    # ("Training data"): OpenSubtitles2018 En-Ru, context_aware = groups of 4
    # consecutive sentences joined by " _eos ".
    "voita-opensubs": Archive(
        "acl19_good_translation_wrong_in_context.zip",
        "https://www.dropbox.com/s/5drjpx07541eqst/acl19_good_translation_wrong_in_context.zip?dl=1"),
}

WIT3_HINT = ("WIT3 no longer serves per-pair archives (wit3.fbk.eu/archive/... answers 404): "
             "download the release tarballs {releases} from https://wit3.fbk.eu/{page} "
             "(Google Drive links), put them (or their unpacked trees) in a directory "
             "and pass --from DIR")


def wit3_archive(release: str, src: str, tgt: str, page: str, releases: str) -> Archive:
    """A per-pair WIT3 archive, named by its path in the WIT3 release tree
    (as fairseq's prepare-iwslt14.sh downloaded it from
    https://wit3.fbk.eu/archive/2014-01/texts/de/en/de-en.tgz)."""
    return Archive(f"{release}/texts/{src}/{tgt}/{src}-{tgt}.tgz", None,
                   manual=WIT3_HINT.format(releases=releases, page=page), in_release=True)


# CWMT (the Chinese-English corpora of WMT17 besides NC v12 and UN) needs a
# registration: http://nlp.nju.edu.cn/cwmt-wmt/ (linked from the WMT17
# translation-task page). Member paths as unpacked by public recipes
# (tensorflow/tensor2tensor data_generators/translate_enzh.py: cwmt/casia2015/
# casia2015_ch.txt ...; fairseq's CCMT_DIR/casict2011/casict-A_ch.txt ...),
# with or without the leading cwmt/.
CWMT = Archive("cwmt.tgz", None, manual=(
    "CWMT needs a registration: get it from http://nlp.nju.edu.cn/cwmt-wmt/ (linked from "
    "https://www.statmt.org/wmt17/translation-task.html), unpack it and pass --from DIR with DIR "
    "holding cwmt.tgz or its folders (casia2015/, casict2011/, casict2015/, datum2015/, datum2017/, "
    "neu2017/)"))
# (folder, Chinese file, English file); datum2017's Chinese is word-segmented
CWMT_CORPORA = ([("casia2015", "casia2015_ch.txt", "casia2015_en.txt"),
                 ("casict2011", "casict-A_ch.txt", "casict-A_en.txt"),
                 ("casict2011", "casict-B_ch.txt", "casict-B_en.txt"),
                 ("casict2015", "casict2015_ch.txt", "casict2015_en.txt"),
                 ("datum2015", "datum_ch.txt", "datum_en.txt"),
                 ("neu2017", "NEU_cn.txt|NEU_ch.txt", "NEU_en.txt")]
                + [("datum2017", f"Book{i}_cn.txt", f"Book{i}_en.txt") for i in range(1, 21)])


def cwmt_member(folder: str, fnames: str) -> str:
    """Member spec of a CWMT file: ``fnames`` may list alternatives ("a|b"),
    each looked for under cwmt/FOLDER/ and FOLDER/."""
    return "|".join(f"{root}{folder}/{f}" for f in fnames.split("|") for root in ("cwmt/", ""))


VOITA18 = f"{DATA_STATMT}/acl18_contextnmt_data"


def voita2018(fname: str) -> Archive:
    """Voita et al. 2018's release (the paper's footnote; the file names as
    fetched by public scripts, e.g. ``${split}.en.context.gz``): gzip files
    {train,dev,test}.{en,ru,en.context}.gz, already tokenized, one instance a
    line, ``.en.context`` its previous English sentence."""
    return Archive(f"acl18_contextnmt_data/{fname}.gz", f"{VOITA18}/{fname}.gz")


STANFORD_ENVI = "https://nlp.stanford.edu/projects/nmt/data/iwslt15.en-vi"


def stanford_envi(fname: str) -> Archive:
    """Luong & Manning's IWSLT'15 En-Vi files (133k train, tst2012, tst2013)."""
    return Archive(f"iwslt15.en-vi/{fname}", f"{STANFORD_ENVI}/{fname}")

