"""Exact discrete Gaussian draws on worker processes, for the per-key noise of a large private GROUP BY.

The sampler (duckdp/discrete.py) is exact integer arithmetic in Python, ~10⁵ draws per second on one core and
holding the GIL, so a large public key set (and, before thresholded draws settled most candidates without a
draw, keys="threshold" over millions of candidate keys) spent most of its time drawing on one core while DuckDB's
threads waited. A draw is a function of (K, counter, σ[, floor]) only, so any
split of the keys over processes gives the same draws: `DrawPool.draw` sends contiguous slices of the counters to
`workers` processes (one thread each feeds its process over a pipe and waits outside the GIL) and joins the
results in order. A process that fails is dropped and its slice drawn here: the same values, never a lost draw.

Why not concurrent.futures' ProcessPoolExecutor: its spawn and forkserver starts re-run the caller's `__main__`
(a user's script without an `if __name__ == "__main__"` guard would run again), and fork copies a process whose
DuckDB threads may hold locks. Workers here are `python -c` processes on this process's import path that
import only this module and the sampler, and read and answer on pipes of their own.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import IO

import numpy as np
import numpy.typing as npt

from .discrete import DiscreteGaussian, discrete_gaussian_array, thresholded_array
from .prf import PRFKey, _u64

MIN_PARALLEL = 16384      # fewer draws than this (~0.1–0.2 s on one core) are drawn here, without workers
TASK = 8192               # draws per request to a worker: small enough to balance, large next to a pipe's cost
_REQUEST = struct.Struct("<16sdq?")   # the key, σ, the number of counters n, floors?; then hi, lo (n uint64 each),
                                      # and the floors (n int64) where asked
_ANSWER = struct.Struct("<8sq")       # a tag and n; then the n draws (int64)
_TAG = b"dpdraws1"
_WORKER = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); from duckdp.draw_pool import serve; "
           "serve(int(sys.argv[2]), int(sys.argv[3]))")    # this process's import path: the same duckdp and numpy


class _Worker:
    """One worker process and the two pipes of its own it reads requests from and writes draws to (not its stdin or
    stdout, where start-up code such as a sitecustomize could print)."""

    def __init__(self, path: str):
        requests, send = os.pipe()
        receive, answers = os.pipe()
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", _WORKER, path, str(requests), str(answers)],
                                         pass_fds=(requests, answers), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except BaseException:
            os.close(send)
            os.close(receive)
            raise
        finally:
            os.close(requests)
            os.close(answers)
        self.to, self.back = os.fdopen(send, "wb"), os.fdopen(receive, "rb")
        self.dead = False

    def draw(self, key: PRFKey, hi: np.ndarray, lo: np.ndarray, sigma: float, floors: np.ndarray | None) -> np.ndarray:
        self.to.write(_REQUEST.pack(key.key, sigma, hi.size, floors is not None) + hi.tobytes() + lo.tobytes()
                      + (b"" if floors is None else floors.tobytes()))
        self.to.flush()
        tag, n = _ANSWER.unpack(_read(self.back, _ANSWER.size))
        if tag != _TAG or n != hi.size:
            raise EOFError("a draw worker answered out of turn")
        return np.frombuffer(_read(self.back, 8 * n), dtype=np.int64)

    def close(self) -> None:
        self.dead = True
        for pipe in (self.to, self.back):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)                  # EOF on its requests ends a worker between requests
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class DrawPool:
    """`discrete_gaussian_array`'s (or `thresholded_array`'s) draws, split over up to `workers` worker processes
    (started as calls of at least MIN_PARALLEL draws need them, closed with the pool); `workers` ≤ 1, or a process
    that cannot start one (`_can_start`), draws here. The result never depends on `workers`."""

    def __init__(self, workers: int):
        self.workers = max(1, int(workers)) if _can_start() else 1
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all: list[_Worker] = []

    def __enter__(self) -> DrawPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def draw(self, key: PRFKey, counters_hi: npt.ArrayLike, counters_lo: npt.ArrayLike, sigma: float,
             floors: npt.ArrayLike | None = None) -> np.ndarray:
        """`discrete_gaussian_array(key, counters_hi, counters_lo, sigma)`, or with `floors` `thresholded_array(…,
        floors)`, the same array, drawn by the workers."""
        hi, lo = _u64(counters_hi), _u64(counters_lo)
        m = None if floors is None else np.ascontiguousarray(floors, dtype=np.int64)
        if (self.workers <= 1 or hi.size < MIN_PARALLEL or hi.shape != lo.shape or hi.ndim != 1
                or (m is not None and m.shape != hi.shape)):
            return _here(key, hi, lo, sigma, m)
        DiscreteGaussian(sigma)                        # a bad σ fails here, as it does without workers
        if not self._start(min(self.workers, -(-hi.size // MIN_PARALLEL))):
            return _here(key, hi, lo, sigma, m)
        threads = ThreadPoolExecutor(len(self._all))
        try:
            tasks = [threads.submit(self._task, key, hi[s:s + TASK], lo[s:s + TASK], sigma,
                                    None if m is None else m[s:s + TASK]) for s in range(0, hi.size, TASK)]
            return np.concatenate([task.result() for task in tasks])
        finally:                                       # e.g. Ctrl-C: the requests not yet sent are dropped
            threads.shutdown(wait=True, cancel_futures=True)

    def _start(self, count: int) -> bool:
        """At least `count` workers running (one per MIN_PARALLEL draws asked for, up to `workers`: a small key set
        starts few); False (and draws here from then on) where this system cannot start one."""
        try:
            while len(self._all) < count:
                worker = _Worker(json.dumps([os.path.dirname(os.path.dirname(os.path.abspath(__file__))), *sys.path]))
                self._all.append(worker)
                self._idle.put(worker)
        except (OSError, ValueError):                  # no such executable, no process left, no pass_fds
            self.close()
            self.workers = 1
            return False
        return True

    def _task(self, key: PRFKey, hi: np.ndarray, lo: np.ndarray, sigma: float, m: np.ndarray | None) -> np.ndarray:
        """One slice on an idle worker; a worker that fails is closed, and its slices drawn here from then on."""
        worker = self._idle.get()
        try:
            if not worker.dead:
                try:
                    return worker.draw(key, hi, lo, sigma, m)
                except (OSError, ValueError, EOFError):
                    worker.close()
            return _here(key, hi, lo, sigma, m)
        finally:
            self._idle.put(worker)

    def close(self) -> None:
        """End every worker (idempotent)."""
        for worker in self._all:
            worker.close()
        self._all.clear()
        self._idle = queue.SimpleQueue()


def _can_start() -> bool:
    """Whether `sys.executable -c …` starts a Python worker: POSIX (pass_fds), not a frozen application (its
    executable would run the application itself), and an executable named python… (an embedding server's binary,
    such as uWSGI's, is not an interpreter)."""
    name = os.path.basename(sys.executable or "")
    return os.name == "posix" and not getattr(sys, "frozen", False) and name.startswith("python")


def _here(key: PRFKey, hi: np.ndarray, lo: np.ndarray, sigma: float, floors: np.ndarray | None) -> np.ndarray:
    """The draws of one request, in this process."""
    return (discrete_gaussian_array(key, hi, lo, sigma) if floors is None
            else thresholded_array(key, hi, lo, sigma, floors))


def _read(stream: IO[bytes], n: int) -> bytes:
    """Exactly n bytes from `stream`; EOFError if it ends first (a worker that died)."""
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("a draw worker ended")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(requests: int, answers: int) -> None:
    """A worker's loop: each request read from file descriptor `requests` (key, σ, counters[, floors]) answered on
    `answers` with its draws, until EOF. Ctrl-C goes to the caller, which closes the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with os.fdopen(requests, "rb") as inp, os.fdopen(answers, "wb") as out:
        while True:
            try:
                key, sigma, n, thresholded = _REQUEST.unpack(_read(inp, _REQUEST.size))
                counters = np.frombuffer(_read(inp, 16 * n), dtype=np.uint64)
                floors = np.frombuffer(_read(inp, 8 * n), dtype=np.int64) if thresholded else None
            except EOFError:
                return
            draws = _here(PRFKey(key), counters[:n], counters[n:], sigma, floors)
            out.write(_ANSWER.pack(_TAG, n) + draws.tobytes())
            out.flush()
