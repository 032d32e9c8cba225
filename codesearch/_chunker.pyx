# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Cython line chunker: the fast twin of ``_chunker_py.py``.

Same functions, same signatures, identical results. The text is normalised to
``\\n`` line ends once; line offsets are found in one C pass over the string's
buffer (``memchr`` for 1-byte strings); chunk texts are slices of the
normalised string, so no per-line Python objects are made.
"""

from cpython.unicode cimport Py_UNICODE_ISSPACE
from libc.stdlib cimport malloc, free
from libc.string cimport memchr

cdef extern from "Python.h":
    int PyUnicode_KIND(object)
    void* PyUnicode_DATA(object)
    Py_UCS4 PyUnicode_READ(int kind, void* data, Py_ssize_t index)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    int PyUnicode_1BYTE_KIND
    int PyUnicode_2BYTE_KIND
    ctypedef unsigned short Py_UCS2


cdef inline str _normalise(str text):
    if "\r" in text:
        return text.replace("\r\n", "\n").replace("\r", "\n")
    return text


cdef Py_ssize_t _line_starts(str text, Py_ssize_t* starts, Py_ssize_t capacity) except -1:
    """Fill ``starts`` with the offset of each line and a sentinel; return the line count."""
    cdef Py_ssize_t length = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef const char* base
    cdef const char* hit
    cdef const Py_UCS2* ucs2
    cdef const Py_UCS4* ucs4
    cdef Py_ssize_t i = 0, n = 0
    if length == 0:
        return 0
    starts[n] = 0
    n += 1
    if kind == PyUnicode_1BYTE_KIND:
        base = <const char*> data
        while True:
            hit = <const char*> memchr(base + i, 10, length - i)
            if hit == NULL:
                break
            i = hit - base + 1
            if i < length:
                starts[n] = i
                n += 1
    elif kind == PyUnicode_2BYTE_KIND:
        ucs2 = <const Py_UCS2*> data
        for i in range(length - 1):
            if ucs2[i] == 10:
                starts[n] = i + 1
                n += 1
    else:
        ucs4 = <const Py_UCS4*> data
        for i in range(length - 1):
            if ucs4[i] == 10:
                starts[n] = i + 1
                n += 1
    # Sentinel: where line n would start, so that every line's cost (length + 1)
    # is starts[i + 1] - starts[i], the last line included.
    if PyUnicode_READ(kind, data, length - 1) == 10:
        starts[n] = length
    else:
        starts[n] = length + 1
    return n


cdef bint _has_text(str text, Py_ssize_t begin, Py_ssize_t end):
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t i
    for i in range(begin, end):
        if not Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i)):
            return True
    return False


def split_lines(str text):
    """Split ``text`` into lines the way an editor numbers them (see the pure twin)."""
    if not text:
        return []
    cdef list lines = _normalise(text).split("\n")
    if not lines[len(lines) - 1]:  # negative indexing is off (wraparound=False)
        lines.pop()
    return lines


def chunk_lines(str text, Py_ssize_t target_tokens=700, Py_ssize_t overlap_tokens=80,
                Py_ssize_t chars_per_token=4):
    """Cut ``text`` into overlapping windows of whole lines (see the pure twin)."""
    if target_tokens < 1 or chars_per_token < 1 or overlap_tokens < 0:
        raise ValueError(
            "target_tokens and chars_per_token must be >= 1 and overlap_tokens >= 0, "
            f"got {target_tokens}, {chars_per_token} and {overlap_tokens}"
        )
    cdef str norm = _normalise(text)
    # At most one line per character, plus the sentinel: an upper bound that
    # costs no pass over the text (malloc does not touch the pages it skips).
    cdef Py_ssize_t capacity = PyUnicode_GET_LENGTH(norm) + 2
    cdef Py_ssize_t* starts = <Py_ssize_t*> malloc(capacity * sizeof(Py_ssize_t))
    if starts == NULL:
        raise MemoryError()
    cdef Py_ssize_t n, start, end, size, back, covered, begin_off, end_off
    cdef Py_ssize_t budget = target_tokens * chars_per_token
    cdef Py_ssize_t overlap = overlap_tokens * chars_per_token
    cdef list chunks = []
    try:
        n = _line_starts(norm, starts, capacity)
        start = 0
        while start < n:
            # A line's cost is its length + 1, which is exactly starts[i+1] - starts[i].
            end = start
            size = 0
            while end < n and size < budget:
                size += starts[end + 1] - starts[end]
                end += 1
            begin_off = starts[start]
            end_off = starts[end] - 1
            if _has_text(norm, begin_off, end_off):
                chunks.append((start + 1, end, norm[begin_off:end_off]))
            if end >= n:
                break
            back = end
            covered = 0
            while back > start + 1 and covered < overlap:
                back -= 1
                covered += starts[back + 1] - starts[back]
            start = back
    finally:
        free(starts)
    return chunks
