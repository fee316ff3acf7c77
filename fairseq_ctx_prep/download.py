"""Download and checksums: finding, fetching, verifying and unpacking the
raw archives of a corpus.

Where the raw files come from
-----------------------------
* default: the official URL of every archive (``fairseq_ctx_prep.archives``,
  each with the page or script it was taken from), downloaded with curl to
  ``DEST/orig/NAME.part``, checked (non-empty; the md5 that sacreBLEU
  publishes for the WMT dev/test archives; the archive opens and holds the
  members needed) and only then renamed to ``DEST/orig/NAME``. A failed
  download stops with one line naming the URL and leaves no ``NAME``.
* ``--mirror PREFIX`` (a URL prefix or a local directory): the same, from
  ``PREFIX/NAME``.
* ``--from DIR``: nothing is downloaded. Every archive is taken from
  ``DIR/NAME``, or its members already unpacked at ``DIR/MEMBER`` (the paths
  inside the archive). ``NAME`` is the archive's file name, except where
  names would collide (IWSLT: the WIT3 path ``2014-01/texts/en/es/en-es.tgz``,
  which may also be found inside the release tarball ``DIR/2014-01.tgz``;
  OPUS: ``OPUS-SETIMES/v2/moses/en-ro.txt.zip``). A missing file stops with one
  line naming what was looked for.
"""
from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .files import PrepError, discard_dir, fresh_dir, publish_dir


@dataclass(frozen=True)
class Archive:
    """A file to fetch. ``name`` is its local name (also its path under
    ``--mirror`` and ``--from``); ``url`` its official address, or None when
    it cannot be downloaded by a script (``manual`` then says how to get it).
    Tar/zip archives are unpacked, a single gzip-compressed file (``.gz``)
    is decompressed; any other file is used as it is."""
    name: str
    url: Optional[str]
    md5: Optional[str] = None
    manual: str = ""
    in_release: bool = False   # also found inside the release tarball DIR/<first path part>.tgz

    @property
    def kind(self) -> str:
        if self.name.endswith(".zip"):
            return "zip"
        if self.name.endswith((".tgz", ".tar.gz", ".tar")):
            return "tar"
        if self.name.endswith(".gz"):
            return "gz"
        return "file"


# A member spec: a path inside an archive; "a|b" names alternatives (the
# first present is used). None: the archive file itself.
Need = Tuple[Archive, Optional[str]]


def md5sum(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _alternatives(member: str) -> List[str]:
    return member.split("|")


def archive_names(path: Path, kind: str) -> List[str]:
    """Member file names of a tar or zip archive; PrepError if unreadable."""
    try:
        if kind == "zip":
            with zipfile.ZipFile(path) as z:
                return [n for n in z.namelist() if not n.endswith("/")]
        with tarfile.open(path, "r:*") as t:
            return [m.name[2:] if m.name.startswith("./") else m.name
                    for m in t.getmembers() if m.isfile()]
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as err:
        raise PrepError(f"{path} is not a readable {kind} archive ({err}); "
                        "delete it and rerun") from None


def pick_members(names: Iterable[str], members: Iterable[str], where: str) -> Dict[str, str]:
    """Map each member spec to the first of its alternatives in ``names``."""
    present, chosen = set(names), {}
    for spec in members:
        hit = next((alt for alt in _alternatives(spec) if alt in present), None)
        if hit is None:
            raise PrepError(f"{where} has no {' or '.join(_alternatives(spec))}")
        chosen[spec] = hit
    return chosen


def extract_members(path: Path, kind: str, chosen: Dict[str, str], out: Path) -> None:
    """Write the chosen members of an archive under ``out`` (by their
    member path; nothing else is unpacked, no path leaves ``out``)."""
    wanted = {real: spec for spec, real in chosen.items()}
    if kind == "zip":
        with zipfile.ZipFile(path) as z:
            for real in wanted:
                target = out / real
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(real) as fin, open(target, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
        return
    with tarfile.open(path, "r:*") as t:
        for m in t:
            name = m.name[2:] if m.name.startswith("./") else m.name
            if m.isfile() and name in wanted:
                target = out / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with t.extractfile(m) as fin, open(target, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)


class Fetcher:
    """Finds, downloads, checks and unpacks the raw files (see the module
    docstring for ``--from`` and ``--mirror``)."""

    def __init__(self, dest: Path, from_dir: Optional[Path], mirror: Optional[str],
                 log: Callable[[str], None], check_md5: bool = True):
        self.orig = dest / "orig"
        self.log = log
        self.from_dir = from_dir
        self.mirror = mirror
        self.check_md5 = check_md5

    def fetch(self, needs: Sequence[Need]) -> Dict[Tuple[str, Optional[str]], Path]:
        """Path of every (archive, member) in ``needs``."""
        groups: Dict[str, Tuple[Archive, List[Optional[str]]]] = {}
        for archive, member in needs:
            groups.setdefault(archive.name, (archive, []))[1].append(member)
        paths = {}
        for archive, members in groups.values():
            for member, path in self._fetch_one(archive, members).items():
                paths[(archive.name, member)] = path
        return paths

    def _fetch_one(self, archive: Archive, members: List[Optional[str]]) -> Dict[Optional[str], Path]:
        specs = [m for m in members if m is not None]
        if self.from_dir is not None and specs and archive.kind != "file":
            unpacked = {}
            for spec in specs:
                hit = next((self.from_dir / alt for alt in _alternatives(spec)
                            if (self.from_dir / alt).is_file()), None)
                if hit is None:
                    break
                unpacked[spec] = hit
            else:
                self.log(f"using the unpacked files of {archive.name} in {self.from_dir}")
                return unpacked
        if archive.kind == "gz":
            return {None: self._gunzipped(archive)}
        path = self._archive_path(archive, specs)
        if archive.kind == "file":
            return {None: path}
        out = self.orig / (archive.name + ".d")
        if out.is_dir() and all(any((out / alt).is_file() for alt in _alternatives(s)) for s in specs):
            self.log(f"{archive.name}: already unpacked, skipping")
        else:
            chosen = pick_members(archive_names(path, archive.kind), specs, str(path))
            self.log(f"unpacking {len(chosen)} file(s) of {path}")
            tmp = fresh_dir(out)
            extract_members(path, archive.kind, chosen, tmp)
            publish_dir(tmp, out)
        result = {}
        for spec in specs:
            result[spec] = next(out / alt for alt in _alternatives(spec) if (out / alt).is_file())
        return result

    def _gunzipped(self, archive: Archive) -> Path:
        """The decompressed text of a ``.gz`` file: ``--from DIR`` may hold it
        already decompressed (``DIR/NAME`` without ``.gz``); otherwise it is
        fetched as any file and decompressed once into ``orig/``."""
        plain_name = archive.name[:-3]
        if self.from_dir is not None and (self.from_dir / plain_name).is_file():
            self.log(f"using the decompressed {self.from_dir / plain_name}")
            return self.from_dir / plain_name
        path = self._archive_path(archive, [])
        out = self.orig / plain_name
        if out.is_file():
            self.log(f"{archive.name}: already decompressed, skipping")
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(out.name + ".part")
        try:
            with gzip.open(path, "rb") as fin, open(part, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        except (OSError, EOFError) as err:   # not gzip, or truncated
            part.unlink(missing_ok=True)
            raise PrepError(f"{path}: cannot decompress ({err})") from None
        except BaseException:   # Ctrl-C: no half-written file either
            part.unlink(missing_ok=True)
            raise
        part.replace(out)
        return out

    def _archive_path(self, archive: Archive, specs: List[str]) -> Path:
        if self.from_dir is not None:
            candidate = self.from_dir / archive.name
            if candidate.is_file():
                self._verify(candidate, archive, specs)
                return candidate
            release = self.from_dir / (archive.name.split("/", 1)[0] + ".tgz")
            if archive.in_release and release.is_file():
                return self._from_release(release, archive, specs)
            wanted = f"{candidate}"
            if specs and archive.kind != "file":
                more = f" and {len(specs) - 1} more" if len(specs) > 1 else ""
                wanted += (f" (or its unpacked files: {self.from_dir / _alternatives(specs[0])[0]}"
                           f"{more})")
            if archive.in_release:
                wanted += f" (or {release} holding it)"
            # a file no script can download: say where to get it
            hint = f"; {archive.manual}" if archive.url is None and archive.manual else ""
            raise PrepError(f"missing raw file: {wanted}{hint}")
        local = self.orig / archive.name
        if local.is_file():
            self.log(f"{archive.name}: already downloaded, skipping")
            return local
        if self.mirror is not None:
            url = self.mirror.rstrip("/") + "/" + archive.name
        elif archive.url is None:
            raise PrepError(f"{archive.name} cannot be downloaded automatically: {archive.manual}")
        else:
            url = archive.url
        local.parent.mkdir(parents=True, exist_ok=True)
        part = local.with_name(local.name + ".part")
        try:
            download(url, part, self.log)
            self._verify(part, archive, specs, label=url)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        part.replace(local)
        return local

    def _from_release(self, release: Path, archive: Archive, specs: List[str]) -> Path:
        """Take a per-pair archive out of a WIT3 release tarball (2014-01.tgz)."""
        local = self.orig / archive.name
        if local.is_file():
            self.log(f"{archive.name}: already taken out of {release}, skipping")
            return local
        chosen = pick_members(archive_names(release, "tar"), [archive.name], str(release))
        self.log(f"taking {archive.name} out of {release}")
        tmp = fresh_dir(self.orig / (archive.name + ".from-release"))
        extract_members(release, "tar", chosen, tmp)
        self._verify(tmp / archive.name, archive, specs)
        local.parent.mkdir(parents=True, exist_ok=True)
        (tmp / archive.name).replace(local)
        discard_dir(tmp)
        return local

    def _verify(self, path: Path, archive: Archive, specs: List[str],
                label: Optional[str] = None) -> None:
        """Non-empty, the published md5 (if any), the members needed present.
        ``label`` names the file in messages (the URL of a download)."""
        label = label or str(path)
        if path.stat().st_size == 0:
            raise PrepError(f"{label} is empty")
        if archive.md5 and self.check_md5:
            got = md5sum(path)
            if got != archive.md5:
                raise PrepError(f"{label}: md5 {got} differs from {archive.md5} published for "
                                f"{archive.url} (wrong or damaged file; --skip-checksums to "
                                "use it anyway)")
        if archive.kind in ("zip", "tar"):
            pick_members(archive_names(path, archive.kind), specs, label)


def download(url: str, target: Path, log: Callable[[str], None]) -> None:
    """Download ``url`` to ``target`` (curl, else urllib); PrepError naming
    the URL on any failure."""
    log(f"downloading {url}")
    if shutil.which("curl"):
        cmd = ["curl", "-fL", "--retry", "3", "--retry-delay", "5", "--connect-timeout", "60",
               "-o", str(target), url]
        cmd.insert(1, "--progress-bar" if sys.stderr.isatty() else "-sS")
        proc = subprocess.run(cmd, stderr=None if sys.stderr.isatty() else subprocess.PIPE,
                              text=True)
        if proc.returncode != 0:
            detail = (proc.stderr or "").strip().splitlines()
            reason = detail[-1] if detail else f"curl exit code {proc.returncode}"
            raise PrepError(f"download failed: {url} ({reason})")
    else:
        try:
            with urllib.request.urlopen(url, timeout=60) as resp, open(target, "wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
        except (OSError, ValueError) as err:
            raise PrepError(f"download failed: {url} ({err})") from None
    if not target.is_file() or target.stat().st_size == 0:
        raise PrepError(f"download failed: {url} (nothing received)")


def mirror_prefix(value: str) -> str:
    """``--mirror`` value as a URL prefix (a local directory becomes file://)."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", value):
        return value
    return Path(value).resolve().as_uri()

