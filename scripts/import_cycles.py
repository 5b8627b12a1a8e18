#!/usr/bin/env python3
"""Prints the import circles among a crate's source files; exits 1 when there is one.

    python3 scripts/import_cycles.py [CRATE_DIR] [--edges]

CRATE_DIR defaults to `contract-core`. Every `.rs` file under `CRATE_DIR/src` is a node, named by
its module path (`foo.rs` and `foo/mod.rs` are `foo`, `lib.rs` (or `main.rs`) is the crate root).
A file imports another when its non-test code names a path into it:

- `use` trees (`use crate::a::{b, c::D};`, of any visibility, `pub use` included) and paths
  written in code (`crate::a::b::f()`);
- paths starting with `crate::` (or the crate's own name, where `lib.rs` says
  `extern crate self as NAME`), `super::` and `self::`, resolved from the module they are written
  in (inline `mod x { .. }` blocks included), and bare paths whose first segment is a child module
  of that module (`check::f()` in `validate/mod.rs`) or a module an earlier `use` brought in
  (`use super::read;` then `read::tree(..)`).

A path goes to the deepest module file it names. When it goes on to a name that file does not
define but imports (`pub use x::Name;`, or a glob `pub use x::*;` whose source defines it), it
follows that import to the file that does, so that a facade (`lib.rs`, a `mod.rs` that
re-exports) is not a node on every path through it. A `use` of a module itself (`use
crate::grammar;`) counts only where code goes through it (`grammar::Shape`). Paths into other
crates are not counted, nor a `mod x;` declaration.

Not read: comments, string and character literals, and everything from the first line that is
exactly `#[cfg(test)]` followed by a `mod tests` line to the end of the file. `#[path]`
attributes and macros are not understood.

The strongly connected components (Tarjan) of more than one file are the circles: they are printed
largest first, with `--edges` the imports inside each (`from -> to  via path`), then a one-line
summary.
"""

import argparse
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
RAW_STR = re.compile(r'b?r(#*)"')
CHAR_LIT = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]{1,8}\}|.)|[^\\'\n])'")
USE = re.compile(r"(?<![\w.])(pub(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);")
PATH = re.compile(rf"(?<![\w:$#])({IDENT}(?:\s*::\s*{IDENT})+)")
INLINE_MOD = re.compile(rf"(?<![\w])mod\s+({IDENT})\s*\{{")
DEFINES = re.compile(
    rf"(?<![\w])(?:struct|enum|union|trait|fn|type|const|static|mod)\s+({IDENT})"
    rf"|macro_rules!\s*({IDENT})"
)
SELF_ALIAS = re.compile(rf"extern\s+crate\s+self\s+as\s+({IDENT})\s*;")


def strip_tests(text):
    """The text before the first `#[cfg(test)]` line followed by a `mod tests` line."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.rstrip("\r") != "#[cfg(test)]":
            continue
        rest = [l.strip() for l in lines[i + 1 :] if l.strip()]
        if rest and re.match(r"(pub(\([^)]*\))?\s+)?mod\s+tests\b", rest[0]):
            return "\n".join(lines[:i])
    return text


def blank(text):
    """The code with comments, strings and character literals replaced by spaces (lines kept)."""
    out = []
    i, n = 0, len(text)

    def keep_lines(s):
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(keep_lines(text[i:j]))
            i = j
        elif (m := RAW_STR.match(text, i)) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + m.group(1)
            j = text.find(close, m.end())
            j = n if j < 0 else j + len(close)
            out.append(keep_lines(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(keep_lines(text[i:j]))
            i = j
        elif c == "'" and (m := CHAR_LIT.match(text, i)):
            out.append(" " * (m.end() - i))
            i = m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_use(tree):
    """The leaves of a `use` tree: (segments, local name or None for a glob); `::x` is dropped."""
    tokens = re.findall(rf"::|{IDENT}|[{{}},*]", tree)
    leaves = []

    def parse(i, prefix):
        segs = list(prefix)
        while i < len(tokens) and re.fullmatch(IDENT, tokens[i]) and tokens[i] != "as":
            segs.append(tokens[i])
            i += 1
            if i < len(tokens) and tokens[i] == "::":
                i += 1
            else:
                break
        if i < len(tokens) and tokens[i] == "*":
            leaves.append((segs, None))
            return i + 1
        if i < len(tokens) and tokens[i] == "{":
            i += 1
            while i < len(tokens) and tokens[i] != "}":
                if tokens[i] == ",":
                    i += 1
                    continue
                i = parse(i, segs)
            return i + 1
        if segs and segs[-1] == "self":
            segs = segs[:-1]
        name = segs[-1] if segs else None
        if i + 1 < len(tokens) and tokens[i] == "as":
            name = tokens[i + 1]
            i += 2
        if segs:
            leaves.append((segs, name))
        return i

    if tokens and tokens[0] == "::":
        return []
    i = 0
    while i < len(tokens):
        if tokens[i] == ",":
            i += 1
            continue
        j = parse(i, [])
        i = j if j > i else i + 1
    return leaves


def module_of(rel):
    """`a/b.rs` and `a/b/mod.rs` -> ('a', 'b'); `lib.rs` and `main.rs` -> ()."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod" or (len(parts) == 1 and parts[0] in ("lib", "main")):
        parts = parts[:-1]
    return tuple(parts)


class Crate:
    def __init__(self, src):
        self.files = {}  # module path -> relative file name
        self.code = {}  # module path -> blanked non-test code
        for root, _, names in os.walk(src):
            for name in sorted(names):
                if not name.endswith(".rs"):
                    continue
                rel = os.path.relpath(os.path.join(root, name), src)
                if rel.startswith("bin" + os.sep):
                    continue
                mod = module_of(rel)
                if mod == () and rel == "main.rs" and () in self.files:
                    continue
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    self.files[mod] = rel
                    self.code[mod] = blank(strip_tests(f.read()))
        root_code = self.code.get((), "")
        self.crate_names = {"crate"} | set(SELF_ALIAS.findall(root_code))
        self.defs = {m: self.defined(code) for m, code in self.code.items()}
        # module path -> {name: absolute path it imports}, [glob source module paths]
        self.imports = {}
        self.globs = {}
        self.uses = {}  # module path -> [(scope, segments, local name or None)]
        for m, code in self.code.items():
            self.imports[m], self.globs[m], self.uses[m] = {}, [], []
            for use in USE.finditer(code):
                scope = self.scope(m, code, use.start())
                for segs, name in parse_use(use.group(2)):
                    self.uses[m].append((scope, segs, name, use.start()))

    @staticmethod
    def defined(code):
        return {a or b for a, b in DEFINES.findall(code)}

    def scope(self, mod, code, pos):
        """The module a position in a file is in (the file's module, or an inline `mod` in it)."""
        scope = list(mod)
        for m in INLINE_MOD.finditer(code[:pos]):
            depth, j = 1, m.end()
            while j < pos and depth:
                depth += {"{": 1, "}": -1}.get(code[j], 0)
                j += 1
            if depth:
                scope.append(m.group(1))
        return tuple(scope)

    def deepest(self, path):
        for k in range(len(path), -1, -1):
            if tuple(path[:k]) in self.files:
                return k
        return 0

    def absolute(self, scope, segs, aliases):
        """The path `segs`, written in `scope`, from the crate root; None when it leaves the crate."""
        first = segs[0]
        if first in self.crate_names:
            return list(segs[1:])
        if first in ("self", "super"):
            base, rest = list(scope), list(segs)
            if rest[0] == "self":
                rest = rest[1:]
            while rest and rest[0] == "super":
                if not base:
                    return None
                base, rest = base[:-1], rest[1:]
            return base + rest
        if first in aliases:
            return list(aliases[first]) + list(segs[1:])
        if tuple(scope) + (first,) in self.files:
            return list(scope) + list(segs)
        return None

    def resolve(self, path, seen=frozenset()):
        """The file a crate path leads to, through the imports of the files on the way."""
        k = self.deepest(path)
        mod = tuple(path[:k])
        if k == len(path):
            return mod
        name, rest = path[k], path[k + 1 :]
        if name in self.defs[mod] or (mod, name) in seen:
            return mod
        seen = seen | {(mod, name)}
        if name in self.imports[mod]:
            return self.resolve(self.imports[mod][name] + rest, seen)
        for g in self.globs[mod]:
            gm = tuple(g[: self.deepest(g)])
            if len(gm) == len(g) and (name in self.defs[gm] or name in self.imports[gm]):
                return self.resolve(list(g) + [name] + rest, seen)
        return mod

    def build_imports(self):
        """Fills each file's table of imported names (before any path is resolved)."""
        for m in self.files:
            aliases = {}  # scope -> {name: module path}
            for scope, segs, name, _ in self.uses[m]:
                path = self.absolute(scope, segs, aliases.setdefault(scope, {}))
                if path is None:
                    continue
                if scope == m and name is None:
                    self.globs[m].append(path)
                elif scope == m:
                    self.imports[m][name] = path
                if name is not None and self.deepest(path) == len(path):
                    aliases[scope][name] = path

    def edges(self):
        """{(from, to): first path that makes the edge}."""
        self.build_imports()
        found = {}
        for m, code in self.code.items():
            aliases = {}  # scope -> {name: module path}
            spans = []
            for scope, segs, name, _ in self.uses[m]:
                path = self.absolute(scope, segs, aliases.setdefault(scope, {}))
                if path is None:
                    continue
                is_module = self.deepest(path) == len(path)
                if name is not None and is_module:
                    aliases[scope][name] = path  # counted where code goes through it
                    continue
                target = self.resolve(path) if name is not None else tuple(path[: self.deepest(path)])
                if target != m:
                    found.setdefault((m, target), "use " + "::".join(segs + ([] if name else ["*"])))
            for use in USE.finditer(code):
                spans.append((use.start(), use.end()))
            for p in PATH.finditer(code):
                if any(a <= p.start() < b for a, b in spans):
                    continue
                segs = [s.strip() for s in p.group(1).split("::")]
                scope = self.scope(m, code, p.start())
                path = self.absolute(scope, segs, aliases.get(scope, {}))
                if path is None:
                    continue
                target = self.resolve(path)
                if target != m:
                    found.setdefault((m, target), "::".join(segs))
        return found


def tarjan(nodes, succ):
    index, low, on, stack, comps = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(max(1000, 4 * len(nodes) + 100))
    for v in nodes:
        if v not in index:
            visit(v)
    return comps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("crate", nargs="?", default="contract-core")
    ap.add_argument("--edges", action="store_true", help="print the imports inside each circle")
    args = ap.parse_args()
    src = os.path.join(args.crate, "src")
    if not os.path.isdir(src):
        sys.exit(f"no {src}")
    crate = Crate(src)
    edges = crate.edges()
    succ = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    nodes = sorted(crate.files)
    comps = [c for c in tarjan(nodes, succ) if len(c) > 1]
    comps.sort(key=lambda c: (-len(c), sorted(crate.files[m] for m in c)))
    for i, comp in enumerate(comps, 1):
        names = sorted(crate.files[m] for m in comp)
        print(f"circle {i}: {len(comp)} files: {', '.join(names)}")
        if args.edges:
            inside = set(comp)
            for (a, b), via in sorted(edges.items(), key=lambda e: (crate.files[e[0][0]], crate.files[e[0][1]])):
                if a in inside and b in inside:
                    print(f"    {crate.files[a]} -> {crate.files[b]}  via {via}")
    name = os.path.basename(os.path.normpath(args.crate))
    if comps:
        sizes = ", ".join(str(len(c)) for c in comps)
        print(f"{name}: {len(comps)} import circle(s) ({sizes} files) among {len(nodes)} files")
        return 1
    print(f"{name}: no import circle among {len(nodes)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
