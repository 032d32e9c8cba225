"""Doc comments into short queries: markers stripped, markup and tag blocks dropped, first paragraphs kept.

A doc comment is read in three steps:

1. :func:`strip_comment` (or :func:`strip_string` for Python docstrings and
   Elixir ``@doc`` strings) removes the comment syntax of every style the
   languages use: ``///``, ``//!``, ``/** */``, ``#``, ``--``, ``-- |``,
   ``---``, ``{-| -}``, ``--[[ ]]``, ``=begin``/``=end``, string quotes;
2. :func:`summarise` turns what is left into prose: C# XML keeps its
   ``<summary>``; Javadoc/JSDoc/KDoc/PHPDoc inline tags (``{@link X}``) become
   their text; HTML and Markdown markup go; the *tag block* (``@param``,
   ``:returns:``, ``Args:``, ``# Examples``, ``- Parameter``, doctests, code
   fences ...) and everything after it is cut, since a summary sentence reads
   like a question and ``@param x the x`` does not; then the first paragraph
   and the prose paragraphs after it are kept up to :data:`MAX_DOC_WORDS`
   words (a longer first paragraph is cut at a sentence end, or at the limit);
3. :func:`doc_problem` says why a summary is no query: too short, a licence,
   a tool directive, commented-out code, not English, or only the
   definition's own name again.
"""

from __future__ import annotations

import html
import inspect
import re

MAX_DOC_WORDS = 48
"""Words a query keeps: about 64 WordPiece tokens, the first paragraph(s) of a doc."""

MIN_DOC_WORDS = 3
"""Fewer words than this is no query (``Constructor.``, ``Getter for x``)."""

# --------------------------------------------------------------------------- comment syntax

_BLOCK_OPEN = re.compile(r"^\s*(?:/\*+!?|\{-+\s*[|^$]?|--\[(=*)\[|=begin\b)")
_LINE_MARKER = re.compile(r"^[ \t]*(?://[/!]?<?|#+[!']?|--+[ \t]*[|^]?(?=[ \t]|$)|--+)")
_DECORATION = re.compile(r"[ \t]+[#*=/-]{1,}[ \t]*$|^[ \t]*[#*=/~_-]{3,}[ \t]*$")
_STAR = re.compile(r"^[ \t]*\*+(?!/)[ \t]?")


def _closer(opener: str) -> re.Pattern[str]:
    """The end of the block comment ``opener`` starts (``*/``, ``-}``, ``]==]``, ``=end``)."""
    opener = opener.strip()
    if opener.startswith("/*"):
        return re.compile(r"\*+/\s*$")
    if opener.startswith("{-"):
        return re.compile(r"-+\}\s*$")
    if opener.startswith("--["):
        return re.compile(r"\]" + "=" * (len(opener) - 4) + r"\]\s*$")
    return re.compile(r"^=end\b.*$")


def strip_comment(text: str) -> str:
    """The text inside one or more comments (joined by newlines), line structure kept, common indent removed.

    >>> strip_comment("/**\\n * Adds two numbers.\\n */")
    'Adds two numbers.'
    >>> strip_comment("-- | Look up a key.")
    'Look up a key.'
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    out: list[str] = []
    for block in _comment_blocks(text):
        opened = _BLOCK_OPEN.match(block)
        if opened:
            inner = block[opened.end():]
            lines = inner.split("\n")
            close = _closer(opened.group(0))
            lines[-1] = close.sub("", lines[-1])
            starred = [line for line in lines[1:] if line.strip()]
            if starred and sum(1 for line in starred if _STAR.match(line) or line.strip() == "*") >= len(starred) / 2:
                lines = [lines[0]] + [_STAR.sub("", line) if line.strip() != "*" else "" for line in lines[1:]]
        else:
            lines = [_LINE_MARKER.sub("", line, count=1) for line in block.split("\n")]
        lines = [_DECORATION.sub("", line) for line in lines]
        out.append(inspect.cleandoc("\n".join(lines)))
    return "\n".join(out).strip()


def _comment_blocks(text: str) -> list[str]:
    """Split joined comments into block comments (each up to its own closer) and runs of line comments."""
    blocks: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opened = _BLOCK_OPEN.match(lines[i])
        if opened:
            close = _closer(opened.group(0))
            j = i
            rest = lines[i][opened.end():]
            while j < len(lines) - 1 and not close.search(rest):
                j += 1
                rest = lines[j]
            blocks.append("\n".join(lines[i : j + 1]))
            i = j + 1
            continue
        j = i
        while j + 1 < len(lines) and not _BLOCK_OPEN.match(lines[j + 1]):
            j += 1
        blocks.append("\n".join(lines[i : j + 1]))
        i = j + 1
    return blocks


_STRING_PREFIX = re.compile(r'^\s*(?:[rRuUbBfF]{0,2}|~[sS])("""|\'\'\'|"|\')')


def strip_string(text: str) -> str:
    """The content of a string literal used as a doc (a docstring, an Elixir ``@doc``), indentation cleaned."""
    text = text.strip()
    match = _STRING_PREFIX.match(text)
    if match:
        quote = match.group(1)
        text = text[match.end():]
        if text.endswith(quote):
            text = text[: -len(quote)]
    return inspect.cleandoc(text)


# --------------------------------------------------------------------------- markup into prose

_XML_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.DOTALL | re.IGNORECASE)
_XML_REF = re.compile(r"<(?:see|seealso|paramref|typeparamref)\s+(?:cref|name|langword|href)=\"(?:[A-Z]:)?([^\"]+)\"\s*/>")
_JSDOC_LABELLED_LINK = re.compile(r"\[([^\]]+)\]\{@link[^}]*\}")
_INLINE_TAG = re.compile(r"\{@(?:link|linkplain|linkcode|code|literal|value|see|ref)\s+([^}\s]+)(?:\s+([^}]*))?\}")
_INHERIT = re.compile(r"\{@inheritDoc\}|@inheritDoc\b", re.IGNORECASE)
_HTML_BREAK = re.compile(r"<\s*/?\s*(?:p|br|li|ul|ol|pre|dl|dt|dd|h\d|table|tr)\b[^>]*>", re.IGNORECASE)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
_SCALADOC_LINK = re.compile(r"\[\[([^\]\s]+)(?:\s+([^\]]+))?\]\]")
_MD_LINK = re.compile(r"!?\[([^\]]+)\](?:\([^)]*\)|\[[^\]]*\])")
_MD_REF = re.compile(r"\[`?([^\]`]+)`?\]")
_HADDOCK_ID = re.compile(r"(?<![\w'])'([A-Za-z_][\w.']*?)'(?![\w])")
_HADDOCK_CODE = re.compile(r"@([^@\n]+)@")
_PROSE_TAG = re.compile(r"^[ \t]*[@\\](?:brief|short|summary|description|desc|fileoverview|file|overview|details|"
                        r"abstract|discussion|purpose|classdesc)\b[ \t]*:?", re.MULTILINE | re.IGNORECASE)
_HASKELL_FIELD = re.compile(r"^[ \t]*(?:Module|Description|Copyright|License|Licence|Maintainer|Stability|Portability"
                            r"|Author|Authors|Created|Safe Haskell|Language)[ \t]*:.*$", re.MULTILINE)
_TAG_BLOCK = re.compile(
    r"^[ \t]*(?:"
    r"[@\\][A-Za-z]"                                   # @param, \param, ---@class, @returns ...
    r"|:(?:param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except|var|ivar|cvar|meta|yields?)\b"
    r"|(?:Args|Arguments|Parameters|Params|Returns?|Yields?|Raises|Throws|Examples?|Example usage|Usage|Notes?"
    r"|See [Aa]lso|References|Attributes|Keyword [Aa]rg(?:ument)?s|Other Parameters|Warns|Warnings?|Todo"
    r"|Options|Panics|Errors|Safety|Complexity|Type [Pp]arameters)[ \t]*:?[ \t]*$"
    r"|#+[ \t]+\S"                                     # Markdown headings (Rust's # Examples, Elixir's ## Options)
    r"|[-=~]{3,}[ \t]*$"                              # numpy section underlines, RDoc rules
    r"|>>>|iex>|\$ |```|~~~|:call-seq:"              # doctests, shell sessions, fences
    r"|[-*][ \t]+(?:Parameters?|Returns?|Throws|Note|Precondition|Postcondition|Complexity|Important|Warning)\b"
    r")",
    re.MULTILINE,
)
_LABEL_TAG = re.compile(
    r"^[ \t]*[@\\](?:name|category|module|memberof|member|kind|function|func|method|static|public|private|protected"
    r"|alias|class|constructor|namespace|internal|api|access|readonly|final|abstract|override|async|generator|ignore"
    r"|hidden|nocollapse|export|package|subpackage|codeCoverageIgnore|inheritdoc|interface|enum|const|constant"
    r"|lends|instance|global|mixin|virtual|sealed|experimental|beta|alpha|stable|nodoc|suppress|typedef|callback"
    r"|flow|jsx|vue|sig|symb|see)\b(?![ \t]*:)[^\n]*$",
    re.IGNORECASE,
)
_RST_LABEL = re.compile(r"^[ \t]*(?:\.\. [\w-]+::.*|:[\w-]+:(?:[ \t].*)?)$")
_SECTION_UNDERLINE = re.compile(r"^[ \t]*[-=~]{3,}[ \t]*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`\"'])")


def _markup_to_text(text: str) -> str:
    summary = _XML_SUMMARY.search(text)
    if summary is not None:
        text = summary.group(1)
    text = _XML_REF.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)
    text = _INHERIT.sub("", text)
    text = _JSDOC_LABELLED_LINK.sub(r"\1", text)
    text = _INLINE_TAG.sub(lambda m: (m.group(2) or m.group(1).replace("#", ".").lstrip(".")).strip(), text)
    text = _HTML_BREAK.sub("\n\n", text)
    text = _HTML_TAG.sub("", text)
    text = html.unescape(text)
    text = _SCALADOC_LINK.sub(lambda m: m.group(2) or m.group(1).rsplit(".", 1)[-1], text)
    text = _MD_LINK.sub(r"\1", text)
    text = _MD_REF.sub(r"\1", text)
    text = _HADDOCK_CODE.sub(r"\1", text)
    text = _HADDOCK_ID.sub(r"\1", text)
    text = _HASKELL_FIELD.sub("", text)
    return _PROSE_TAG.sub("", text)


def _cut_tags(text: str) -> str:
    """``text`` up to the first line of its tag block (or of a section the summary does not need).

    Tags that only label the definition (``@name``, ``@category``, ``@public`` ...)
    are dropped with their line and reading goes on: date-fns and Closure-style
    docs open with them and give the summary after.
    """
    lines = text.split("\n")
    kept: list[str] = []
    for i, line in enumerate(lines):
        if _LABEL_TAG.match(line) or _RST_LABEL.match(line):
            continue
        if _TAG_BLOCK.match(line):
            break
        if i + 1 < len(lines) and _SECTION_UNDERLINE.match(lines[i + 1]) and line.strip():
            break
        kept.append(line)
    return "\n".join(kept)


def _paragraphs(text: str) -> list[str]:
    return [" ".join(p.split()) for p in re.split(r"\n[ \t]*\n", text) if p.strip()]


def summarise(text: str, max_words: int = MAX_DOC_WORDS) -> str:
    """The prose summary of a doc comment's text (markers already stripped): see the module's step 2.

    >>> summarise("Adds two numbers.\\n\\n@param a the first\\n@return the sum")
    'Adds two numbers.'
    """
    prose = _cut_tags(_markup_to_text(text)).replace("`", "").replace("**", "")
    paragraphs = list(dict.fromkeys(p for p in _paragraphs(prose) if re.search(r"[A-Za-z]", p)))
    if not paragraphs:
        return ""
    first = paragraphs[0].split()
    if len(first) > max_words:
        clipped = " ".join(first[:max_words])
        ends = [m.start() for m in _SENTENCE_END.finditer(clipped)]
        good = [e for e in ends if len(clipped[:e].split()) >= 8]
        return clipped[: good[-1]].strip() if good else clipped
    kept = [paragraphs[0]]
    words = len(first)
    for paragraph in paragraphs[1:]:
        count = len(paragraph.split())
        if words + count > max_words or _code_like(paragraph) or paragraph.rstrip().endswith(":"):
            break
        kept.append(paragraph)
        words += count
    return " ".join(kept)


# --------------------------------------------------------------------------- what is no query

_LICENCE = re.compile(
    r"copyright|\(c\)\s*(?:19|20)\d\d|licen[cs]ed\s+(?:under|to)|spdx-|permission is hereby granted|released under"
    r"|\bMIT licen[cs]e\b|\bBSD licen[cs]e\b"
    r"|all rights reserved|apache license|gnu (?:general|lesser|affero)|mozilla public licen|redistribution and use"
    r"|this (?:file|program|library) is (?:part of|free software)|without warranties or conditions",
    re.IGNORECASE,
)
_DIRECTIVE = re.compile(
    r"^\s*(?:eslint|jshint|jscs|global\s|prettier-ignore|istanbul\s|c8\s|@ts-|tslint|noqa|pylint|type:\s*ignore"
    r"|pragma\b|nolint|go:|\+build|clang-format|swiftlint|rubocop|frozen_string_literal|-\*-|vim?:|shellcheck"
    r"|#?region\b|#?endregion\b|MARK:|TODO\b|FIXME\b|XXX\b|HACK\b|@flow\b|@jsx\b|language=|noinspection|resharper"
    r"|cspell|hlint|\{-#|!|coding[:=]|@generated|<auto-generated|nosec|lint:|@formatter|NOSONAR|\$Id)",
    re.IGNORECASE,
)
_CODE_END = re.compile(r"[;{}]\s*$|^\s*[})\]]|^\s*(?:#include|#define|import |from \S+ import|@\w+\(|\$ )")
_CODE_CHARS = frozenset("{}()[];=<>$&|\\")
_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
_FILLER = frozenset({
    "a", "an", "the", "of", "to", "for", "in", "on", "this", "that", "it", "is", "are", "be", "returns", "return",
    "returned", "get", "gets", "getter", "set", "sets", "setter", "new", "create", "creates", "created", "construct",
    "constructs", "constructor", "initialize", "initializes", "initialise", "initialises", "init", "default",
    "method", "function", "func", "class", "object", "instance", "value", "values", "given", "specified", "current",
    "property", "field", "and", "or", "with", "by", "from", "as", "type", "helper", "implementation", "impl",
})
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def without_header_fields(text: str) -> str:
    """``text`` without a Haskell module header's ``Copyright :``, ``License :``, ``Maintainer :`` ... lines."""
    return _HASKELL_FIELD.sub("", text)


def is_licence(text: str) -> bool:
    """Whether a comment's text is a licence or copyright notice."""
    return bool(_LICENCE.search(text))


def is_directive(text: str) -> bool:
    """Whether a comment is an instruction to a tool (linter, formatter, editor) or a to-do note, not a doc."""
    return bool(_DIRECTIVE.match(text))


def _code_like(text: str) -> bool:
    """Whether a summary reads as code (commented-out code, a signature) rather than prose."""
    lines = [line for line in text.split("\n") if line.strip()]
    if not lines:
        return False
    if sum(1 for line in lines if _CODE_END.search(line)) * 2 >= len(lines):
        return True
    letters = sum(1 for c in text if c.isalpha())
    symbols = sum(1 for c in text if c in _CODE_CHARS)
    return symbols > 0.2 * max(letters, 1)


def name_words(symbol: str) -> set[str]:
    """The lower-cased words of a qualified name's last part: ``Foo.getUserName`` -> {get, user, name}."""
    last = re.split(r"[.:\\#/]+|::", symbol.strip())[-1] if symbol.strip() else ""
    return {_stem(w.lower()) for w in _CAMEL.findall(last)}


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "s", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def doc_problem(doc: str, symbol: str = "") -> str | None:
    """Why ``doc`` (a :func:`summarise` result) is no training query, or ``None`` when it is one.

    Args:
        doc: the summary.
        symbol: the definition's qualified name (for ``restates-name``).

    Returns:
        One of ``"tags-only"`` (nothing left), ``"licence"``, ``"directive"``,
        ``"code-like"``, ``"non-english"``, ``"short"``, ``"restates-name"``, or ``None``.
    """
    if not doc.strip():
        return "tags-only"
    if is_licence(doc):
        return "licence"
    if is_directive(doc):
        return "directive"
    if _code_like(doc):
        return "code-like"
    letters = [c for c in doc if c.isalpha()]
    if letters and sum(1 for c in letters if c.isascii()) < 0.8 * len(letters):
        return "non-english"
    words = _WORD.findall(doc)
    if len(words) < MIN_DOC_WORDS:
        return "short"
    if symbol:
        content = {_stem(part.lower()) for w in words for part in _CAMEL.findall(w)} - _FILLER
        if content <= name_words(symbol) | {_stem(f) for f in _FILLER}:
            return "restates-name"
    return None


__all__ = [
    "MAX_DOC_WORDS",
    "MIN_DOC_WORDS",
    "doc_problem",
    "is_directive",
    "is_licence",
    "name_words",
    "strip_comment",
    "strip_string",
    "summarise",
    "without_header_fields",
]
