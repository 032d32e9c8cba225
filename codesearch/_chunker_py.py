"""Pure-Python line chunker: the reference twin of ``_chunker.pyx``.

Both modules expose the same two functions with the same signatures and must
return identical results (a hypothesis test holds them to it). This one is
written for reading; the Cython one for speed.
"""

from __future__ import annotations


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

    Returns:
        ``(start_line, end_line, text)`` per window: 1-based inclusive line
        numbers, and the window's lines joined by ``"\\n"``.

    Raises:
        ValueError: if ``target_tokens`` or ``chars_per_token`` is below 1 or
            ``overlap_tokens`` is negative.
    """
    if target_tokens < 1 or chars_per_token < 1 or overlap_tokens < 0:
        raise ValueError(
            "target_tokens and chars_per_token must be >= 1 and overlap_tokens >= 0, "
            f"got {target_tokens}, {chars_per_token} and {overlap_tokens}"
        )
    lines = split_lines(text)
    n = len(lines)
    budget = target_tokens * chars_per_token
    overlap = overlap_tokens * chars_per_token
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
            chunks.append((start + 1, end, body))
        if end >= n:
            break
        back = end
        covered = 0
        while back > start + 1 and covered < overlap:
            back -= 1
            covered += len(lines[back]) + 1
        start = back
    return chunks
