"""Pure-Python line chunker: the reference twin of ``_chunker.pyx``.

Both modules expose the same two functions with the same signatures and must
return identical results (a hypothesis test holds them to it). This one is
written for reading; the Cython one for speed.
"""

from __future__ import annotations

LONG_LINE_BUDGETS = 32
"""A line longer than this many windows' budgets is cut into pieces of that length (see :func:`chunk_lines`).

32 budgets are 51,200 characters for the definitions' budget (400 tokens of 4) and 89,600 for the line windows'
(700 of 4). The longest line of the 19 DEV repositories has 36,678 (a base64 image in plug's debugger.ex; the next
2,321), so no DEV chunk changes, while a 1 MiB line (a file under the size cap) is about 20 windows, not one."""


def split_lines(text: str) -> list[str]:
    """Split ``text`` into lines the way an editor numbers them.

    ``\\n``, ``\\r\\n`` and a lone ``\\r`` end a line; nothing else does (unlike
    :meth:`str.splitlines`, which also breaks on form feeds and Unicode
    separators that editors show inline). A final line terminator does not start
    another line, so ``"a\\nb\\n"`` has two lines.

    Returns:
        The lines, without their terminators.
    """
    if not text:
        return []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def chunk_lines(
    text: str,
    target_tokens: int = 700,
    overlap_tokens: int = 80,
    chars_per_token: int = 4,
) -> list[tuple[int, int, str]]:
    """Cut ``text`` into overlapping windows of whole lines.

    From the first line, whole lines are added (each costs its length + 1)
    while the running size is below ``target_tokens * chars_per_token``. A
    window with non-whitespace text is emitted. Unless the file has ended, the
    next window starts by stepping back from this one's end over whole lines
    until ``overlap_tokens * chars_per_token`` characters are covered, but never
    back to this window's own start, so every window starts after the previous
    one and a single huge line cannot loop.

    A line longer than ``LONG_LINE_BUDGETS`` budgets (a minified bundle, a data
    blob: no line of the DEV repositories comes near) is taken as pieces of
    that many characters, each starting ``min(overlap, that // 2)`` characters
    before the one before it ends, the last running to the line's end, and a
    piece counts as a line above. A piece but the last is longer than a budget:
    a window that reaches a cut line ends with its first piece, and each later
    piece is a window of its own until the last, which a window may continue
    past. A window holding a piece keeps editor line numbers: one that is a
    piece alone starts and ends on that line.

    Returns:
        ``(start_line, end_line, text)`` per window: 1-based inclusive line
        numbers, and the window's lines joined by ``"\\n"`` (where a line is cut:
        the first a last piece, or the last a first piece, or a piece alone).

    Raises:
        ValueError: if ``target_tokens`` or ``chars_per_token`` is below 1 or
            ``overlap_tokens`` is negative.
    """
    if target_tokens < 1 or chars_per_token < 1 or overlap_tokens < 0:
        raise ValueError(
            "target_tokens and chars_per_token must be >= 1 and overlap_tokens >= 0, "
            f"got {target_tokens}, {chars_per_token} and {overlap_tokens}"
        )
    budget = target_tokens * chars_per_token
    overlap = overlap_tokens * chars_per_token
    numbers, lines = _pieces(split_lines(text), budget * LONG_LINE_BUDGETS, overlap)
    n = len(lines)
    chunks: list[tuple[int, int, str]] = []
    start = 0
    while start < n:
        end = start
        size = 0
        while end < n and size < budget:
            size += len(lines[end]) + 1
            end += 1
        body = "\n".join(lines[start:end])
        if body.strip():
            chunks.append((numbers[start] + 1, numbers[end - 1] + 1, body))
        if end >= n:
            break
        back = end
        covered = 0
        while back > start + 1 and covered < overlap:
            back -= 1
            covered += len(lines[back]) + 1
        start = back
    return chunks


def _pieces(lines: list[str], longest: int, overlap: int) -> tuple[list[int], list[str]]:
    """The lines with each one longer than ``longest`` cut into pieces, and each piece's 0-based line number."""
    if all(len(line) <= longest for line in lines):
        return list(range(len(lines))), lines
    step = longest - min(overlap, longest // 2)
    numbers: list[int] = []
    pieces: list[str] = []
    for number, line in enumerate(lines):
        at = 0
        while len(line) - at > longest:
            numbers.append(number)
            pieces.append(line[at:at + longest])
            at += step
        numbers.append(number)
        pieces.append(line[at:])
    return numbers, pieces
