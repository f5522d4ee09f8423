#!/usr/bin/env python3
"""Module dependency cycles inside each crate (`use crate::…`, `super::…`, `child::…`
references between files): prints every cycle, exits 1 if any.
Usage: tests/modcycles.py CRATE_DIR... (each with a src/)."""
import os, re, sys

def strip_comments(src):
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    return src

def modpath(rel):
    parts = rel[:-3].split('/')
    if parts[-1] in ('mod', 'lib', 'main'):
        parts = parts[:-1]
    return tuple(parts)

def expand(prefix, tree):
    """Expand a use tree string into full paths."""
    tree = tree.strip()
    m = re.match(r'^(.*?)\{(.*)\}$', tree, re.S)
    if not m:
        yield prefix + [p for p in tree.split('::') if p and p != '*' and not p.startswith('self as')]
        return
    head = [p for p in m.group(1).split('::') if p]
    body, depth, cur, items = m.group(2), 0, '', []
    for ch in body:
        if ch == '{': depth += 1
        if ch == '}': depth -= 1
        if ch == ',' and depth == 0:
            items.append(cur); cur = ''
        else:
            cur += ch
    items.append(cur)
    for it in items:
        if it.strip():
            yield from expand(prefix + head, it)

def inline_depth(src, pos):
    d = 0
    for m in re.finditer(r'\bmod\s+\w+\s*\{', src):
        if m.start() > pos: break
        i, depth = m.end(), 1
        while i < len(src) and depth:
            depth += {'{': 1, '}': -1}.get(src[i], 0); i += 1
        if i > pos: d += 1
    return d

def crate_graph(root):
    files = {}
    for dp, _, fs in os.walk(root):
        for f in fs:
            if f.endswith('.rs'):
                rel = os.path.relpath(os.path.join(dp, f), root)
                files[modpath(rel)] = strip_comments(open(os.path.join(dp, f)).read())
    mods = set(files)
    def resolve(path):
        for n in range(len(path), 0, -1):
            if tuple(path[:n]) in mods: return tuple(path[:n])
        return None
    edges = {m: set() for m in mods}
    for me, src in files.items():
        refs = []
        for u in re.finditer(r'\buse\s+((?:crate|super|self)(?:::)?[^;]*);', src):
            for p in expand([], u.group(1)):
                refs.append((u.start(), p))
        for u in re.finditer(r'(?<![\w:])((?:crate|super)(?:::\w+)+)', src):
            refs.append((u.start(), u.group(1).split('::')))
        children = re.findall(r'\bmod\s+(\w+)\s*;', src)
        for c in children:
            for u in re.finditer(r'(?<![\w:])' + c + r'::', src):
                refs.append((u.start(), ['self', c]))
        for pos, p in refs:
            base, rest = list(me), list(p)
            if rest and rest[0] == 'crate':
                base, rest = [], rest[1:]
            else:
                skip = inline_depth(src, pos)
                while rest and rest[0] in ('super', 'self'):
                    if rest[0] == 'super':
                        if skip: skip -= 1
                        else: base = base[:-1]
                    rest = rest[1:]
            tgt = resolve(base + rest)
            if tgt and tgt != me and tgt != ():
                edges[me].add(tgt)
    return edges

def sccs(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(comp)
    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index: visit(v)
    return out

bad = 0
for crate in sys.argv[1:]:
    for comp in sccs(crate_graph(os.path.join(crate, 'src'))):
        bad = 1
        names = sorted('::'.join(c) for c in comp)
        print(f"{crate}: cycle between {', '.join(names)}")
sys.exit(bad)
