"""Fetch the sdists named in questions.json and check every answer's line.

Usage:
    python benchmarks/data/fetch_corpora.py [--dest DIR] [--questions FILE] [--no-fetch]

For each corpus in questions.json ("pypi": "name==version", "folder": "name-version")
this runs ``python -m pip download --no-binary :all: --no-deps SPEC`` into a temporary
folder and extracts the archive into DEST, so that DEST/<folder>/ holds the sdist root
(the folder with pyproject.toml / setup.py / src/). A corpus whose folder already exists
in DEST is skipped. --no-fetch only checks what is already there.

Then every answer is checked: DEST/<folder>/<path> must exist and line <line> (1-based)
must be a ``def`` / ``async def`` / ``class`` of the last component of ``symbol``; for a
dotted symbol (Class.method) the nearest enclosing ``class`` above it must be the
second-to-last component. Exits 1 with one message per problem otherwise.

Standard library only (pip is called as a subprocess). Default DEST is
~/.cache/codesearch/corpora.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DEST = Path("~/.cache/codesearch/corpora").expanduser()

_DEF = re.compile(r"^(?P<indent>[ \t]*)(?:async[ \t]+)?(?P<kw>def|class)[ \t]+(?P<name>\w+)")


def _safe_members(tar: tarfile.TarFile, dest: Path) -> list[tarfile.TarInfo]:
    root = dest.resolve()
    members = []
    for m in tar.getmembers():
        target = (dest / m.name).resolve()
        if target != root and root not in target.parents:
            raise RuntimeError(f"unsafe path in archive: {m.name}")
        if m.issym() or m.islnk() or m.isdev():
            continue
        members.append(m)
    return members


def _extract(archive: Path, dest: Path) -> list[str]:
    """Extract into dest; return the top-level names that were created."""
    if archive.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        with tarfile.open(archive) as tar:
            members = _safe_members(tar, dest)
            if sys.version_info >= (3, 12):
                tar.extractall(dest, members=members, filter="data")
            else:
                tar.extractall(dest, members=members)
            names = [m.name for m in members]
    elif archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            root = dest.resolve()
            for n in zf.namelist():
                target = (dest / n).resolve()
                if target != root and root not in target.parents:
                    raise RuntimeError(f"unsafe path in archive: {n}")
            zf.extractall(dest)
            names = zf.namelist()
    else:
        raise RuntimeError(f"unknown archive type: {archive.name}")
    return sorted({n.split("/", 1)[0] for n in names if n})


def fetch(spec: str, folder: str, dest: Path) -> None:
    target = dest / folder
    if target.is_dir():
        print(f"skip   {folder} (already in {dest})")
        return
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="codesearch-sdist-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:",
               "--no-deps", "--disable-pip-version-check", "-d", tmp, spec]
        print("fetch ", " ".join(cmd[2:]))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        archives = [p for p in Path(tmp).iterdir() if p.is_file()]
        if len(archives) != 1:
            raise RuntimeError(f"expected one archive for {spec}, got {[a.name for a in archives]}")
        with tempfile.TemporaryDirectory(prefix="x-", dir=dest) as xdir:
            tops = _extract(archives[0], Path(xdir))
            if len(tops) != 1:
                raise RuntimeError(f"{archives[0].name}: expected one top folder, got {tops}")
            shutil.move(str(Path(xdir) / tops[0]), str(target))
    print(f"ok     {folder}")


def check_answer(root: Path, ans: dict) -> str | None:
    path = root / ans["path"]
    if not path.is_file():
        return f"missing file {path}"
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    line = ans["line"]
    if not isinstance(line, int) or not 1 <= line <= len(lines):
        return f"{ans['path']}: line {line} out of range (1..{len(lines)})"
    parts = ans["symbol"].split(".")
    m = _DEF.match(lines[line - 1])
    if m is None or m.group("name") != parts[-1]:
        return (f"{ans['path']}:{line} is not a def/class of {parts[-1]!r}: "
                f"{lines[line - 1].strip()[:80]!r}")
    if len(parts) > 1:
        indent = len(m.group("indent").expandtabs())
        for i in range(line - 2, -1, -1):
            text = lines[i]
            if not text.strip() or text.lstrip().startswith(("#", "@", ")")):
                continue
            ind = len(text) - len(text.lstrip())
            if ind >= indent:
                continue
            outer = _DEF.match(text)
            if outer is None:
                # a continuation line of a signature or an expression; keep going up
                continue
            if outer.group("kw") != "class" or outer.group("name") != parts[-2]:
                return (f"{ans['path']}:{line} {parts[-1]!r} is inside "
                        f"{outer.group('kw')} {outer.group('name')!r}, not class {parts[-2]!r}")
            break
        else:
            return f"{ans['path']}:{line} {parts[-1]!r} is not inside class {parts[-2]!r}"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST,
                    help=f"folder for the extracted sdists (default {DEFAULT_DEST})")
    ap.add_argument("--questions", type=Path, default=HERE / "questions.json")
    ap.add_argument("--no-fetch", action="store_true", help="only check what is already in --dest")
    args = ap.parse_args(argv)
    dest = args.dest.expanduser()

    data = json.loads(args.questions.read_text(encoding="utf-8"))
    corpora = data["corpora"]
    errors: list[str] = []

    if not args.no_fetch:
        for name, c in corpora.items():
            try:
                fetch(c["pypi"], c["folder"], dest)
            except (subprocess.CalledProcessError, RuntimeError, OSError) as e:
                errors.append(f"{name}: could not fetch {c['pypi']}: {e}")

    ids = set()
    for q in data["questions"]:
        qid = q.get("id")
        if qid in ids:
            errors.append(f"duplicate id {qid}")
        ids.add(qid)
        if q.get("corpus") not in corpora:
            errors.append(f"{qid}: unknown corpus {q.get('corpus')!r}")
            continue
        if q.get("kind") not in ("behaviour", "architecture", "identifier"):
            errors.append(f"{qid}: bad kind {q.get('kind')!r}")
        if not q.get("query") or not q.get("answers"):
            errors.append(f"{qid}: empty query or answers")
            continue
        root = dest / corpora[q["corpus"]]["folder"]
        if not root.is_dir():
            errors.append(f"{qid}: corpus folder {root} is missing")
            continue
        for ans in q["answers"]:
            msg = check_answer(root, ans)
            if msg:
                errors.append(f"{qid}: {msg}")

    if errors:
        for e in errors:
            print("ERROR", e, file=sys.stderr)
        return 1
    n_ans = sum(len(q["answers"]) for q in data["questions"])
    print(f"checked {len(data['questions'])} questions, {n_ans} answers in {len(corpora)} corpora under {dest}: "
          "all lines hold their def/class")
    return 0


if __name__ == "__main__":
    sys.exit(main())
