"""A program's output as an application run reads it: passed on as it comes, kept with a bound.

launch.execute hands over stdout in pieces of at most MAX_LINE characters; what is kept for the parsers
is the first HEAD_LIMIT and the last TAIL_LIMIT characters of whole lines, and a line longer than
MAX_LINE is not kept at all (a marker names it by its number). So vnetbench's memory stays within
about HEAD_LIMIT + TAIL_LIMIT + MAX_LINE whatever the program prints.
"""

import collections

from vnetbench.core.files import MAX_LINE

# what of a program's stdout is kept for the success pattern, the parser and the regex metrics: the first
# HEAD_LIMIT and the last TAIL_LIMIT characters of whole lines (LAMMPS's last loop is at the end, a "first"
# match at the start); the middle of a longer output is passed on and counted, not kept
HEAD_LIMIT = 4 << 20
TAIL_LIMIT = 16 << 20
TAIL_CHARS = 500  # of each output line a record keeps: a record stays one short line of the store
OVERLONG_NAMED = 10  # overlong lines named by number; past these, "and maybe more"


class Capture:
    """A passthrough for ``launch.execute``: echoes the output as it comes and keeps what the parsers read,
    bounded. A line longer than MAX_LINE is not kept: a marker in its place names it by its number."""

    def __init__(self, echo):
        self.echo = echo
        self.head, self.head_size = [], 0
        self.lines, self.size = collections.deque(), 0  # the tail
        self.line = 1  # number of the line being written
        self.partial, self.partial_size = [], 0
        self.overlong: list[int] = []  # numbers of the lines not kept (the first few)
        self.skipping = False  # the rest of an overlong line is passing
        self.dropped = 0  # characters of whole lines between the head and the tail, not kept

    def write(self, piece: str) -> None:
        if self.echo is not None:
            self.echo.write(piece)
        ends = piece.endswith("\n")
        if self.skipping:
            self.skipping = not ends
        else:
            self.partial.append(piece)
            self.partial_size += len(piece)
            if self.partial_size > MAX_LINE:
                self.partial, self.partial_size, self.skipping = [], 0, not ends
                if len(self.overlong) < OVERLONG_NAMED:
                    self.overlong.append(self.line)
                self._keep(f"[vnetbench: output line {self.line} is longer than {MAX_LINE >> 20} MiB; not read]\n")
            elif ends:
                self._keep("".join(self.partial))
                self.partial, self.partial_size = [], 0
        if ends:
            self.line += 1

    def _keep(self, line: str) -> None:
        if not self.lines and self.head_size + len(line) <= HEAD_LIMIT:
            self.head.append(line)
            self.head_size += len(line)
            return
        self.lines.append(line)
        self.size += len(line)
        while self.size > TAIL_LIMIT and len(self.lines) > 1:
            gone = len(self.lines.popleft())
            self.size -= gone
            self.dropped += gone

    def flush(self) -> None:
        if self.echo is not None:
            self.echo.flush()

    def text(self) -> str:
        middle = [f"[vnetbench: {self.dropped} characters of output not kept]\n"] if self.dropped else []
        return "".join([*self.head, *middle, *self.lines, *self.partial])

    def notes(self) -> list[str]:
        """What of the output was not read, for the record's detail."""
        out = []
        if self.overlong:
            more = "" if len(self.overlong) < OVERLONG_NAMED else " and maybe more"
            out.append(f"output line(s) {', '.join(map(str, self.overlong))}{more} longer than "
                       f"{MAX_LINE >> 20} MiB: not read")
        if self.dropped:
            out.append(f"output of {(self.head_size + self.dropped + self.size) / 2**20:.0f} MiB: only its first "
                       f"{HEAD_LIMIT >> 20} MiB and last {TAIL_LIMIT >> 20} MiB read")
        return out


def last_lines(text: str, count: int) -> list[str]:
    # found from the end: splitting tens of MiB of output into lines to keep the last few costs their size again
    end = len(text.rstrip("\n"))
    start = end
    for _ in range(count):
        start = text.rfind("\n", 0, start)
        if start < 0:
            break
    return text[start + 1:end].splitlines()[-count:]
