"""Each figure the paper cites from other work carries the sentence it comes from.

``paper/cited.yaml`` holds, beside the sections that cite other work (the mappings with a
``cite`` key: ``laptop_study``, ``laptop_review``, ``path_study``), a section ``quotes``
that mirrors them, ``quotes.<section>.<name> = {source, quote}``, and ``sources``, the
sha256 of each source file. A figure computed from what a source states carries
``derived: "<how>"`` beside the quote(s) it is derived from (``quote`` may then be a list).

``cited_errors`` returns one line per problem, each naming the yaml path and field:

* a numeric figure (int or float, not bool) without a quote entry, or an entry for no figure;
* an entry without a ``source`` listed in ``sources`` or without a ``quote``;
* a quote that does not state its figure as written (``figure_in``); ``derived`` entries
  are exempt from this check but must still name their quote;
* with ``seeds``, a directory holding the source files: a file whose sha256 differs from
  ``sources``, or a quote that is not a substring of its file once runs of whitespace are
  collapsed to one space. A source file absent from ``seeds`` is not checked (CI has none).
"""
from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from ..errors import ConfigError
from ..records import sha256_file

NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
                "seventeen", "eighteen", "nineteen", "twenty")
SHA256 = re.compile(r"[0-9a-f]{64}")


def read_cited(path) -> dict:
    """``paper/cited.yaml`` as a mapping, read in one place for the numbers, the paper and
    the audit; a missing, unreadable or malformed file is one line naming it."""
    import yaml
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: must be a mapping of sections (got {type(data).__name__})")
    return data


def is_figure(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def cited_sections(cited: dict) -> list[str]:
    """The top-level sections that cite other work: the mappings with a ``cite`` key."""
    return [k for k, v in cited.items() if isinstance(v, dict) and "cite" in v]


def collapse(text: str) -> str:
    """Runs of whitespace (newlines included) to one space, ends stripped."""
    return " ".join(text.split())


def figure_forms(value: int | float) -> list[str]:
    """The textual forms that state ``value``: 9200 as ``9200`` or ``9,200`` (and as a
    word up to twenty), 0.976 as ``0.976`` or ``.976``, 2.0 also as ``2``; a minus sign as
    ``-`` or U+2212. Units and suffixes (``%``, ``x``, ``×``) are left to the context."""
    sign, magnitude = ("-", -value) if value < 0 else ("", value)
    if isinstance(magnitude, float):
        digits = format(Decimal(repr(magnitude)), "f")
        whole, _, frac = digits.partition(".")
        forms = [digits, f"{int(whole):,}.{frac}"]
        if whole == "0":
            forms.append("." + frac)
        if frac.strip("0") == "":
            forms += [whole, f"{int(whole):,}"]
    else:
        forms = [str(magnitude), f"{magnitude:,}"]
    forms = list(dict.fromkeys(forms))
    if sign:
        return [s + f for f in forms for s in ("-", "\u2212")]
    return forms


def figure_in(value: int | float, text: str) -> bool:
    """Whether ``text`` states ``value`` as a whole number token: 1.61 is found in
    ``1.61×`` and ``$1.61\\times$`` but not in ``11.61`` or ``1.612``; 200 not in ``9,200``."""
    for form in figure_forms(value):
        pattern = r"(?<![\d.])(?<!\d,)" + re.escape(form) + r"(?!\d|[.,]\d)"
        if re.search(pattern, text):
            return True
    if isinstance(value, int) and 0 <= value < len(NUMBER_WORDS):
        word = NUMBER_WORDS[value]
        return re.search(rf"(?<![\w-]){word}(?![\w-])", text, re.IGNORECASE) is not None
    return False


def quote_texts(entry: dict) -> list[str]:
    """The quote(s) of an entry: a string, or a list of strings; empty ones dropped."""
    quote = entry.get("quote")
    quotes = [quote] if isinstance(quote, str) else quote if isinstance(quote, list) else []
    return [q for q in quotes if isinstance(q, str) and q.strip()]


def entry_errors(where: str, figure: str, value, entry, sources: dict) -> list[str]:
    """The problems of one quote entry ``where`` (= quotes.<section>.<name>) for the figure
    ``figure`` = ``value``, without reading any source file."""
    if not isinstance(entry, dict):
        return [f"{where}: must be a mapping {{source, quote}}, not {entry!r}"]
    errors = []
    source = entry.get("source")
    if not isinstance(source, str) or not source:
        errors.append(f"{where}.source: missing")
    elif source not in sources:
        errors.append(f"{where}.source: {source!r} is not listed under sources")
    quotes = quote_texts(entry)
    if not quotes:
        errors.append(f"{where}.quote: missing (a derived figure must still quote what it "
                      "is derived from)")
    if "derived" in entry:
        if not isinstance(entry["derived"], str) or not entry["derived"].strip():
            errors.append(f"{where}.derived: must say how the figure is derived")
    elif quotes and not any(figure_in(value, q) for q in quotes):
        errors.append(f"{where}.quote: does not state {figure} = {value!r} "
                      f"(quote: {' / '.join(quotes)!r})")
    return errors


def quote_entries(cited: dict) -> tuple[dict, list[str]]:
    """The quote entries, {(section, name): entry}, and the errors of their layout."""
    quotes = cited.get("quotes")
    if not isinstance(quotes, dict):
        return {}, ["quotes: missing (a mapping quotes.<section>.<name>: {source, quote})"]
    entries, errors = {}, []
    for section, names in quotes.items():
        if not isinstance(names, dict):
            errors.append(f"quotes.{section}: must be a mapping of figure names")
            continue
        for name, entry in names.items():
            entries[(section, name)] = entry
    return entries, errors


def structure_errors(cited: dict) -> list[str]:
    """Every numeric figure has a quote entry that states it; every entry has a figure."""
    sources = cited.get("sources")
    errors = []
    if not isinstance(sources, dict) or not sources:
        errors.append("sources: missing (a mapping {source file name: sha256})")
        sources = {}
    for name, digest in sources.items():
        if not (isinstance(digest, str) and SHA256.fullmatch(digest)):
            errors.append(f"sources.{name}: not a sha256 hex digest: {digest!r}")
    entries, layout = quote_entries(cited)
    errors += layout
    sections = cited_sections(cited)
    for section in sections:
        for name, value in cited[section].items():
            if not is_figure(value):
                continue
            entry = entries.get((section, name))
            if entry is None:
                errors.append(f"{section}.{name}: figure {value!r} has no quote "
                              f"(quotes.{section}.{name} is missing)")
            else:
                errors += entry_errors(f"quotes.{section}.{name}", f"{section}.{name}",
                                       value, entry, sources)
    for section, name in entries:
        if section not in sections or not is_figure(cited[section].get(name)):
            errors.append(f"quotes.{section}.{name}: quotes no numeric figure {section}.{name}")
    return errors


def seed_errors(cited: dict, seeds: Path) -> list[str]:
    """Against the source files in ``seeds``: each file's sha256 is the one under
    ``sources`` and each quote is a substring of its whitespace-collapsed file."""
    sources = cited.get("sources") if isinstance(cited.get("sources"), dict) else {}
    errors, texts = [], {}
    for name, digest in sources.items():
        path = Path(seeds) / str(name)
        if not path.is_file():
            continue
        actual = sha256_file(path)
        if actual != digest:
            errors.append(f"sources.{name}: sha256 of {path} is {actual}, not {digest}")
        texts[name] = collapse(path.read_text(encoding="utf-8"))
    entries, _ = quote_entries(cited)
    for (section, name), entry in entries.items():
        if not isinstance(entry, dict) or entry.get("source") not in texts:
            continue
        for quote in quote_texts(entry):
            if collapse(quote) not in texts[entry["source"]]:
                errors.append(f"quotes.{section}.{name}.quote: not in {entry['source']} "
                              f"(quote: {quote!r})")
    return errors


def cited_errors(cited: dict, seeds: Path | None = None) -> list[str]:
    """One line per problem with the quotes of ``cited`` (the loaded cited.yaml); the
    source files are read only when ``seeds`` is a directory holding them."""
    errors = structure_errors(cited)
    if seeds is not None and Path(seeds).is_dir():
        errors += seed_errors(cited, Path(seeds))
    return errors


ROW_SECTIONS = ("study_goals",)  # goals the paper holds its own records to, printed like the figures


def cited_rows(cited: dict, cited_path: str) -> dict:
    """numbers.json rows 'cited.<section>.<name>' (group 'cited', attribute ``section``)
    for every scalar of the sections that cite other work (their figures, titles and
    short names) and of ROW_SECTIONS, so the paper prints cited figures from rows like
    its own; the audit recomputes them from the same yaml and checks each figure's quote."""
    from .numbers import Rows
    rows = Rows()
    for section in [*cited_sections(cited), *(s for s in ROW_SECTIONS if isinstance(cited.get(s), dict))]:
        put = rows.at("cited", section=section)
        for name, value in cited[section].items():
            if isinstance(value, (bool, int, float, str)):
                put(name, value, "text" if isinstance(value, str) else "cited", cited_path)
    return rows.out
