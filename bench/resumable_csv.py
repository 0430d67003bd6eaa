"""A benchmark's CSV, written row by row as results come and resumed on a rerun.

Every long benchmark in bench/ appends one row per measurement and flushes it,
so a run stopped at any point keeps what it measured; run again, it skips the
cells whose key is already in the file. The key is the tuple of the columns
that name a cell (a press, a context, a trial...), compared as the strings the
CSV holds.

    out = ResumableCsv(path, ["method", "n", "budget", "seconds"], key=["method", "n", "budget"])
    if not out.has("exact", 4096, 64):
        out.write(["exact", 4096, 64, f"{sec:.3f}"])   # or a dict by column name
    out.close()

A file whose header is not `fields` is refused (ValueError) rather than
appended to with columns that do not line up.
"""

import csv
import os


class ResumableCsv:
    def __init__(self, path: str, fields: list[str], key: list[str]):
        missing = [k for k in key if k not in fields]
        if missing:
            raise ValueError(f"{path}: key columns {missing} are not among the fields")
        self.fields = list(fields)
        self.key = list(key)
        self.done: set[tuple[str, ...]] = set()
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        if not new:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                if reader.fieldnames != self.fields:
                    raise ValueError(f"{path}: its header {reader.fieldnames} is not this benchmark's {self.fields}")
                self.done = {tuple(r[k] for k in self.key) for r in reader}
        self._file = open(path, "a", newline="")
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(self.fields)
            self._file.flush()

    def has(self, *key) -> bool:
        """Whether a row with this key (one value per key column, any type) is already in the file."""
        return tuple(str(v) for v in key) in self.done

    def write(self, row) -> None:
        """Appends one row (a list in field order, or a dict by column name, absent columns empty) and flushes."""
        self.write_all([row])

    def write_all(self, rows) -> None:
        """Appends rows that belong together (one cell's) and flushes once, after the last."""
        checked = [self._checked(row) for row in rows]  # every row checked before any is written
        self._writer.writerows(checked)
        self._file.flush()
        at = [self.fields.index(k) for k in self.key]
        self.done.update(tuple(str(row[i]) for i in at) for row in checked)

    def _checked(self, row) -> list:
        if isinstance(row, dict):
            unknown = set(row) - set(self.fields)
            if unknown:
                raise ValueError(f"columns {sorted(unknown)} are not among the fields")
            row = [row.get(k, "") for k in self.fields]
        elif len(row) != len(self.fields):
            raise ValueError(f"a row of {len(row)} values for {len(self.fields)} fields")
        return list(row)

    def close(self) -> None:
        self._file.close()
