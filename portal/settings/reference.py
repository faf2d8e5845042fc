"""The operator guide's settings tables, written from the declarations (`make settings-docs`).

Each table sits between `<!-- settings: NAME -->` and `<!-- end settings -->` in
docs/operator-guide.md: NAME is one of portal/settings/environment.py's tables, or `node` for
plugin/environment.py's. tests/test_environment.py fails when the guide is not what this writes.
"""

from __future__ import annotations

import re
import sys

from plugin import environment as node
from portal.settings import environment

GUIDE = environment.BASE_DIR / "docs" / "operator-guide.md"
TABLE = re.compile(r"(<!-- settings: ([\w-]+) -->\n)(.*?)(<!-- end settings -->)", re.S)
NODE = "node"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def portal_table(name: str) -> str:
    rows = [v for v in environment.declared.values() if v.table == name]
    if not rows:
        raise KeyError(f"no settings table {name!r} in portal/settings/environment.py")
    lines = ["| variable | default | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{v.name}` | {_cell(v.default)} | {_cell(v.help)} |" for v in rows]
    return "\n".join(lines) + "\n"


def node_table() -> str:
    lines = ["| variable | flag | `python -m` | default | meaning |", "| --- | --- | --- | --- | --- |"]
    for option in node.declared():
        default = option.shown if option.shown is not None else environment.shown(option.default)
        programs = ", ".join(f"`{program}`" for program in node.programs_of(option))
        cells = (f"`{option.env}`", f"`{option.flag}`", programs, _cell(default), _cell(option.help))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table(name: str) -> str:
    return node_table() if name == NODE else portal_table(name)


def tables_in(text: str) -> dict[str, str]:
    """The guide's tables by name, as they stand."""
    return {m.group(2): m.group(3) for m in TABLE.finditer(text)}


def rewritten(text: str) -> str:
    """The guide with every table written from the declarations."""
    return TABLE.sub(lambda m: m.group(1) + table(m.group(2)) + m.group(4), text)


def main() -> int:
    text = GUIDE.read_text(encoding="utf-8")
    new = rewritten(text)
    if new != text:
        GUIDE.write_text(new, encoding="utf-8")
        print(f"rewrote the settings tables in {GUIDE.relative_to(environment.BASE_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
