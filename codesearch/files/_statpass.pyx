# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Cython stat table: the fast twin of ``_statpass_py.py``.

Same class, same answers. The paths are encoded once into one NUL-separated
buffer, the recorded sizes and times into C arrays; :meth:`StatTable.differences`
then calls ``stat(2)`` on each path with the GIL released and compares in C,
so a pass costs the system calls and little else: no ``os.stat_result`` is
built, no path is converted per call. POSIX only (setup.py builds it there).
"""

import os

from libc.stdlib cimport free, malloc
from libc.string cimport memcpy
from posix.stat cimport stat as c_stat, struct_stat

cdef extern from *:
    """
    #include <sys/stat.h>
    #if defined(__APPLE__)
    #define CS_MTIME_NS(st) ((long long)(st).st_mtimespec.tv_sec * 1000000000LL + (long long)(st).st_mtimespec.tv_nsec)
    #else
    #define CS_MTIME_NS(st) ((long long)(st).st_mtim.tv_sec * 1000000000LL + (long long)(st).st_mtim.tv_nsec)
    #endif
    """
    long long CS_MTIME_NS(struct_stat st) nogil

cdef enum:
    CHECK_SIZE = 1
    NEVER = 2          # a path holding a NUL byte: os.stat refuses it, so it never matches
    SAME = 0
    MODIFIED = 1
    GONE = 2


cdef class StatTable:
    """Paths and their recorded stats, to be compared with the disk again and again.

    Args:
        paths: absolute paths (``str``; encoded as :func:`os.fsencode` would).
        sizes: the recorded sizes.
        mtimes: the recorded modification times in nanoseconds (-1 never matches a real file's).
        check_sizes: per path, whether the size is compared too (not for a folder).
    """

    cdef char* _buffer
    cdef Py_ssize_t* _starts
    cdef long long* _sizes
    cdef long long* _mtimes
    cdef unsigned char* _flags
    cdef unsigned char* _found
    cdef Py_ssize_t _n

    def __cinit__(self, paths, sizes, mtimes, check_sizes):
        cdef Py_ssize_t n = len(paths), i, at = 0, total = 0
        cdef bytes encoded
        if not (n == len(sizes) == len(mtimes) == len(check_sizes)):
            raise ValueError("paths, sizes, mtimes and check_sizes must have the same length")
        names = [os.fsencode(p) for p in paths]
        for encoded in names:
            total += len(encoded) + 1
        self._n = n
        self._buffer = <char*> malloc(max(total, 1))
        self._starts = <Py_ssize_t*> malloc(max(n, 1) * sizeof(Py_ssize_t))
        self._sizes = <long long*> malloc(max(n, 1) * sizeof(long long))
        self._mtimes = <long long*> malloc(max(n, 1) * sizeof(long long))
        self._flags = <unsigned char*> malloc(max(n, 1))
        self._found = <unsigned char*> malloc(max(n, 1))
        if not (self._buffer and self._starts and self._sizes and self._mtimes and self._flags and self._found):
            raise MemoryError()
        for i in range(n):
            encoded = names[i]
            memcpy(self._buffer + at, <char*> encoded, len(encoded))
            self._buffer[at + len(encoded)] = 0
            self._starts[i] = at
            at += len(encoded) + 1
            self._sizes[i] = sizes[i]
            self._mtimes[i] = mtimes[i]
            self._flags[i] = (CHECK_SIZE if check_sizes[i] else 0) | (NEVER if b"\0" in encoded else 0)

    def __dealloc__(self):
        free(self._buffer)
        free(self._starts)
        free(self._sizes)
        free(self._mtimes)
        free(self._flags)
        free(self._found)

    def __len__(self):
        return self._n

    def differences(self):
        """``(row, gone)`` for each path whose stat no longer matches, in row order (``gone``: it cannot be stat'ed)."""
        cdef Py_ssize_t i, differing = 0
        cdef struct_stat info
        cdef unsigned char verdict
        with nogil:
            for i in range(self._n):
                if self._flags[i] & NEVER or c_stat(self._buffer + self._starts[i], &info) != 0:
                    verdict = GONE
                elif CS_MTIME_NS(info) != self._mtimes[i] or (
                        self._flags[i] & CHECK_SIZE and <long long> info.st_size != self._sizes[i]):
                    verdict = MODIFIED
                else:
                    verdict = SAME
                self._found[i] = verdict
                differing += verdict != SAME
        found = []
        if differing:
            for i in range(self._n):
                if self._found[i] != SAME:
                    found.append((i, self._found[i] == GONE))
        return found
