#!/usr/bin/env python3
"""Generates ssa/src/builtin/types.rs: the field-management schema of the built-in
Kubernetes kinds, per Kubernetes minor: what structured-merge-diff uses (list kinds and
keys, map and struct atomicity, untyped values, key defaults) as each release's published
OpenAPI v3 has it (ssa/gen/openapi-smd.json, written by ssa/gen/openapi.py from the
specs, by kube-openapi schemaconv's rules), and what the JSON round trip of the Go types
needs (Go shapes, `omitempty`, `+default`s) from the Go API types.

A field, a type's atomicity and a kind carry the minors they hold in (`M(lo, hi)`): a
field added in 1.33 is `M(33, 255)`, one removed in 1.31 `M(0, 30)`; 0 stands for every
minor up to the oldest spec read, 255 for every minor after the newest, where the Go
types (newer than any published spec) decide. Where a spec and the Go markers disagree,
the spec wins (it is what the server runs); the Go types' answer is the one for minors
after the newest spec.

Read per struct field: its JSON name and `omitempty`, its Go shape (pointer, value,
slice, map), and the markers the OpenAPI generator turns into schema extensions:
`+listType` / `+listMapKey` (x-kubernetes-list-type / -list-map-keys), `+mapType`,
`+structType`, `+patchStrategy` / `+patchMergeKey` (used, like kube-openapi's schemaconv,
when a list has no `+listType`) and `+default`.

Usage: builtin.py API APIMACHINERY APIEXTENSIONS AGGREGATOR > ssa/src/builtin/types.rs
where each argument is a git directory (or work tree) of kubernetes/api,
kubernetes/apimachinery, kubernetes/apiextensions-apiserver, kubernetes/kube-aggregator;
ssa/gen/openapi-smd.json is read from beside this script. The generated file names the
commits it was read from.
"""
import json
import re
import os
import subprocess
import sys

API, MACH, EXT, AGG = sys.argv[1:5]
EXTRACT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openapi-smd.json")

# (repo, dir, schema prefix, files)
PACKAGES = [
    (MACH, "pkg/apis/meta/v1", "io.k8s.apimachinery.pkg.apis.meta.v1", ["types.go"]),
    (EXT, "pkg/apis/apiextensions/v1", "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1", ["types.go", "types_jsonschema.go"]),
    (AGG, "pkg/apis/apiregistration/v1", "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1", ["types.go"]),
]
for g in ["core/v1", "apps/v1", "batch/v1", "rbac/v1", "networking/v1", "policy/v1",
          "autoscaling/v1", "autoscaling/v2", "storage/v1", "scheduling/v1", "coordination/v1",
          "admissionregistration/v1", "discovery/v1", "events/v1", "node/v1", "certificates/v1",
          "flowcontrol/v1", "resource/v1"]:
    PACKAGES.append((API, g, "io.k8s.api." + g.replace("/", "."), ["types.go"]))

IMPORT_PREFIX = {
    "k8s.io/api/": "io.k8s.api.",
    "k8s.io/apimachinery/pkg/apis/meta/v1": "io.k8s.apimachinery.pkg.apis.meta.v1",
}
# Types the schema treats as scalars or untyped values: what openapi-gen writes for them
# and kube-openapi's schemaconv makes of that (RawExtension is hard-coded untyped atomic;
# JSON and JSONSchemaPropsOr* have no `type`: untyped, maps deduced; FieldsV1 is an object
# without properties: a granular map of deduced values).
SPECIAL = {
    "resource.Quantity": ("Quantity",),
    "intstr.IntOrString": ("IntOrStr",),
    "metav1.Time": ("Time",), "Time": ("Time",), "metav1.MicroTime": ("Time",), "MicroTime": ("Time",),
    "metav1.Duration": ("Str",), "Duration": ("Str",),
    "types.UID": ("Str",), "types.NodeName": ("Str",),
    "runtime.RawExtension": ("Untyped",),
    "JSON": ("Deduced",), "JSONSchemaPropsOrArray": ("Deduced",), "JSONSchemaPropsOrBool": ("Deduced",),
    "JSONSchemaPropsOrStringArray": ("Deduced",),
    "metav1.FieldsV1": ("Map", ("Deduced",), False), "FieldsV1": ("Map", ("Deduced",), False),
}
BASIC = {"string": "Str", "bool": "Bool", "int": "Int", "int32": "Int", "int64": "Int",
         "uint": "Int", "uint32": "Int", "uint64": "Int", "float32": "Float", "float64": "Float",
         "byte": "Int"}


def git_show(repo, path):
    return subprocess.run(["git", "--git-dir", repo if repo.endswith(".git") or repo.endswith("repo") else repo + "/.git",
                           "show", "HEAD:" + path], check=True, capture_output=True, text=True).stdout


def commit(repo):
    return subprocess.run(["git", "--git-dir", repo, "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


structs = {}   # full name -> {"atomic": bool, "fields": [...]}
aliases = {}   # full name -> (go type expr, markers, pkgctx)


def markers_of(comment_lines):
    m = {}
    for line in comment_lines:
        line = line.strip()
        if not line.startswith("// +"):
            continue
        body = line[4:]
        if body.startswith("k8s:"):
            body = body[4:]
            prefixed = True
        else:
            prefixed = False
        key, _, val = body.partition("=")
        key = key.strip()
        if key == "listMapKey":
            if not prefixed or "listMapKey" not in m:
                m.setdefault("listMapKey" + ("_k8s" if prefixed else ""), []).append(val.strip())
            continue
        if prefixed and key in m:
            continue
        m[key] = val.strip()
    if "listMapKey" not in m and "listMapKey_k8s" in m:
        m["listMapKey"] = m["listMapKey_k8s"]
    m.pop("listMapKey_k8s", None)
    return m


def parse_package(repo, d, prefix, files):
    for f in files:
        src = git_show(repo, d + "/" + f)
        imports = dict(re.findall(r'^\s*(\w+)?\s*"([^"]+)"', src.split("\n)\n", 1)[0], re.M))
        alias_pkg = {}
        for m in re.finditer(r'^\s*(?:import\s+)?(?:(\w+)\s+)?"([^"]+)"\s*$', src, re.M):
            name, path = m.group(1), m.group(2)
            if not name:
                name = path.rsplit("/", 1)[-1]
            alias_pkg[name] = path
        ctx = {"prefix": prefix, "imports": alias_pkg}
        lines = src.split("\n")
        i = 0
        comments = []
        while i < len(lines):
            line = lines[i]
            s = line.strip()
            if s.startswith("//"):
                comments.append(s)
                i += 1
                continue
            m = re.match(r"^type (\w+) struct \{\s*$", line)
            if m:
                name = prefix + "." + m.group(1)
                tmark = markers_of(comments)
                fields = []
                fcomments = []
                i += 1
                while not lines[i].startswith("}"):
                    fl = lines[i].strip()
                    i += 1
                    if fl.startswith("//"):
                        fcomments.append(fl)
                        continue
                    if not fl:
                        fcomments = []
                        continue
                    if "`" not in fl:
                        fcomments = []
                        continue
                    decl = fl[:fl.index("`")].split()
                    tags = fl[fl.index("`") + 1:fl.rindex("`")]
                    jm = re.search(r'json:"([^"]*)"', tags)
                    if not jm or not decl:
                        fcomments = []
                        continue
                    jparts = jm.group(1).split(",")
                    jname = jparts[0]
                    if jname == "-":
                        fcomments = []
                        continue
                    gotype = decl[-1] if len(decl) == 1 else " ".join(decl[1:])
                    if "inline" in jparts or (len(decl) == 1 and not jname):
                        fields.append({"inline": gotype, "ctx": ctx})
                    else:
                        fields.append({"name": jname, "go": gotype, "omit": "omitempty" in jparts,
                                       "markers": markers_of(fcomments), "ctx": ctx})
                    fcomments = []
                structs[name] = {"atomic": tmark.get("structType") == "atomic", "fields": fields, "ctx": ctx}
                comments = []
                i += 1
                continue
            m = re.match(r"^type (\w+) struct\s*\{\s*\}\s*$", line)
            if m:
                structs[prefix + "." + m.group(1)] = {"atomic": markers_of(comments).get("structType") == "atomic", "fields": [], "ctx": ctx}
                comments = []
                i += 1
                continue
            m = re.match(r"^type (\w+) (.+?)\s*$", line)
            if m and not m.group(2).startswith(("interface", "struct", "func", "=")):
                aliases[prefix + "." + m.group(1)] = (m.group(2), markers_of(comments), ctx)
            if s == "" or not s.startswith("//"):
                comments = []
            i += 1


for pkg in PACKAGES:
    parse_package(*pkg)


def qualify(name, ctx):
    """A Go type name as a schema type name (None for basic types)."""
    if name in BASIC:
        return None
    if "." in name:
        alias, local = name.split(".", 1)
        path = ctx["imports"].get(alias, "")
        for p, pre in IMPORT_PREFIX.items():
            if path.startswith(p):
                if pre.endswith("."):
                    return pre + path[len(p):].replace("/", ".") + "." + local
                return pre + "." + local
        if path.endswith("apiextensions/v1"):
            return "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1." + local
        return "?" + name
    return ctx["prefix"] + "." + name


class Unknown(Exception):
    """A type from a package this schema leaves out (alpha and beta APIs)."""


skipped = []
used = set()
queue = []

# A type is a tuple: ("Str",) ("Int",) ("Float",) ("Bool",) ("Bytes",) ("Quantity",)
# ("IntOrStr",) ("Time",) ("Untyped",) ("Deduced",) ("Named", name)
# ("NamedAs", name, atomic) ("List", elem, "Atomic"|"Set"|"Keys", keys) ("Map", elem, atomic)


def ty(go, markers, ctx):
    """(type, go shape) for a Go type expression."""
    go = go.strip()
    shape = "Val"
    if go.startswith("*"):
        go = go[1:]
        shape = "Ptr"
    if go == "[]byte":
        return ("Bytes",), "Slice"
    if go.startswith("[]"):
        elem, _ = ty(go[2:], {}, ctx)
        return list_ty(elem, markers), "Slice"
    if go.startswith("map["):
        depth, j = 0, 3
        while True:
            if go[j] == "[":
                depth += 1
            elif go[j] == "]":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        elem, _ = ty(go[j + 1:], {}, ctx)
        return ("Map", elem, markers.get("mapType") == "atomic"), "Map"
    if go in SPECIAL:
        return SPECIAL[go], shape
    local = go.split(".")[-1]
    if go in BASIC:
        return (BASIC[go],), shape
    q = qualify(go, ctx)
    if q in structs:
        if not fields_of(q):
            # An object without properties: a granular map of deduced values.
            return ("Map", ("Deduced",), False), shape
        if q not in used:
            used.add(q)
            queue.append(q)
        # A field-level +structType/+mapType overrides the type's own (claimRef).
        over = markers.get("structType") or markers.get("mapType")
        if over in ("atomic", "granular"):
            return ("NamedAs", q, over == "atomic"), shape
        return ("Named", q), shape
    if q in aliases:
        base, amarks, actx = aliases[q]
        merged = dict(amarks)
        merged.update(markers)
        t, s2 = ty(base, merged, actx)
        return t, (s2 if shape == "Val" else shape)
    if local in SPECIAL:
        return SPECIAL[local], shape
    raise Unknown(f"{go} ({q})")


def list_ty(elem, markers):
    lt = markers.get("listType")
    if lt is None:
        if markers.get("patchStrategy", "").find("merge") >= 0:
            if markers.get("patchMergeKey"):
                lt = "map"
                markers = dict(markers, listMapKey=[markers["patchMergeKey"]])
            else:
                lt = "set"
        else:
            lt = "atomic"
    if lt == "atomic":
        return ("List", elem, "Atomic", None)
    if lt == "set":
        return ("List", elem, "Set", None)
    keys = markers.get("listMapKey") or [markers.get("patchMergeKey")]
    return ("List", elem, "Keys", tuple(keys))


def fields_of(name):
    out = []
    s = structs[name]
    for f in s["fields"]:
        if "inline" in f:
            q = qualify(f["inline"], f["ctx"])
            if q in structs:
                out.extend(fields_of(q))
            continue
        out.append(f)
    return out


# Roots: every kind (a struct embedding TypeMeta with an ObjectMeta field `metadata`).
roots = []
for name, s in structs.items():
    names = [f.get("inline", "") for f in s["fields"]]
    has_meta = any(f.get("name") == "metadata" and f["go"].endswith("ObjectMeta") for f in s["fields"])
    if any(n.endswith("TypeMeta") for n in names) and has_meta:
        roots.append(name)
for r in sorted(roots):
    used.add(r)
    queue.append(r)

go_types = {}  # name -> (atomic, {field: (type, shape, omit, marker default)}, field order)
while queue:
    name = queue.pop()
    rows = {}
    order = []
    for f in fields_of(name):
        try:
            t, shape = ty(f["go"], f["markers"], f["ctx"])
        except Unknown as e:
            if "alpha" not in str(e) and "beta" not in str(e):
                raise SystemExit(f"unknown type {e}")
            skipped.append(f'{name}.{f["name"]}')
            continue
        d = f["markers"].get("default")
        dj = None
        if d is not None and not d.startswith("ref("):
            try:
                json.loads(d)
                dj = d
            except ValueError:
                pass
        rows[f["name"]] = (t, shape, f["omit"], dj)
        order.append(f["name"])
    go_types[name] = (structs[name]["atomic"], rows, order)


# --- The published specs: what each minor's server has --------------------------------

extract = json.load(open(EXTRACT))
MINORS = extract["minors"]
NEWER = 255  # every minor after the newest spec: the Go types decide
UNTYPED = "__untyped_atomic_"
DEDUCED = "__untyped_deduced_"
UNTYPED_ATOM = {"scalar": "untyped", "list": {"elementType": {"namedType": UNTYPED}, "elementRelationship": "atomic"},
                "map": {"elementType": {"namedType": UNTYPED}, "elementRelationship": "atomic"}}
DEDUCED_ATOM = {"scalar": "untyped", "list": {"elementType": {"namedType": UNTYPED}, "elementRelationship": "atomic"},
                "map": {"elementType": {"namedType": DEDUCED}}}


def holds(ranges, minor):
    for part in ranges.split(","):
        lo, _, hi = part.partition("-")
        if int(lo) <= minor <= int(hi or lo):
            return True
    return False


spec = {m: {n: a for n, r, a in extract["types"] if holds(r, m)} for m in MINORS}
for m in MINORS:
    spec[m][UNTYPED] = UNTYPED_ATOM
    spec[m][DEDUCED] = DEDUCED_ATOM
spec_kinds = {m: {(av, k): n for av, k, n, r in extract["kinds"] if holds(r, m)} for m in MINORS}


def key_fields(types):
    """(type, field) of every field some keyed list of `types` uses as a key."""
    out = set()

    def walk(a):
        if not isinstance(a, dict):
            return
        l = a.get("list")
        if l and l.get("keys") and "namedType" in l["elementType"]:
            out.update((l["elementType"]["namedType"], k) for k in l["keys"])
        for v in a.values():
            if isinstance(v, dict):
                walk(v)
            elif isinstance(v, list):
                for x in v:
                    walk(x)

    for a in types.values():
        walk(a)
    return out


keys_of = {m: key_fields(spec[m]) for m in MINORS}


def is_struct(atom):
    return "map" in atom and "fields" in atom["map"] and "elementType" not in atom["map"] and "scalar" not in atom


def smd_of(t):
    """What schemaconv would make of a field of type `t` (a type reference)."""
    k = t[0]
    if k in ("Str", "Bytes"):
        return {"scalar": "string"}
    if k in ("Int", "Float"):
        return {"scalar": "numeric"}
    if k == "Bool":
        return {"scalar": "boolean"}
    if k in ("Quantity", "Time"):
        return {"scalar": "untyped"}
    if k == "IntOrStr":
        return {"scalar": "untyped", "list": {"elementType": {"namedType": UNTYPED}, "elementRelationship": "atomic"},
                "map": {"elementType": {"namedType": DEDUCED}}}
    if k == "Untyped":
        return {"namedType": UNTYPED}
    if k == "Deduced":
        return {"namedType": DEDUCED}
    if k == "Named":
        return {"namedType": t[1]}
    if k == "NamedAs":
        return {"namedType": t[1], "elementRelationship": "atomic" if t[2] else "separable"}
    if k == "List":
        out = {"elementType": smd_of(t[1]), "elementRelationship": "atomic" if t[2] == "Atomic" else "associative"}
        if t[3]:
            out["keys"] = list(t[3])
        return {"list": out}
    if k == "Map":
        out = {"elementType": smd_of(t[1])}
        if t[2]:
            out["elementRelationship"] = "atomic"
        return {"map": out}
    raise SystemExit(f"no SMD form for {t}")


def norm(ref, types, depth=0):
    """A type reference with every named type that is not a struct resolved, map
    relationships made explicit: two references mean the same to SMD iff equal."""
    if "namedType" in ref:
        name = ref["namedType"]
        atom = types.get(name)
        if atom is not None and (is_struct(atom) or depth > 3):
            return {"struct": name, "rel": ref.get("elementRelationship")}
        if atom is None:
            return {"missing": name}
        return norm(atom, types, depth + 1)
    out = {}
    if "scalar" in ref:
        out["scalar"] = ref["scalar"]
    if "list" in ref:
        l = ref["list"]
        out["list"] = (l["elementRelationship"], tuple(l.get("keys") or ()), json.dumps(norm(l["elementType"], types, depth + 1), sort_keys=True))
    if "map" in ref:
        mp = ref["map"]
        el = norm(mp["elementType"], types, depth + 1) if "elementType" in mp else None
        out["map"] = (mp.get("elementRelationship", "separable"), json.dumps(el, sort_keys=True),
                      tuple(f["name"] for f in mp.get("fields", [])))
    return out


def ty_of_spec(ref, types, hint):
    """The type of a field whose spec reference is `ref` (the Go type `hint` when it means
    the same to SMD, keeping its Go flavour: bytes, floats, times)."""
    if hint is not None and norm(smd_of(hint), types) == norm(ref, types):
        return hint
    if "namedType" in ref:
        name = ref["namedType"]
        atom = types[name]
        if is_struct(atom):
            if "elementRelationship" in ref:
                return ("NamedAs", name, ref["elementRelationship"] == "atomic")
            return ("Named", name)
        ref = atom
        if name == UNTYPED:
            return ("Untyped",)
        if name == DEDUCED:
            return ("Deduced",)
    for t in (("Untyped",), ("Deduced",), ("IntOrStr",), ("Str",), ("Int",), ("Bool",)):
        if norm(smd_of(t), types) == norm(ref, types):
            return t
    if set(ref) == {"list"}:
        l = ref["list"]
        h = hint[1] if hint and hint[0] == "List" else None
        rel = "Atomic" if l["elementRelationship"] == "atomic" else ("Keys" if l.get("keys") else "Set")
        return ("List", ty_of_spec(l["elementType"], types, h), rel, tuple(l["keys"]) if l.get("keys") else None)
    if set(ref) == {"map"} and "fields" not in ref["map"]:
        mp = ref["map"]
        h = hint[1] if hint and hint[0] == "Map" else None
        return ("Map", ty_of_spec(mp["elementType"], types, h), mp.get("elementRelationship") == "atomic")
    raise SystemExit(f"no table type for {json.dumps(ref)} (Go: {hint})")


def referenced(t, out):
    if t[0] in ("Named", "NamedAs"):
        out.add(t[1])
    elif t[0] in ("List", "Map"):
        referenced(t[1], out)


# Per type and minor: (atomic, {field: (type, shape, omit, default)}).
shapes = {}


def add_minor(m, name, types):
    """The shape of `name` on a 1.m server (from its spec), and of the types it reaches."""
    if (name, m) in shapes:
        return
    atom = types[name]
    go_atomic, go_rows, _ = go_types.get(name, (False, {}, []))
    rows = {}
    shapes[(name, m)] = (atom["map"].get("elementRelationship") == "atomic", rows)
    for f in atom["map"]["fields"]:
        hint = go_rows.get(f["name"])
        t = ty_of_spec(f["type"], types, hint[0] if hint else None)
        shape, omit, marker = (hint[1], hint[2], hint[3]) if hint else ("Ptr", True, None)
        # A key field's default is what SMD reads for a missing key: the spec's alone.
        if "default" in f or (name, f["name"]) in keys_of[m]:
            d = json.dumps(f["default"]) if "default" in f else None
        else:
            d = marker
        rows[f["name"]] = (t, shape, omit, d)
        refs = set()
        referenced(t, refs)
        for r in sorted(refs):
            add_minor(m, r, types)


def add_newer(name):
    if (name, NEWER) in shapes:
        return
    atomic, rows, _ = go_types[name]
    newest = spec[MINORS[-1]].get(name)
    keyed = {f["name"]: f["default"] for f in newest["map"]["fields"] if "default" in f} if newest and is_struct(newest) else {}
    out = {}
    shapes[(name, NEWER)] = (atomic, out)
    for fname, (t, shape, omit, marker) in rows.items():
        d = json.dumps(keyed[fname]) if fname in keyed else marker
        out[fname] = (t, shape, omit, d)
        refs = set()
        referenced(t, refs)
        for r in sorted(refs):
            add_newer(r)


kinds = {}  # (apiVersion, kind, type) -> [minors]
for m in MINORS:
    for (av, k), n in spec_kinds[m].items():
        if n not in go_types:
            raise SystemExit(f"1.{m} serves {av} {k} ({n}), not in the Go types read")
        add_minor(m, n, spec[m])
        kinds.setdefault((av, k, n), []).append(m)


def api_version(r):
    pre = r.rsplit(".", 1)[0]
    if pre.startswith("io.k8s.api."):
        group, version = pre[len("io.k8s.api."):].split(".")[:2]
        group = {"core": "", "rbac": "rbac.authorization.k8s.io", "networking": "networking.k8s.io",
                 "policy": "policy", "storage": "storage.k8s.io", "scheduling": "scheduling.k8s.io",
                 "coordination": "coordination.k8s.io", "admissionregistration": "admissionregistration.k8s.io",
                 "discovery": "discovery.k8s.io", "events": "events.k8s.io", "node": "node.k8s.io",
                 "certificates": "certificates.k8s.io", "flowcontrol": "flowcontrol.apiserver.k8s.io",
                 "resource": "resource.k8s.io"}.get(group, group)
    elif "apiextensions" in pre:
        group, version = "apiextensions.k8s.io", "v1"
    elif "apiregistration" in pre:
        group, version = "apiregistration.k8s.io", "v1"
    else:
        return None
    return f"{group}/{version}" if group else version


for r in sorted(roots):
    av = api_version(r)
    if av is None:
        continue
    add_newer(r)
    kinds.setdefault((av, r.rsplit(".", 1)[1], r), []).append(NEWER)


def ranges(minors):
    """Contiguous runs of `minors` as (lo, hi), the oldest spec's minor written 0."""
    minors = sorted(minors)
    order = MINORS + [NEWER]
    out = []
    for m in minors:
        i = order.index(m)
        if out and order.index(out[-1][1]) == i - 1:
            out[-1][1] = m
        else:
            out.append([m, m])
    return [(0 if lo == MINORS[0] else lo, hi) for lo, hi in out]


names = sorted({n for n, _ in shapes})
out = []
out.append("// @generated by ssa/gen/builtin.py from the Go API types and ssa/gen/openapi-smd.json; do not edit.")
out.append(f"// kubernetes/api {commit(API)}, kubernetes/apimachinery {commit(MACH)},")
out.append(f"// kubernetes/apiextensions-apiserver {commit(EXT)}, kubernetes/kube-aggregator {commit(AGG)};")
out.append(f"// {extract['source']}")
if skipped:
    out.append("// Left out (fields of alpha/beta API types): " + ", ".join(sorted(skipped)) + ".")
out.append("use super::model::{F, G, M, R, S, T, Ty};")
out.append("")
out.append(f"/// The oldest minor whose published OpenAPI the table was checked against.")
out.append(f"pub const OLDEST: u8 = {MINORS[0]};")
out.append(f"/// The newest minor whose published OpenAPI the table was checked against.")
out.append(f"pub const NEWEST: u8 = {MINORS[-1]};")
def m_expr(lo, hi):
    return "M::ALL" if (lo, hi) == (0, NEWER) else f"M({lo}, {hi})"


types = []
for name in names:
    per = {m: shapes[(name, m)] for m in MINORS + [NEWER] if (name, m) in shapes}
    # Minors where no kind reaches the type hold whatever keeps the ranges short.
    absent = [m for m in MINORS + [NEWER] if m not in per]
    atomic_in = [m for m, (a, _) in per.items() if a]
    ar = ranges(atomic_in + absent) if atomic_in else []
    if len(ar) > 1:
        raise SystemExit(f"{name} is atomic in minors {atomic_in}: not one run")
    atomic = "M::NONE" if not ar else m_expr(*ar[0])
    fields = []
    # Field order: the Go order, then fields the Go types no longer have.
    order = list(go_types.get(name, (None, {}, []))[2])
    for m, (_, rows) in per.items():
        for f in rows:
            if f not in order:
                order.append(f)
    for fname in order:
        variants = {}
        for m, (_, rows) in per.items():
            if fname in rows:
                variants.setdefault(rows[fname], []).append(m)
        for (t, shape, omit, d), ms in sorted(variants.items(), key=lambda kv: (MINORS + [NEWER]).index(kv[1][0])):
            for lo, hi in ranges(ms + absent):
                fields.append((fname, t, shape, omit, d, m_expr(lo, hi)))
    types.append((name, atomic, fields))
kind_rows = []
for (av, kind, r), ms in sorted(kinds.items()):
    for lo, hi in ranges(ms):
        kind_rows.append((av, kind, r, m_expr(lo, hi)))
# The file holds no pointer (ssa/gen/emit_table.py says why).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emit_table import emit  # noqa: E402

print(emit(out, types, kind_rows))
