"""The context-attribution page (fairseq_ctx/evaluation/attribution_page.py):
its HTML read by a parser (escaping, word joining, the marks and the top
token, no network reference, valid nesting), then opened in a real headless
Chromium, whose DOM must hold the same marks and whose screenshot must show
the page's hues, since a page that parses can still render blank."""
import copy
import html.parser
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

from fairseq_ctx.evaluation import attribution_page as page

# "And" and "the" get half the largest |score|, one positive one negative;
# "woman" the largest: shaded at full intensity and the top token.
REPORT = {
    "path": "ckpt.pt", "context_size": 1, "context": "separate input", "translation": "own",
    "metric": "kl", "threshold": {"std": 1.0, "value": 0.83}, "method": "contrastive gradient x input",
    "items": [
        {"id": 0,
         "context": [{"tokens": ["\u2581And", "\u2581the", "\u2581wo", "man", "\u2581said"],
                      "text": "And the woman said"}],
         "target_context": [],
         "source": {"tokens": ["\u2581She", "\u2581went", "</s>"], "text": "She went"},
         "target": {"tokens": ["\u2581Ella", "\u2581fue", "</s>"], "text": "Ella fue"},
         "sensitivity": {"pcxmi_bits": [1.2, 0.01, 0.0], "kl_bits": [2.3, 0.02, 0.0],
                         "argmax_changed": [True, False, False],
                         "no_context_argmax": ["\u2581\u00c9l", "\u2581fue", "</s>"]},
         "sensitive": [0],
         "attributions": [
             {"position": 0, "token": "\u2581Ella", "contrast": "\u2581\u00c9l",
              "context": [[0.45, -0.45, 0.9, 0.3, 0.0]], "target_context": [], "source": [0.1, 0.02, 0.0],
              "top": {"side": "context", "sentence": 0, "token": 2},
              "erasure": {"context": [[0.1, 0.0, 2.125, 0.5, 0.05]], "sentences": [2.4]}}]},
        {"id": 1, "context": [{"tokens": ["\u2581Hi", "."], "text": "Hi."}], "target_context": [],
         "source": {"tokens": ["\u2581Good", "bye", "</s>"], "text": "Goodbye"},
         "target": {"tokens": ["\u2581Adi", "\u00f3s", "</s>"], "text": "Adi\u00f3s"},
         "sensitivity": {"pcxmi_bits": [0.0, 0.0, 0.0], "kl_bits": [0.1, 0.0, 0.0],
                         "argmax_changed": [False, False, False],
                         "no_context_argmax": ["\u2581Adi", "\u00f3s", "</s>"]},
         "sensitive": [], "attributions": []},
    ]}


class Tree(html.parser.HTMLParser):
    """Every element with its attributes and text, and the nesting checked:
    an end tag must close the innermost open element (void elements have none)."""
    VOID = {"meta", "br", "hr", "img", "input", "link", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.elements, self.errors = [], [], []

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": "", "parents": [e["tag"] for e in self.stack],
                   "parent_classes": [e["attrs"].get("class", "") for e in self.stack]}
        self.elements.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1]["tag"] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1]['tag'] if self.stack else None}>")
            return
        self.stack.pop()

    def handle_data(self, data):
        for element in self.stack:
            element["text"] += data

    def find(self, tag=None, cls=None):
        return [e for e in self.elements if (tag is None or e["tag"] == tag)
                and (cls is None or cls in e["attrs"].get("class", "").split())]


def parse(text: str) -> Tree:
    tree = Tree()
    tree.feed(text)
    tree.close()
    assert not tree.errors, tree.errors
    assert [e["tag"] for e in tree.stack] in ([], ["html"], ["html", "body"]), tree.stack  # all closed
    return tree


def _check_page(tree: Tree):
    """What both the generated HTML and the browser's DOM must hold."""
    marks = [m for m in tree.find("mark", "sensitive")]
    assert [m["text"] for m in marks] == ["Ella"]
    assert marks[0]["attrs"]["data-position"] == "0"
    assert "KL 2.300 bits" in marks[0]["attrs"]["title"] and "without context: \u00c9l" in marks[0]["attrs"]["title"]
    top = tree.find(cls="top")
    assert [t["text"] for t in top] == ["wo"]  # the piece the report names ("▁wo" of "woman")
    assert top[0]["attrs"]["title"] == "attribution 0.9; erasure 2.125"
    # the context row of the attribution block reads as words
    rows = [e for e in tree.find("tr", "context") if "attr" in " ".join(e["parent_classes"])]
    assert len(rows) == 1 and rows[0]["text"].startswith("context -1And the woman said")
    assert "erasure of the sentence: 2.400" in rows[0]["text"]


# ---------------------------------------------------------------- the HTML

def test_page_marks_the_sensitive_token_and_the_top_context_token():
    text = page.render(REPORT, title="Attribution test")
    assert text.startswith("<!DOCTYPE html>\n") and '<meta charset="utf-8">' in text
    tree = parse(text)
    _check_page(tree)
    assert [t["text"] for t in tree.find("title")] == ["Attribution test"]
    # shading: |score| over the largest |score| (0.9), positive and negative in their hues
    spans = {s["text"]: s["attrs"] for s in tree.find("span", "tok")
             if "attr" in " ".join(s["parent_classes"]) and "data-score" in s["attrs"]}
    assert spans["And"]["style"] == "background: rgba({}, {}, {}, 0.500)".format(*page.POSITIVE_RGB)
    assert spans["the"]["style"] == "background: rgba({}, {}, {}, 0.500)".format(*page.NEGATIVE_RGB)
    assert spans["wo"]["style"] == "background: rgba({}, {}, {}, 1.000)".format(*page.POSITIVE_RGB)
    assert "style" not in spans["said"] and spans["said"]["title"] == "attribution 0.0; erasure 0.05"
    assert spans["She"]["title"] == "attribution 0.1"  # source tokens have no erasure
    assert "faint" in [e for e in tree.find("tr") if "She" in e["text"] and "context" not in e["text"]][-1][
        "attrs"]["class"]


def test_page_escapes_everything_from_the_report():
    report = copy.deepcopy(REPORT)
    item = report["items"][0]
    item["context"][0]["tokens"][1] = "\u2581<script>alert(1)</script>"
    item["target"]["tokens"][1] = "\u2581\"'&amp;<b>"
    item["attributions"][0]["contrast"] = "\u2581<img src=x onerror=alert(1)>"
    report["path"] = "</code><script>x()</script>"
    text = page.render(report, title="<i>t</i>")
    assert "<script" not in text and "<img" not in text and "<b>\"" not in text and "<i>t" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    tree = parse(text)
    assert [t["text"] for t in tree.find("title")] == ["<i>t</i>"]
    assert "\"'&amp;<b>" in [s["text"] for s in tree.find("span", "tok")]
    assert "<script>alert(1)</script>" in [s["text"] for s in tree.find("span", "tok")]


def test_subword_pieces_join_into_words():
    assert page.words(["\u2581And", "\u2581the", "\u2581wo", "man", "\u2581said", "."]) == "And the woman said."
    assert page.words(["\u2581Ella", "\u2581fue", "</s>"]) == "Ella fue </s>"
    assert page.words(["\u2581\u0416\u0435\u043d", "\u0449\u0438\u043d\u0430", "\u2581\u4e2d\u6587"]) == \
        "\u0416\u0435\u043d\u0449\u0438\u043d\u0430 \u4e2d\u6587"
    assert page.words(["the", "wo@@", "man", "said"]) == "the woman said"  # subword-nmt BPE
    assert page.pieces(["\u2581a", "\u2581", "b"]) == [(False, "a", "piece"), (True, "\u2423", "blank"),
                                                       (False, "b", "piece")]
    # no "▁" reaches the page; the pieces of a word are adjacent spans with no space between
    text = page.render(REPORT)
    assert "\u2581" not in text
    assert '<span class="tok">wo</span><span class="tok">man</span>' in text


def test_page_has_no_network_reference():
    text = page.render(REPORT)
    assert "http" not in text.lower()
    assert not re.search(r"""(src|href|url)\s*[=(]\s*["']?\s*//""", text, re.I)
    assert not re.search(r"<(script|link|img|iframe|object|embed|video|audio|source)\b", text, re.I)
    assert "@import" not in text and "url(" not in text


def test_item_without_sensitive_token_is_one_line():
    tree = parse(page.render(REPORT))
    quiet = tree.find("div", "quiet")
    assert len(quiet) == 1 and quiet[0]["attrs"]["id"] == "i1"
    assert re.fullmatch(r"#1 Goodbye </s> \u2192 Adi\u00f3s </s> \u2014 no context-sensitive token", quiet[0]["text"])
    assert len(tree.find("div", "attr")) == 1 and len(tree.find("div", "item")) == 2
    # a report where nothing is sensitive still renders, with no block at all
    report = copy.deepcopy(REPORT)
    report["items"] = report["items"][1:]
    tree = parse(page.render(report))
    assert not tree.find("mark", "sensitive") and not tree.find("div", "attr") and len(tree.find("div", "quiet")) == 1


def test_target_context_rows_and_a_source_top_token():
    report = copy.deepcopy(REPORT)
    item = report["items"][0]
    item["target_context"] = [{"tokens": ["\u2581Y", "\u2581la", "\u2581mujer"], "text": "Y la mujer"}]
    attr = item["attributions"][0]
    attr["target_context"] = [[0.0, 0.2, 0.4]]
    attr["top"] = {"side": "source", "token": 0}
    attr["source"] = [1.8, 0.0, 0.0]
    tree = parse(page.render(report))
    rows = [e for e in tree.find("tr", "target-context") if "attr" in " ".join(e["parent_classes"])]
    assert len(rows) == 1 and rows[0]["text"].startswith("target context -1Y la mujer")
    assert [t["text"] for t in tree.find(cls="top")] == ["She"]
    spans = {s["text"]: s["attrs"] for s in tree.find("span", "tok") if "data-score" in s["attrs"]}
    assert spans["mujer"]["style"] == "background: rgba({}, {}, {}, 0.222)".format(*page.POSITIVE_RGB)  # 0.4/1.8


def test_a_contrastive_items_heading_names_its_class_and_verdicts():
    report = copy.deepcopy(REPORT)
    report["items"][0].update(meta={"class": "feminine"}, scored_right={"true": True, "none": False,
                                                                          "shuffled": True, "random": False})
    report["items"][1].update(meta={"class": "masculine"}, scored_right={"true": False, "none": False})
    tree = parse(page.render(report))
    assert tree.find("h2")[0]["text"] == "#0 \u00b7 class feminine \u00b7 scored right with true, shuffled context"
    assert tree.find("div", "quiet")[0]["text"].startswith(
        "#1 \u00b7 class masculine \u00b7 scored wrong under every context condition Goodbye")


def test_write(tmp_path):
    path = page.write(REPORT, tmp_path / "page.html")
    assert path.read_text(encoding="utf-8") == page.render(REPORT)


# ---------------------------------------------------------------- a real browser

def _chromium():
    """The headless browser and the flags that make it headless, or None."""
    for name in ("chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell"):
        found = shutil.which(name)
        if found:
            return [found]
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return [found, "--headless"]
    return None


def _decode_png(data: bytes) -> np.ndarray:
    """The (height, width, 3) RGB pixels of an 8-bit, non-interlaced RGB or
    RGBA PNG (what Chromium writes), with zlib alone, for when PIL is absent."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 3 if colour == 2 else 4
    stride = width * channels
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:]
        if kind == 0:  # None
            out[y] = line
        elif kind == 1:  # Sub: a running sum of each channel along the row
            out[y] = (line.reshape(width, channels).cumsum(axis=0, dtype=np.uint64) % 256).astype(np.uint8).ravel()
        elif kind == 2:  # Up
            out[y] = line + previous
        else:  # Average, Paeth: each byte needs the one decoded before it
            row, up = bytearray(line.tobytes()), previous.tobytes()
            for i in range(stride):
                a = row[i - channels] if i >= channels else 0
                b = up[i]
                if kind == 3:
                    row[i] = (row[i] + (a + b) // 2) & 255
                else:
                    c = up[i - channels] if i >= channels else 0
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            out[y] = np.frombuffer(bytes(row), dtype=np.uint8)
        previous = out[y]
    return out.reshape(height, width, channels)[:, :, :3]


def _pixels(path: Path) -> np.ndarray:
    """The screenshot's (height, width, 3) RGB pixels: PIL's where installed, else :func:`_decode_png`."""
    try:
        from PIL import Image
    except ImportError:
        return _decode_png(path.read_bytes())
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def _encode_png(pixels: np.ndarray) -> bytes:
    """An RGB PNG whose rows cycle through the five filter types (0-4)."""
    height, width, _ = pixels.shape
    data = pixels.astype(int).reshape(height, width * 3)
    lines = []
    for y in range(height):
        kind, row = y % 5, data[y]
        up = data[y - 1] if y else np.zeros_like(row)
        left = np.concatenate([[0, 0, 0], row[:-3]])
        up_left = np.concatenate([[0, 0, 0], up[:-3]])
        if kind == 4:
            pa, pb, pc = np.abs(up - up_left), np.abs(left - up_left), np.abs(left + up - 2 * up_left)
            guess = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, up_left))
        else:
            guess = [np.zeros_like(row), left, up, (left + up) // 2][kind]
        lines.append(bytes([kind]) + ((row - guess) % 256).astype(np.uint8).tobytes())

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(lines))) + chunk(b"IEND", b""))


def test_png_decoder(tmp_path):
    """The fallback decoder on every filter type, and against PIL where installed."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:60, 0:70]
    pixels = np.stack([x * 3, y * 4, (x * y) % 256], axis=-1).astype(np.uint8)
    pixels[20:40] = rng.integers(0, 256, size=(20, 70, 3), dtype=np.uint8)
    assert np.array_equal(_decode_png(_encode_png(pixels)), pixels)
    try:
        from PIL import Image
    except ImportError:
        return
    for mode in ("RGB", "RGBA"):
        path = tmp_path / f"{mode}.png"
        Image.fromarray(pixels).convert(mode).save(path)
        assert np.array_equal(_decode_png(path.read_bytes()), pixels)


def _over_white(rgb, alpha):
    return tuple(round(c * alpha + 255 * (1 - alpha)) for c in rgb)


def _count(pixels: np.ndarray, rgb, tolerance=4) -> int:
    return int((np.abs(pixels.astype(int) - np.array(rgb)).max(axis=-1) <= tolerance).sum())


def test_page_in_a_headless_browser(tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no headless Chromium: install the Debian package chromium-headless-shell "
                    "(bash scripts/install.sh does, as root)")
    path = page.write(REPORT, tmp_path / "page.html")
    flags = browser + ["--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                       "--force-device-scale-factor=1", "--window-size=1200,900",
                       f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "page.png"
    # one start for both (Chromium 156's headless shell does both); a second for the
    # screenshot where a browser does only one
    dom = subprocess.run(flags + ["--dump-dom", f"--screenshot={shot}", path.as_uri()], capture_output=True,
                         text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    _check_page(parse(dom.stdout))  # the DOM as the browser built it, not the file as written
    if not shot.exists():
        run = subprocess.run(flags + [f"--screenshot={shot}", path.as_uri()], capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    pixels = _pixels(shot)
    height, width, _ = pixels.shape
    assert (width, height) == (1200, 900)
    colours = np.unique((pixels.astype(np.uint32) << np.array([16, 8, 0], dtype=np.uint32)).sum(axis=-1))
    assert len(colours) > 16, "blank screenshot"
    # the white page, the mark's yellow, and the shading at full and half intensity in both hues
    # (half intensity is only in the token shading: the legend's swatches are at full intensity)
    assert _count(pixels, (255, 255, 255)) > width * height // 2
    assert _count(pixels, page.MARK_RGB) > 100
    assert _count(pixels, page.POSITIVE_RGB) > 100
    assert _count(pixels, _over_white(page.POSITIVE_RGB, 0.5)) > 100
    assert _count(pixels, _over_white(page.NEGATIVE_RGB, 0.5)) > 100
