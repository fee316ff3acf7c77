"""A contrastive set where the previous verse, not the current one, decides
the answer: third-person singular pronoun gender (he/she) in English verses
whose Spanish gives no gender cue about the pronoun's referent, with
balanced classes so that a model that ignores context scores 0.5.

Why: the study's first pronoun set (``fairseq_ctx.study.pronouns``) has 188
masculine and 18 feminine groups, and in 8 of the 18 the current Spanish
verse marks the gender itself; a model that always says "he" scores 0.913,
so no model can show context use on it.  This set keeps
only items the current verse provably cannot decide under a stated rule,
and as many feminine items as masculine ones.

Items.  A consecutive verse pair (previous, current) of one chapter (the
corpus's documents) qualifies when

* the current English verse has third-person singular pronouns of exactly
  one gender (``pronouns.gender``: he/him/his/himself or
  she/her/hers/herself), and flipping them (``pronouns.flip``) changes it;
* the previous English verse has gender cues of that gender and none of the
  other: its pronouns (as above) or a singular gendered noun from
  ``ENGLISH_NOUNS`` (woman, wife, daughter, queen, widow ...; man, husband,
  son, king ...) or a name of known gender (Sarah, Hannah ...; David ...).  The nouns widen the phenomenon beyond the first set,
  whose previous verse had to contain a pronoun ("Hannah wept." followed by
  "She said ..." qualifies here) and singular names from ``ENGLISH_NAMES``; a previous verse with cues of both
  genders does not decide, and is left out;
* the current SPANISH verse passes the current-verse check below.

The contrast flips every pronoun of the current English verse to the other
gender; the previous verse stays as it is in both candidates.

The current-verse check.  The Spanish current verse must contain no word
that marks the item's gender for a person or personified thing, whatever
it refers to (we cannot resolve reference, so any such word could be about
the pronoun's referent; rejecting all of them is the conservative side).
A word marked for the other gender cannot be about the referent and is
allowed (a feminine item may say "Jesús" or "hombre").  It rejects an item
whose verse has, in the item's gender (the reason names in the counts in
brackets):

* [pronoun] a gendered third-person or demonstrative pronoun: él, ella,
  ellos, ellas, suyo/suya(s), mismo/misma(s), the accented demonstrative
  pronouns (éste, ésta, ése, ésa, aquél, aquélla and plurals; the
  corpus's Reina-Valera spelling accents the pronouns, not the
  determiners), and the relative "el/la/los/las cual(es)", which agrees
  with its antecedent;
* [clitic] an object clitic lo/la/los/las before a verb, or attached to
  one (tomóla, sacadla, matarlo, dióselo).  "la"/"los"/"las" are also
  articles; a word is taken as a verb when the corpus has it right after
  a reflexive or dative clitic (se/le/les/me/te/nos/os), which precede
  only verbs; an attached clitic counts when the rest of the word is such
  a verb, an infinitive (-r), a gerund (-ndo) or a plural imperative (-d);
  a separate clitic counts only before such a verb;
* [noun] a noun with natural gender from ``SPANISH_NOUNS`` (hombre,
  varón, mujer, rey, reina, hijo, hija, padre, madre, hermano, hermana,
  siervo, sierva, señor, señora, marido, viuda, ramera, ... and Dios,
  Jehová), or one of the nouns the Bible personifies as "she"/"he"
  (ciudad, sabiduría, nación, pueblo, tierra);
* [name] a proper name: a word capitalised anywhere but at the start of a
  sentence in the verse, or one that the Spanish corpus (every split)
  capitalises in at least half of its non-initial occurrences (names at
  the start of a verse); a name counts for both genders unless
  ``SPANISH_NAMES`` gives its bearer's (Jehová, David ...; Sara, Rebeca ...);
* [agreement] a gender-inflected word that could agree with a dropped
  subject or object ("fué sanada", "estaba sentado", "hermosa"): a
  participle (-ado/-ido and irregular ones, in either gender and number,
  whose other-gender form occurs in the corpus) except the masculine
  singular right after a form of haber (the invariant perfect: "había
  dicho"); any word ending in -o/-a(s) whose other-gender form occurs in
  the corpus, right after a copula or degree word (es, era, fué, está,
  muy, tan ...) and not itself a verb; an adjective of ``ADJECTIVES``
  anywhere.  Determiners that agree with the noun they precede
  (``AGREES_WITH_NOUN``) never count;
* [semantic] a word whose meaning carries the gender: parir (gave birth),
  concebir, preñada, encinta, amamantar, estéril, menstruo; circuncidar.

What the check cannot see, so that "provably" means "under this rule":
gender-inflected adjectives outside the list in attributive position or
away from a copula ("vino llorosa"), and those whose other form never
occurs in the corpus;
gendered nouns missing from the lists; names that the corpus spells in
lowercase; world knowledge (a verse about a throne is probably about a
king) and target-side cues in the English verse that have no Spanish
counterpart.  Grammatical gender of inanimate nouns (la casa, el altar) is
not rejected: English has no grammatical gender, so it decides the
English pronoun only through personification, which the listed nouns
cover for the common cases (cities, nations, the land, wisdom).

Sources.  The test chapters first, then the validation chapters, then
chapters held out from the training split: training chapters are visited
in a fixed pseudo-random order (by the SHA-1 of the chapter id, so the
extra chapters are a sample of the Bible rather than its most feminine
books) and a chapter is held out when it contributes an item to a class
still short of ``--min-per-class``.  Every study run must then be trained
without those chapters: the command writes their ids
(``heldout_chapters.txt``) and ``drop_chapters`` (or ``--filter-train
DIR``) writes the training split without them.  When even the whole
corpus cannot fill a class, no set is written: counts.json says how many
each source gives and the command stops with one error line, rather than
shrink the bar.  On the Bible (``benchmarks/study-bible-context-set.json``)
that is the case: test gives 16 masculine and 2 feminine items, valid 6
and 1, all of train 820 and 41; only 93 verses of the whole corpus have
feminine pronouns and pass the check at all, so he/she gender cannot give
100 feminine items under this check on this corpus.

Balance.  Each class keeps the same number of items, the smaller class's
count: the larger class is down-sampled deterministically, keeping the
test chapters' items first, then the validation chapters', then the
held-out training chapters', each in SHA-1 order of ``docid:line``.  The
true candidate is first for the even-numbered and second for the
odd-numbered items of each class, so neither a class nor a position
predicts the answer: a model that ignores context scores 0.5.

Output (``--out DIR``), in the Voita format the study scores
(``fairseq_ctx.study.evaluate.contrastive`` with ``set_dir=DIR``):
``pronouns.src``/``pronouns.dst`` (two candidates per group, ``previous
_eos current``) and ``pronouns.json`` (``dst``, ``true_ind``, and per
item: ``class``, ``source``, ``docid``, ``line`` (1-based in its split),
``where``, ``check`` (``"pass"``: the current Spanish verse's outcome) and
``previous_es_cues`` (the reasons the same check finds, in the item's
gender, in the previous Spanish verse: whether the source context the
study's models see marks the gender; the previous English verse always
does));
``heldout_chapters.txt`` and ``counts.json`` (per source and class: the
candidates, the rejections by reason, the items kept).  Same input, same
bytes.

    python3 -m fairseq_ctx.study.context_set --raw data/bible/raw --out DIR [--min-per-class 100]
"""
import argparse
import hashlib
import json
import os
import re
import sys
import unicodedata
from collections import Counter
from typing import Dict, List, Optional, Sequence, Set, Tuple

from fairseq_ctx.study.pronouns import _read, flip, gender, words, write_voita

CLASSES = ("masculine", "feminine")
SOURCES = ("test", "valid", "train")

M, F = CLASSES
SPANISH_PRONOUNS = {
    **dict.fromkeys(("él", "ellos", "suyo", "suyos", "mismo", "mismos", "éste", "éstos", "ése", "ésos", "aquél",
                     "aquéllos"), M),
    **dict.fromkeys(("ella", "ellas", "suya", "suyas", "misma", "mismas", "ésta", "éstas", "ésa", "ésas", "aquélla",
                     "aquéllas"), F),
}
_RELATIVE_ARTICLES = {"el": M, "los": M, "del": M, "al": M, "la": F, "las": F}  # + cual(es)
CLITICS = {"los": M, "las": F, "lo": M, "la": F}  # longest first: "matarlos" is matar + los
_OTHER_CLITICS = ("nos", "les", "se", "me", "te", "le", "os")  # before a gendered one: "dióselo"
_VERB_CUES = {"se", "le", "les", "me", "te", "nos", "os"}  # always followed by a verb


def _forms(cls: str, *bases: str) -> Dict[str, str]:
    """Each noun in the singular and its plural(s), with its gender."""
    out = {}
    for b in bases:
        out.update(dict.fromkeys((b, b + "s", b + "es"), cls))
    return out


SPANISH_NOUNS = {
    **_forms(M, "hombre", "varón", "varone", "rey", "hijo", "padre", "hermano", "siervo", "criado", "señor",
             "esposo", "marido", "muchacho", "mozo", "mancebo", "niño", "príncipe", "profeta", "sacerdote",
             "levita", "amo", "tío", "abuelo", "nieto", "suegro", "yerno", "cuñado", "viudo", "dios", "jehová",
             "eunuco", "novio", "primogénito", "caballero", "pastor", "esclavo",
             "pueblo"),  # personified as "he" (Israel, the people)
    **_forms(F, "mujer", "reina", "hija", "madre", "hermana", "sierva", "criada", "señora", "esposa", "muchacha",
             "moza", "doncella", "virgen", "vírgene", "niña", "princesa", "profetisa", "ama", "tía", "abuela",
             "nieta", "suegra", "nuera", "cuñada", "viuda", "ramera", "concubina", "nodriza", "partera", "diosa",
             "novia", "primogénita", "dama", "pastora", "esclava",
             "ciudad", "sabiduría", "nación", "tierra"),  # personified as "she" (Zion, Babylon, wisdom)
}
SEMANTIC_PREFIXES = {F: ("pari", "pare", "concib", "conceb", "preñ", "encinta", "amamant", "estéril", "menstru"),
                     M: ("circunci", "barba")}
# proper names whose bearer's gender is certain (any other name counts for both genders)
SPANISH_NAMES = {
    **dict.fromkeys(("jehová", "dios", "jesús", "cristo", "david", "saúl", "salomón", "abraham", "abram", "jacob",
                     "isaac", "esaú", "moisés", "aarón", "pedro", "pablo", "faraón", "booz", "elías", "eliseo",
                     "josé", "josué", "samuel", "labán", "lot", "jehú", "elcana", "juan", "herodes", "pilato",
                     "jonathán", "absalom", "joab", "balaam", "gedeón", "daniel", "jeremías", "isaías",
                     "nabucodonosor", "ciro", "darío", "amán"), M),
    **dict.fromkeys(("sara", "sarai", "rebeca", "lea", "maría", "marta", "ruth", "noemi", "esther", "ana", "débora",
                     "dalila", "jezabel", "abigail", "thamar", "dina", "agar", "rahab", "elisabet", "eva", "priscila",
                     "lidia", "herodías"), F),
}
ENGLISH_NAMES = {
    M: {"abraham", "abram", "isaac", "jacob", "moses", "aaron", "david", "saul", "solomon", "jesus", "peter",
        "paul", "joseph", "joshua", "samuel", "elijah", "elisha", "laban", "boaz", "pharaoh", "esau", "john",
        "herod", "pilate", "jonathan", "absalom", "joab", "balaam", "gideon", "daniel", "jeremiah", "isaiah",
        "nebuchadnezzar", "cyrus", "darius", "haman", "jehu", "elkanah", "god", "yahweh"},
    F: {"sarah", "sarai", "rebekah", "rachel", "leah", "mary", "martha", "ruth", "naomi", "esther", "hannah",
        "deborah", "delilah", "jezebel", "abigail", "bathsheba", "tamar", "dinah", "hagar", "michal", "rahab",
        "miriam", "elizabeth", "eve", "zilpah", "bilhah", "orpah", "vashti", "jael", "huldah", "priscilla",
        "lydia", "tabitha", "dorcas", "sapphira", "herodias", "peninnah", "keturah", "milcah", "zipporah",
        "abishag", "rizpah", "merab", "zeruiah", "adah", "basemath", "achsah", "ahinoam"},
}
# gender-inflected adjectives the Bible predicates of people (masculine singular; -a, -os, -as added)
ADJECTIVES = ("bueno", "malo", "santo", "hermoso", "solo", "viejo", "anciano", "limpio", "inmundo", "justo",
              "sabio", "rico", "vivo", "enfermo", "lleno", "contento", "desnudo", "seguro", "puro", "pequeño", "alto",
              "nuevo", "ciego", "cojo", "sordo", "mudo", "leproso", "hambriento", "sediento", "gordo", "flaco",
              "dichoso", "piadoso", "malvado", "perverso", "necio", "loco", "cuerdo", "honrado", "extraño", "ajeno",
              "primero", "postrero", "único", "cautivo", "impío", "fiel", "querido", "amado", "bienaventurado",
              "bendito", "maldito", "hebreo", "extranjero", "forastero", "moabita", "egipcio")
IRREGULAR_PARTICIPLES = ("muert", "puest", "vuelt", "abiert", "cubiert", "escrit", "vist", "rot", "hech", "dich",
                         "suelt", "pres", "satisfech", "deshech", "compuest", "dispuest", "expuest", "envuelt",
                         "descubiert", "encubiert", "bendit", "maldit", "hart", "contrit")
_PARTICIPLE_RE = re.compile(r"(.+(?:ad|id|íd)|" + "|".join(IRREGULAR_PARTICIPLES) + r")([oa])(s?)")
COPULAS = {"es", "era", "eras", "fué", "fue", "fuí", "será", "serás", "sea", "seas", "fuese", "fuera", "fueres",
           "fuere", "está", "estás", "estaba", "estuvo", "estará", "esté", "quedó", "queda", "quedará", "parece",
           "siendo", "estando", "ser", "estar", "muy", "tan", "más", "harto", "cuán", "cuan"}
# determiners, quantifiers, numerals and possessives ending in -o/-a: they
# agree with the noun they precede, not with a dropped subject
AGREES_WITH_NOUN = {
    w + e for w in ("tod", "otr", "much", "poc", "tant", "cuant", "nuestr", "vuestr", "algun", "ningun", "un",
                    "ciert", "primer", "segund", "tercer", "cuart", "quint", "sext", "séptim", "octav",
                    "noven", "décim", "postrer", "propi", "doscient", "trescient", "cuatrocient", "quinient",
                    "seiscient", "setecient", "ochocient", "novecient", "vari", "divers", "demasiad", "amb", "entramb")
    for e in ("o", "a", "os", "as")
} | {"la", "las", "lo", "los", "una", "unas", "uno", "unos", "esta", "estas", "esto", "estos", "esa", "esas", "eso",
     "esos", "aquella", "aquellas", "aquello", "aquellos", "cuya", "cuyas", "cuyo", "cuyos", "nosotros", "nosotras", "vosotros", "vosotras"}
HABER = {"he", "has", "ha", "hemos", "habéis", "han", "había", "habías", "habíamos", "habíais", "habían", "hube",
         "hubo", "hubimos", "hubieron", "habré", "habrá", "habrás", "habremos", "habrán", "habría", "habrían",
         "haya", "hayas", "hayan", "hayamos", "hubiera", "hubieran", "hubiese", "hubiesen", "hubiere", "hubieres",
         "hubieren", "haber", "habiendo", "hubieras", "hubiésemos", "hayáis", "habíais", "habréis", "hubisteis"}
ENGLISH_NOUNS = {
    "feminine": {"woman", "wife", "daughter", "mother", "sister", "queen", "maid", "maiden", "virgin", "widow",
                 "prostitute", "harlot", "concubine", "handmaid", "bride", "girl", "lady", "mistress", "midwife",
                 "nurse", "princess", "prophetess"},
    "masculine": {"man", "husband", "son", "father", "brother", "king", "prince", "boy", "bridegroom", "lord",
                  "eunuch", "nephew"},
}
_TOKEN_RE = re.compile(r"[A-Za-zÁÉÍÓÚÜÑáéíóúüñ]+")
_SENTENCE_START = set(".!?:;¿¡«“\"(")


def _plain(word: str) -> str:
    """``word`` without accents (the corpus's old spelling accents enclitic verbs: tomóla)."""
    return "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")


def _tokens(line: str) -> List[Tuple[str, bool]]:
    """(word, starts a sentence) for each word of a Spanish line."""
    return [(word, initial) for word, initial, _ in _spans(line)]


def _spans(line: str) -> List[Tuple[str, bool, Tuple[int, int]]]:
    """(word, starts a sentence, its character span) for each word of a Spanish line."""
    out = []
    for m in _TOKEN_RE.finditer(line):
        before = line[:m.start()].rstrip()
        out.append((m.group(), not before or before[-1] in _SENTENCE_START, m.span()))
    return out


class Lexicon:
    """What the check learns from the Spanish corpus: proper names (words
    capitalised in at least half of their non-initial occurrences), verbs
    (words seen right after se/le/les/me/te/nos/os, accents removed) and the
    vocabulary (for the other-gender form of a word)."""

    def __init__(self, spanish_lines: Sequence[str]):
        capital, lower = Counter(), Counter()
        self.verbs: Set[str] = set()
        self.vocabulary: Set[str] = set()
        for line in spanish_lines:
            toks = _tokens(line)
            for k, (tok, initial) in enumerate(toks):
                low = tok.lower()
                self.vocabulary.add(low)
                if not initial:
                    (capital if tok[0].isupper() else lower)[low] += 1
                if low in _VERB_CUES and k + 1 < len(toks):
                    self.verbs.add(_plain(toks[k + 1][0].lower()))
        self.names = {w for w in capital if capital[w] >= lower[w]}

    def is_verb(self, stem: str) -> bool:
        p = _plain(stem)
        return p in self.verbs or p.endswith(("ar", "er", "ir", "ndo", "d"))


def spanish_cues(line: str, lex: Lexicon) -> Dict[str, List[str]]:
    """The current-verse check's findings in the Spanish ``line``: for each
    gender, the reasons (sorted, see the module docstring) why the line may
    mark a referent of that gender; a name counts for both."""
    return {c: sorted({reason for _, reason in found}) for c, found in spanish_cue_spans(line, lex).items()}


def spanish_cue_spans(line: str, lex: Lexicon) -> Dict[str, List[Tuple[Tuple[int, int], str]]]:
    """Where :func:`spanish_cues` finds them: for each gender, the character
    span of every word of ``line`` that may mark a referent of that gender,
    with its reason, in the order of the line (a clitic attached to a verb
    marks the whole word)."""
    toks = _spans(line)
    low = [t.lower() for t, _, _ in toks]
    found = {c: [] for c in CLASSES}

    def add(cls, span, reason):
        if (span, reason) not in found[cls]:
            found[cls].append((span, reason))

    for k, ((tok, initial, span), w) in enumerate(zip(toks, low)):
        nxt = low[k + 1] if k + 1 < len(low) else ""
        prev = low[k - 1] if k else ""
        if w in SPANISH_PRONOUNS:
            add(SPANISH_PRONOUNS[w], span, "pronoun")
        if w in ("cual", "cuales") and prev in _RELATIVE_ARTICLES:
            add(_RELATIVE_ARTICLES[prev], span, "pronoun")
        if w in CLITICS and _plain(nxt) in lex.verbs and nxt not in AGREES_WITH_NOUN:
            add(CLITICS[w], span, "clitic")
        for clitic in CLITICS:
            if w.endswith(clitic) and len(w) > len(clitic) + 1:
                stem = w[:-len(clitic)]
                for other in _OTHER_CLITICS:
                    if stem.endswith(other) and len(stem) > len(other) + 1:
                        stem = stem[:-len(other)]
                        break
                if lex.is_verb(stem) and w not in AGREES_WITH_NOUN:
                    add(CLITICS[clitic], span, "clitic")
                break
        if w in SPANISH_NOUNS:
            add(SPANISH_NOUNS[w], span, "noun")
        if (tok[0].isupper() and not initial) or w in lex.names:
            for c in ((SPANISH_NAMES[w],) if w in SPANISH_NAMES else CLASSES):
                add(c, span, "name")
        if w.startswith(SEMANTIC_PREFIXES["feminine"]):
            add("feminine", span, "semantic")
        if w.startswith(SEMANTIC_PREFIXES["masculine"]):
            add("masculine", span, "semantic")
        m = re.fullmatch(r"(.+)([oa])(s?)", w)
        if m and w not in AGREES_WITH_NOUN and w not in CLITICS:
            cls = M if m.group(2) == "o" else F
            other = m.group(1) + ("a" if cls == M else "o") + m.group(3)
            participle = _PARTICIPLE_RE.fullmatch(w) and other in lex.vocabulary
            perfect = participle and cls == M and not m.group(3) and prev in HABER
            predicative = prev in COPULAS and other in lex.vocabulary and _plain(w) not in lex.verbs
            adjective = m.group(1) + "o" in ADJECTIVES or (m.group(1) in ADJECTIVES and cls == M)
            if (participle and not perfect) or predicative or adjective:
                add(cls, span, "agreement")
    return found


def english_gender(line: str) -> Optional[str]:
    """The gender of the English ``line``'s cues (pronouns, ``ENGLISH_NOUNS``)
    when all are of one gender, else None."""
    ws = set(words(line))
    found = {g for g in CLASSES if ws & (ENGLISH_NOUNS[g] | ENGLISH_NAMES[g])}
    pronoun = gender(line)
    if pronoun:
        found.add(pronoun)
    elif any(ws & set(p) for p in (("he", "him", "his", "himself"), ("she", "her", "hers", "herself"))):
        return None  # pronouns of both genders
    return found.pop() if len(found) == 1 else None


def mine(es: Sequence[str], en: Sequence[str], docids: Sequence[str], source: str,
         lex: Lexicon) -> Tuple[List[Dict], Dict[str, Counter]]:
    """The qualifying items of one split, and per class the candidates (pairs
    that pass the English conditions) and the check's rejections by reason
    (an item counts under each reason it has)."""
    if not len(es) == len(en) == len(docids):
        raise ValueError(f"{source}: {len(es)} Spanish, {len(en)} English lines and {len(docids)} docids")
    items, stats = [], {c: Counter() for c in CLASSES}
    for i in range(1, len(en)):
        if docids[i] != docids[i - 1]:
            continue
        cls = gender(en[i])
        if cls is None or english_gender(en[i - 1]) != cls:
            continue
        contrast = flip(en[i])
        if contrast == en[i]:
            continue
        stats[cls]["candidates"] += 1
        reasons = spanish_cues(es[i], lex)[cls]
        for r in reasons:
            stats[cls]["rejected:" + r] += 1
        if reasons:
            stats[cls]["rejected"] += 1
            continue
        stats[cls]["passed"] += 1
        items.append({"class": cls, "source": source, "docid": docids[i], "line": i + 1,
                      "where": f"{source}:{i + 1}", "check": "pass",
                      "previous_es_cues": spanish_cues(es[i - 1], lex)[cls],
                      "src": es[i], "src_prev": es[i - 1], "ref": en[i], "ref_prev": en[i - 1], "contrast": contrast})
    return items, stats


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def select_chapters(items: Sequence[Dict], need: Dict[str, int]) -> List[str]:
    """Training chapters to hold out, in SHA-1 order of their ids: each one
    that gives an item to a class still short of ``need`` (mutated)."""
    by_doc: Dict[str, Counter] = {}
    for item in items:
        by_doc.setdefault(item["docid"], Counter())[item["class"]] += 1
    chosen = []
    for doc in sorted(by_doc, key=lambda d: (_key(d), d)):
        if not any(need[c] > 0 for c in CLASSES):
            break
        if any(by_doc[doc][c] > 0 and need[c] > 0 for c in CLASSES):
            chosen.append(doc)
            for c in CLASSES:
                need[c] -= by_doc[doc][c]
    return chosen


def balance(items: Sequence[Dict]) -> List[Dict]:
    """Each class down to the smaller class's count (test items first, then
    valid, then train, each in SHA-1 order of docid:line); returned in
    source and line order."""
    n = min(sum(1 for i in items if i["class"] == c) for c in CLASSES)
    rank = {s: k for k, s in enumerate(SOURCES)}
    kept = []
    for c in CLASSES:
        mine_c = sorted((i for i in items if i["class"] == c),
                        key=lambda i: (rank[i["source"]], _key(f"{i['docid']}:{i['line']}")))
        kept += mine_c[:n]
    return sorted(kept, key=lambda i: (rank[i["source"]], i["line"]))


def true_indices(items: Sequence[Dict]) -> List[int]:
    """0 for the even-numbered items of each class, 1 for the odd ones."""
    seen, out = Counter(), []
    for item in items:
        out.append(seen[item["class"]] % 2)
        seen[item["class"]] += 1
    return out


def drop_chapters(raw_dir: str, split: str, chapters: Sequence[str], out_dir: str) -> Dict[str, int]:
    """Write ``out_dir/{split}.{es,en,docids}``: the split without the verses
    of ``chapters`` (the study's training data once the context set holds
    them out).  Returns the lines kept and dropped."""
    base = os.path.join(raw_dir, split)
    es, en, docids = _read(base + ".es"), _read(base + ".en"), _read(base + ".docids")
    if not len(es) == len(en) == len(docids):
        raise ValueError(f"{base}.*: {len(es)} Spanish, {len(en)} English lines and {len(docids)} docids")
    drop = set(chapters)
    keep = [k for k, d in enumerate(docids) if d not in drop]
    os.makedirs(out_dir, exist_ok=True)
    for ext, lines in (("es", es), ("en", en), ("docids", docids)):
        with open(os.path.join(out_dir, f"{split}.{ext}"), "w", encoding="utf-8") as f:
            f.writelines(lines[k] + "\n" for k in keep)
    return {"kept": len(keep), "dropped": len(docids) - len(keep)}


class ContextSetError(Exception):
    pass


def _splits(raw_dir: str) -> Dict[str, Tuple[List[str], List[str], List[str]]]:
    """(Spanish, English, docids) lines of each split the set is mined from."""
    out = {}
    for split in SOURCES:
        base = os.path.join(raw_dir, split)
        out[split] = (_read(base + ".es"), _read(base + ".en"), _read(base + ".docids"))
    return out


def lexicon_of(raw_dir: str) -> Lexicon:
    """The lexicon the set was built with: learnt from every split's Spanish."""
    return Lexicon([line for es, _, _ in _splits(raw_dir).values() for line in es])


def build(raw_dir: str, out_dir: str, min_per_class: int = 100) -> Dict:
    """Mine, hold out training chapters as needed, balance, write the set
    (see the module docstring); returns the counts written to counts.json."""
    data = _splits(raw_dir)
    lex = Lexicon([line for split in SOURCES for line in data[split][0]])
    mined = {split: mine(*data[split], split, lex) for split in SOURCES}
    items = mined["test"][0] + mined["valid"][0]
    need = {c: min_per_class - sum(1 for i in items if i["class"] == c) for c in CLASSES}
    heldout = select_chapters(mined["train"][0], need)
    items += [i for i in mined["train"][0] if i["docid"] in set(heldout)]
    short = {c: n for c, n in need.items() if n > 0}
    kept = [] if short else balance(items)
    if not short:
        write_voita(kept, true_indices(kept), out_dir,
                    ("class", "source", "docid", "line", "where", "check", "previous_es_cues"))
    held = set(heldout)
    sources = {}
    for split in SOURCES:
        split_items, stats = mined[split]
        chapters = sorted(set(data[split][2]) & held) if split == "train" else sorted(set(data[split][2]))
        entry = {"chapters": len(chapters), "verses": sum(1 for d in data[split][2] if d in set(chapters)),
                 "by_class": {}}
        for c in CLASSES:
            row = {k: stats[c][k] for k in sorted(stats[c])}
            if split == "train":  # the whole split's yield, then what the held-out chapters give
                row["passed_in_heldout_chapters"] = sum(1 for i in split_items
                                                        if i["class"] == c and i["docid"] in held)
            row["kept"] = sum(1 for i in kept if i["class"] == c and i["source"] == split)
            entry["by_class"][c] = row
        sources[split] = entry
    counts = {"min_per_class": min_per_class, "groups": len(kept),
              "by_class": {c: sum(1 for i in kept if i["class"] == c) for c in CLASSES},
              "available": {c: sum(1 for i in items if i["class"] == c) for c in CLASSES},
              "short": short,
              "kept_with_previous_es_cue": {c: sum(1 for i in kept if i["class"] == c and i["previous_es_cues"])
                                            for c in CLASSES},
              "sources": sources, "heldout_train_chapters": heldout,
              "lexicon": {"names": len(lex.names), "verbs": len(lex.verbs)}}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "heldout_chapters.txt"), "w", encoding="utf-8") as f:
        f.writelines(d + "\n" for d in heldout)
    with open(os.path.join(out_dir, "counts.json"), "w", encoding="utf-8") as f:
        json.dump(counts, f, ensure_ascii=False, indent=1)
        f.write("\n")
    if short:
        raise ContextSetError(f"--min-per-class {min_per_class}: the whole corpus in {raw_dir} gives "
                              f"{counts['available']} items (short by {short}); no set written, counts in "
                              f"{os.path.join(out_dir, 'counts.json')}")
    return counts


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--raw", required=True, help="the corpus's raw/ directory ({test,valid,train}.es/.en/.docids)")
    p.add_argument("--out", required=True, help="directory for pronouns.{src,dst,json}, heldout_chapters.txt, "
                                                "counts.json")
    p.add_argument("--min-per-class", type=int, default=100,
                   help="items each class must reach; training chapters are held out until it does")
    p.add_argument("--filter-train", metavar="DIR",
                   help="also write the training split without the held-out chapters to DIR/train.{es,en,docids}")
    opts = p.parse_args(argv)
    if opts.min_per_class < 1:
        p.error(f"--min-per-class {opts.min_per_class}: must be at least 1")
    for split in SOURCES:
        for ext in ("es", "en", "docids"):
            path = os.path.join(opts.raw, f"{split}.{ext}")
            if not os.path.isfile(path):
                p.error(f"--raw {opts.raw}: missing {path}")
    try:
        counts = build(opts.raw, opts.out, opts.min_per_class)
        if opts.filter_train:
            counts["filtered_train"] = drop_chapters(opts.raw, "train", counts["heldout_train_chapters"],
                                                     opts.filter_train)
    except (ContextSetError, ValueError) as e:
        print(f"fairseq_ctx: error: {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({k: counts[k] for k in ("groups", "by_class")}
                     | {"heldout_train_chapters": len(counts["heldout_train_chapters"])}
                     | ({"filtered_train": counts["filtered_train"]} if "filtered_train" in counts else {})))


if __name__ == "__main__":
    main()
