#!/usr/bin/env python3
"""Import cycles between the modules of one Rust crate.

Builds the module graph from `use crate::…` / `use super::…` / `use self::…` trees and from
paths written inline in code (`crate::x::f()`), ignoring comments and `#[cfg(test)] mod tests`
blocks, and prints every elementary cycle (and, with --groups, cycles between the top-level
modules, each folder counted as one node). Exit status 1 when there is a cycle.

Usage: scripts/module-cycles.py CRATE/src [--groups]
"""
import re
import sys
from pathlib import Path


def module_of(src: Path, file: Path) -> tuple:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("lib", "main", "mod"):
        parts = parts[:-1]
    return tuple(parts)


def strip(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    # Unit-test modules are children that see everything of their parent; not imports.
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def expand(tree: str) -> list:
    """`a::{b, c::{d, self}}` -> [a::b, a::c::d, a::c]."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^([^{]*)\{(.*)\}$", tree)
    if not m:
        return [re.sub(r"(::self)?(as\w+)?$", "", tree)]
    prefix, inner = m.group(1), m.group(2)
    items, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    items.append(cur)
    paths = []
    for item in filter(None, items):
        for p in expand(item):
            paths.append(prefix.rstrip(":") if p == "self" else prefix + p)
    return paths


def resolve(current: tuple, path: str, modules: set):
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, rest = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = current
        while segs and segs[0] in ("super", "self"):
            if segs.pop(0) == "super":
                base = base[:-1]
        rest = segs
    elif (current + (segs[0],)) in modules:  # `use child::x` in a module's own file
        base, rest = current, segs
    else:
        return None
    target = base
    for seg in rest:
        if target + (seg,) in modules:
            target = target + (seg,)
        else:
            break
    return target


def graph(src: Path) -> dict:
    files = {module_of(src, f): f for f in sorted(src.rglob("*.rs"))}
    modules = set(files)
    edges = {m: set() for m in modules}
    for module, file in files.items():
        code = strip(file.read_text())
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            paths += expand(m.group(1))
        paths += re.findall(r"\b(?:crate|super|self)(?:::\w+)+", code)
        for path in paths:
            target = resolve(module, path, modules)
            if target is not None and target != module:
                edges[module].add(target)
    return edges


def cycles(edges: dict) -> list:
    """Elementary cycles, each once, starting at its smallest node."""
    found = []
    nodes = sorted(edges)

    def walk(start, node, path, seen):
        for nxt in sorted(edges.get(node, ())):
            if nxt == start:
                found.append(path[:])
            elif nxt > start and nxt not in seen:
                seen.add(nxt)
                path.append(nxt)
                walk(start, nxt, path, seen)
                path.pop()
                seen.discard(nxt)

    for start in nodes:
        walk(start, start, [start], {start})
    return found


def components(edges: dict) -> list:
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def name(module: tuple) -> str:
    return "::".join(("crate",) + module)


def main() -> int:
    src = Path(sys.argv[1])
    edges = graph(src)
    if "--groups" in sys.argv[2:]:
        grouped = {}
        for m, targets in edges.items():
            g = m[:1]
            grouped.setdefault(g, set()).update(t[:1] for t in targets if t[:1] != g and t)
        edges = grouped
    found = cycles(edges)
    groups = components(edges)
    for group in groups:
        print("strongly connected: " + ", ".join(name(m) for m in group))
    for cycle in found:
        print(" -> ".join(name(m) for m in cycle + cycle[:1]))
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} imports, {len(groups)} strongly connected groups, "
          f"{len(found)} elementary cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
