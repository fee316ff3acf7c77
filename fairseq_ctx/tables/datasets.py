"""The prepared corpora the tables use, and where the repository is.

Every path a table run needs (``configs/``, the default data directories
``data/*/bin``, ``runs/``, the plugin given to ``--user-dir``) is taken from
the repository the command is run from (the nearest directory upwards from
the current one holding ``configs/`` and ``fairseq_ctx/``), or from
``--root``; never from where the package happens to be installed, so a
second checkout acts on itself. Every path is made absolute before it goes
into a command line.
"""
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

from .config import flag_value, read_arg_lines
from .definition import TableError


def find_root(start: Optional[Path] = None) -> Path:
    """The repository containing ``start`` (default: the current directory)."""
    here = Path(start or os.getcwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / "configs").is_dir() and (candidate / "fairseq_ctx" / "__init__.py").is_file():
            return candidate
    raise TableError(f"{here} is not inside a fairseq_ctx checkout (no configs/ and fairseq_ctx/ above it): "
                     "run from the repository or pass --root DIR")


@dataclass(frozen=True)
class Dataset:
    """A prepared corpus: ``configs/data/<name>.args`` holds its direction
    (``--source-lang``/``--target-lang``) and ``<name>.generate.args`` its
    post-processing for fairseq-generate."""
    name: str
    bin_dir: str          # default location, relative to the repository
    title: str

    def train_config(self, configs: Path) -> Path:
        return configs / "data" / f"{self.name}.args"

    def generate_config(self, configs: Path) -> Path:
        return configs / "data" / f"{self.name}.generate.args"

    def langs(self, configs: Path) -> Tuple[str, str]:
        lines = read_arg_lines(self.train_config(configs))
        return flag_value(lines, "--source-lang"), flag_value(lines, "--target-lang")


def _iwslt(a, b, pair):
    return Dataset(f"iwslt_{a}_{b}", f"data/iwslt-{pair}/bin", f"IWSLT {a.capitalize()}->{b.capitalize()}")


DATASETS: Dict[str, Dataset] = {d.name: d for d in [
    Dataset("bible", "data/bible/bin", "Bible Es->En"),
    Dataset("wmt14_en_de", "data/wmt14-en-de/bin", "WMT14 En->De"),
    Dataset("wmt14_de_en", "data/wmt14-de-en/bin", "WMT14 De->En"),
    Dataset("wmt16_ro_en", "data/wmt16-ro-en/bin", "WMT16 Ro->En"),
    Dataset("wmt17_zh_en", "data/wmt17-zh-en/bin", "WMT17 Zh->En"),
    Dataset("wmt17_zh_en_gret", "data/wmt17-zh-en-gret/bin", "WMT17 Zh->En (GRET's corpora)"),
    _iwslt("en", "vi", "en-vi"), _iwslt("vi", "en", "en-vi"),
    _iwslt("es", "en", "es-en"), _iwslt("en", "es", "es-en"),
    _iwslt("fr", "en", "fr-en"), _iwslt("en", "fr", "fr-en"),
    _iwslt("ro", "en", "ro-en"), _iwslt("en", "ro", "ro-en"),
    Dataset("opensubtitles_en_ru", "data/opensubtitles-en-ru/bin", "OpenSubtitles2018 En->Ru (Voita et al. 2018)"),
    Dataset("opensubtitles_en_ru_2019", "data/opensubtitles-en-ru-2019/bin",
            "OpenSubtitles2018 En->Ru (Voita et al. 2019 groups)"),
]}

SMOKE_DATASET = "bible"


def parse_named(specs: Optional[Sequence[str]], flag: str) -> Dict[Optional[str], str]:
    """``['DIR']`` -> ``{None: DIR}``; ``['wmt14_en_de=DIR']`` -> ``{'wmt14_en_de': DIR}``."""
    out: Dict[Optional[str], str] = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if sep and name in DATASETS:
            out[name] = path
        elif sep and not os.path.exists(spec):
            raise TableError(f"{flag} {spec!r}: unknown dataset {name!r} (known: {', '.join(DATASETS)})")
        else:
            out[None] = spec
    return out


