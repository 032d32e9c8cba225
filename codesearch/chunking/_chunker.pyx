# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Cython line chunker: the fast twin of ``_chunker_py.py``.

Same functions, same signatures, identical results, but no per-line work in
Python. A window of whole lines grows "while its size is below the budget", and
a line costs its length + 1, so a window that starts at offset ``s`` ends at the
first ``\\n`` at or after ``s + budget - 1``: one ``memchr`` per window finds it.
Line numbers come from counting the newlines of each window (SSE2 for 1-byte
strings, a loop the compiler vectorises for wider ones); the same pass notices
a ``\\r``, and only then is the text normalised and chunked again. The overlap
is found by scanning back from the window's end (``memrchr`` on glibc). ASCII
chunk texts are copied straight from the string's buffer.

Only the last line of a window can be longer than the budget, so a line too
long to be taken whole (``LONG_LINE_BUDGETS`` budgets) is noticed where that
window ends: the window ends with the line's first piece, and the line's later
pieces follow one window each until the last, which a window may continue past.
"""

from cpython.unicode cimport Py_UNICODE_ISSPACE
from libc.string cimport memchr, memcpy

LONG_LINE_BUDGETS = 32
"""A line longer than this many windows' budgets is cut into pieces of that length (see the pure twin)."""
cdef Py_ssize_t _LONG_LINE_BUDGETS = LONG_LINE_BUDGETS

cdef extern from "Python.h":
    ctypedef unsigned char Py_UCS1
    ctypedef unsigned short Py_UCS2
    int PyUnicode_KIND(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    bint PyUnicode_IS_ASCII(object)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    object PyUnicode_Substring(object text, Py_ssize_t start, Py_ssize_t end)
    int PyUnicode_1BYTE_KIND
    int PyUnicode_2BYTE_KIND


cdef extern from *:
    """
    #include <string.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif

    /* Newlines in p[0:n]; *carriage |= 1 if a carriage return is there too. */
    static Py_ssize_t cs_count_newlines_ucs1(const unsigned char* p, Py_ssize_t n, int* carriage) {
        Py_ssize_t i = 0, count = 0;
        int cr = 0;
    #if defined(__SSE2__)
        /* Byte counters (0 - compare mask) summed by SAD every 255 vectors. */
        const __m128i nl = _mm_set1_epi8('\\n'), ret = _mm_set1_epi8('\\r'), zero = _mm_setzero_si128();
        __m128i seen = zero;
        while (i + 16 <= n) {
            __m128i counters = zero;
            Py_ssize_t vectors = (n - i) / 16;
            if (vectors > 255) vectors = 255;
            for (Py_ssize_t j = 0; j < vectors; j++, i += 16) {
                __m128i v = _mm_loadu_si128((const __m128i*)(p + i));
                counters = _mm_sub_epi8(counters, _mm_cmpeq_epi8(v, nl));
                seen = _mm_or_si128(seen, _mm_cmpeq_epi8(v, ret));
            }
            __m128i sums = _mm_sad_epu8(counters, zero);
            count += _mm_cvtsi128_si32(sums) + _mm_cvtsi128_si32(_mm_srli_si128(sums, 8));
        }
        cr = _mm_movemask_epi8(seen) != 0;
    #endif
        for (; i < n; i++) {
            count += p[i] == '\\n';
            cr |= p[i] == '\\r';
        }
        *carriage |= cr;
        return count;
    }

    /* Index of the last newline in p[a:b], or -1. */
    static Py_ssize_t cs_last_newline_ucs1(const unsigned char* p, Py_ssize_t a, Py_ssize_t b) {
        if (b <= a) return -1;
    #if defined(__GLIBC__)
        const unsigned char* hit = (const unsigned char*) memrchr(p + a, '\\n', (size_t)(b - a));
        return hit ? hit - p : -1;
    #else
        for (Py_ssize_t i = b; i-- > a;) if (p[i] == '\\n') return i;
        return -1;
    #endif
    }
    """
    Py_ssize_t cs_count_newlines_ucs1(const unsigned char* p, Py_ssize_t n, int* carriage) noexcept nogil
    Py_ssize_t cs_last_newline_ucs1(const unsigned char* p, Py_ssize_t a, Py_ssize_t b) noexcept nogil


ctypedef fused char_t:
    Py_UCS1
    Py_UCS2
    Py_UCS4


cdef inline Py_ssize_t _find_newline(const char_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """Index of the first ``\\n`` in ``p[i:n]``, or -1."""
    cdef const void* hit
    if i >= n:
        return -1
    if char_t is Py_UCS1:
        hit = memchr(p + i, 10, <size_t> (n - i))
        return -1 if hit == NULL else <const Py_UCS1*> hit - p
    else:
        while i < n:
            if p[i] == 10:
                return i
            i += 1
        return -1


cdef inline Py_ssize_t _count_newlines(const char_t* p, Py_ssize_t a, Py_ssize_t b, bint* carriage) noexcept nogil:
    """Number of ``\\n`` in ``p[a:b]``; sets ``carriage`` if a ``\\r`` is there too."""
    cdef Py_ssize_t i, block_end, count = 0
    cdef unsigned short block
    cdef unsigned char cr = 0
    cdef int cr1 = 0
    if b <= a:
        return 0
    if char_t is Py_UCS1:
        count = cs_count_newlines_ucs1(p + a, b - a, &cr1)
        if cr1:
            carriage[0] = True
        return count
    # 16-bit counters over blocks of at most 65535 characters vectorise into a
    # few instructions per vector; 64-bit ones would widen every character.
    while a < b:
        block_end = a + 65535 if b - a > 65535 else b
        block = 0
        for i in range(a, block_end):
            block += p[i] == 10
            cr |= p[i] == 13
        count += block
        a = block_end
    if cr:
        carriage[0] = True
    return count


cdef inline Py_ssize_t _last_newline(const char_t* p, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Index of the last ``\\n`` in ``p[a:b]``, or -1."""
    if char_t is Py_UCS1:
        return cs_last_newline_ucs1(p, a, b)
    while b > a:
        b -= 1
        if p[b] == 10:
            return b
    return -1


cdef inline bint _has_text(const char_t* p, Py_ssize_t a, Py_ssize_t b) noexcept:
    cdef Py_ssize_t i
    for i in range(a, b):
        if not Py_UNICODE_ISSPACE(p[i]):
            return True
    return False


cdef inline str _slice(str text, const char_t* p, Py_ssize_t a, Py_ssize_t b, bint ascii):
    """``text[a:b]``; an ASCII string's slice is copied without looking for its widest character."""
    cdef str out
    if char_t is Py_UCS1:
        if ascii:
            out = <str> PyUnicode_New(b - a, 127)
            memcpy(PyUnicode_DATA(out), p + a, <size_t> (b - a))
            return out
    return <str> PyUnicode_Substring(text, a, b)


cdef list _chunk(str text, const char_t* p, Py_ssize_t n, Py_ssize_t budget, Py_ssize_t overlap, bint* carriage):
    """The windows of ``text`` (whose buffer is ``p``, ``n`` characters long).

    Returns early, with ``carriage`` set, if the text has a ``\\r``: the caller
    then normalises line ends and calls again.
    """
    cdef list chunks = []
    cdef bint ascii = PyUnicode_IS_ASCII(text)
    cdef Py_ssize_t start = 0  # offset of the window's first line (or piece of a cut line)
    cdef Py_ssize_t line = 0   # its 0-based number
    cdef Py_ssize_t stop, end, text_end, back
    cdef Py_ssize_t longest = budget * _LONG_LINE_BUDGETS  # a longer line is cut into pieces this long
    cdef Py_ssize_t step = longest - (overlap if overlap < longest // 2 else longest // 2)  # from piece to piece
    cdef Py_ssize_t last_start, last_end, cut_end, cut_line_end = -1
    cdef bint at_end
    if n == 0:
        return chunks
    while True:
        if cut_line_end >= 0:  # start is a later piece of a cut line
            if cut_line_end - start > longest:  # not its last: a window of its own
                if _has_text(p, start, start + longest):
                    chunks.append((line + 1, line + 1, _slice(text, p, start, start + longest, ascii)))
                start += step
                continue
            cut_line_end = -1  # its last piece: a window like any other from here
        stop = _find_newline(p, start + budget - 1, n)  # the window's last '\n'
        at_end = stop == -1 or stop == n - 1  # the window runs to the end of the file
        last_end = (n - 1 if p[n - 1] == 10 else n) if at_end else stop
        # The window's last line is the only one that can be too long to take whole.
        last_start = start
        if last_end - start > longest:
            last_start = _last_newline(p, start, min(start + budget - 1, last_end)) + 1
            if last_start < start:
                last_start = start
        if last_end - last_start > longest:
            # The window ends with the first piece of that line.
            _count_newlines(p, last_start, last_end, carriage)  # only to see a '\r' in it
            end = line + _count_newlines(p, start, last_start, carriage)  # the cut line's 0-based number
            if carriage[0]:
                return chunks
            cut_end = last_start + longest
            if _has_text(p, start, cut_end):
                chunks.append((line + 1, end + 1, _slice(text, p, start, cut_end, ascii)))
            if overlap == 0 or last_start == start:  # nothing to step back over: the next piece
                line, start, cut_line_end = end, last_start + step, last_end
                continue
            # Step back, over whole lines, to cover the overlap behind the piece's end (never to this start).
            back = _last_newline(p, start, min(last_start, cut_end - overlap + 1))
            if back >= start:
                line += _count_newlines(p, start, back + 1, carriage)
                start = back + 1
            else:
                start = _find_newline(p, start, n) + 1
                line += 1
            continue
        if at_end:
            text_end = last_end
            end = line + _count_newlines(p, start, text_end, carriage) + 1
            if carriage[0]:
                return chunks
            if _has_text(p, start, text_end):
                chunks.append((line + 1, end, _slice(text, p, start, text_end, ascii)))
            return chunks
        end = line + _count_newlines(p, start, stop, carriage) + 1  # 1-based last line
        if carriage[0]:
            return chunks
        if _has_text(p, start, stop):
            chunks.append((line + 1, end, _slice(text, p, start, stop, ascii)))
        # The next window starts at the last line start at or before stop + 1 - overlap,
        # but after this window's first line.
        back = _last_newline(p, start, stop - overlap + 1)
        if back >= start:
            line = end - _count_newlines(p, back + 1, stop + 1, carriage)
            start = back + 1
        else:
            start = _find_newline(p, start, n) + 1
            line += 1


cdef inline str _normalise(str text):
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_lines(str text):
    """Split ``text`` into lines the way an editor numbers them (see the pure twin)."""
    if not text:
        return []
    cdef list lines = (_normalise(text) if "\r" in text else text).split("\n")
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
    cdef Py_ssize_t budget = target_tokens * chars_per_token
    cdef Py_ssize_t overlap = overlap_tokens * chars_per_token
    cdef bint carriage = False
    cdef list chunks = _dispatch(text, budget, overlap, &carriage)
    if carriage:  # rare: line ends with \r; normalise them and cut again
        carriage = False
        chunks = _dispatch(_normalise(text), budget, overlap, &carriage)
    return chunks


cdef list _dispatch(str text, Py_ssize_t budget, Py_ssize_t overlap, bint* carriage):
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    if kind == PyUnicode_1BYTE_KIND:
        return _chunk(text, <const Py_UCS1*> data, n, budget, overlap, carriage)
    if kind == PyUnicode_2BYTE_KIND:
        return _chunk(text, <const Py_UCS2*> data, n, budget, overlap, carriage)
    return _chunk(text, <const Py_UCS4*> data, n, budget, overlap, carriage)
