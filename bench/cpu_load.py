"""How busy other processes kept the machine while a Python benchmark ran
(the twin of bench_load in bench/common.c): the benches report ratios from
shared machines, so each result carries this noise indicator. Also the
process's resident set (the twins of bench_peak_rss / bench_current_rss)."""
import os
import resource
import time


def _machine_busy_s():
    """Busy CPU seconds of the whole machine (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class LoadMeter:
    """Started on creation; foreign_pct() is the share of all cores, in
    percent, that other processes used since then, or -1.0 where /proc/stat
    cannot be read."""

    def __init__(self):
        self.wall, self.busy, self.own = time.perf_counter(), _machine_busy_s(), _own_cpu_s()

    def foreign_pct(self):
        wall, busy = time.perf_counter() - self.wall, _machine_busy_s()
        if self.busy is None or busy is None or wall <= 0:
            return -1.0
        pct = 100.0 * ((busy - self.busy) - (_own_cpu_s() - self.own)) / (wall * os.cpu_count())
        return max(pct, 0.0)


def current_rss():
    """Resident set now, in bytes (/proc/self/statm), or 0."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def peak_rss():
    """Peak resident set of this process in bytes (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def mib(b):
    return b / 1048576.0
