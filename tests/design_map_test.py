"""docs/design.md's map names every file of the tree (issue 24): every file under src/, include/, python/, tests/,
bench/, fuzz/, examples/, scripts/ and .ci/ (but the data of fuzz/corpus/ and bench/gpu-runs/) must be named in
the "## Map" section, by its file name or its stem (the name up to its first dot), as a whole word. A test
`X_test.cpp` (or `X_test.py`, ...) also counts as named when X is: tests mirror the file they test.

    python3 tests/design_map_test.py REPO_ROOT

The files are git's (`git ls-files`); without git or a .git, the folders above are walked (so build trees,
.dev/ and .git/ at the root are never entered; __pycache__/ is skipped). Prints every file not named and exits 1, else prints how many files were checked. Run by
ctest (label cpu); standard library only."""

import os
import re
import subprocess
import sys

TOPS = ("src", "include", "python", "tests", "bench", "fuzz", "examples", "scripts", ".ci")
DATA = ("fuzz/corpus/", "bench/gpu-runs/")


def map_section(root):
    with open(os.path.join(root, "docs", "design.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    try:
        start = lines.index("## Map")
    except ValueError:
        sys.exit("design_map_test: docs/design.md has no line '## Map'")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start + 1:end])


def git_files(root):
    if not os.path.exists(os.path.join(root, ".git")):
        return None
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return [f for f in out.stdout.split("\0") if f]


def walked_files(root):
    # Only the folders of TOPS are walked, so the build trees at the root (build*/) and .dev/ and .git/ are never
    # entered; inside them, generated folders are skipped (python/build_backend/ is a source folder, not a build).
    files = []
    for top in TOPS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in (".dev", ".git", "__pycache__")]
            for name in filenames:
                files.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return files


def named(text, word):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", text) is not None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: design_map_test.py REPO_ROOT")
    root = sys.argv[1]
    text = map_section(root)
    files = git_files(root)
    if files is None:
        files = walked_files(root)
    checked, missing = 0, []
    for f in sorted(files):
        if f.split("/")[0] not in TOPS or f.startswith(DATA):
            continue
        checked += 1
        name = f.rsplit("/", 1)[-1]
        stem = name.split(".")[0]
        words = {name, stem}
        if stem.endswith("_test") and len(stem) > len("_test"):
            words.add(stem[:-len("_test")])
        if not any(named(text, w) for w in words):
            missing.append(f)
    if missing:
        print("docs/design.md's map (section '## Map') does not name %d of %d files:" % (len(missing), checked))
        for f in missing:
            print("  " + f)
        return 1
    if checked == 0:
        print("design_map_test: no file found under " + ", ".join(TOPS))
        return 1
    print("docs/design.md's map names all %d files" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
