#!/usr/bin/env python3
"""Generates ssa/src/builtin/types.rs: the field-management schema of the built-in
Kubernetes kinds, read from the Go API types (the same source the API server's OpenAPI
and its structured-merge-diff schema are generated from).

Read per struct field: its JSON name and `omitempty`, its Go shape (pointer, value,
slice, map), and the markers the OpenAPI generator turns into schema extensions:
`+listType` / `+listMapKey` (x-kubernetes-list-type / -list-map-keys), `+mapType`,
`+structType`, `+patchStrategy` / `+patchMergeKey` (used, like kube-openapi's schemaconv,
when a list has no `+listType`) and `+default`.

Usage: builtin.py API APIMACHINERY APIEXTENSIONS AGGREGATOR > ssa/src/builtin/types.rs
where each argument is a git directory (or work tree) of kubernetes/api,
kubernetes/apimachinery, kubernetes/apiextensions-apiserver, kubernetes/kube-aggregator.
The generated file names the commits it was read from.
"""
import json
import re
import subprocess
import sys

API, MACH, EXT, AGG = sys.argv[1:5]

# (repo, dir, schema prefix, files)
PACKAGES = [
    (MACH, "pkg/apis/meta/v1", "io.k8s.apimachinery.pkg.apis.meta.v1", ["types.go"]),
    (EXT, "pkg/apis/apiextensions/v1", "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1", ["types.go", "types_jsonschema.go"]),
    (AGG, "pkg/apis/apiregistration/v1", "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1", ["types.go"]),
]
for g in ["core/v1", "apps/v1", "batch/v1", "rbac/v1", "networking/v1", "policy/v1",
          "autoscaling/v1", "autoscaling/v2", "storage/v1", "scheduling/v1", "coordination/v1",
          "admissionregistration/v1", "discovery/v1", "events/v1", "node/v1", "certificates/v1",
          "flowcontrol/v1"]:
    PACKAGES.append((API, g, "io.k8s.api." + g.replace("/", "."), ["types.go"]))

IMPORT_PREFIX = {
    "k8s.io/api/": "io.k8s.api.",
    "k8s.io/apimachinery/pkg/apis/meta/v1": "io.k8s.apimachinery.pkg.apis.meta.v1",
}
# Types the schema treats as scalars or untyped values (as the API server's schema does).
SPECIAL = {
    "resource.Quantity": "Quantity",
    "intstr.IntOrString": "IntOrStr",
    "metav1.Time": "Time", "Time": "Time", "metav1.MicroTime": "Time", "MicroTime": "Time",
    "metav1.Duration": "Str", "Duration": "Str",
    "types.UID": "Str", "types.NodeName": "Str",
    "runtime.RawExtension": "Deduced",
    "JSON": "Untyped", "JSONSchemaPropsOrArray": "Untyped", "JSONSchemaPropsOrBool": "Untyped", "JSONSchemaPropsOrStringArray": "Untyped",
    "metav1.FieldsV1": "Untyped", "FieldsV1": "Untyped",
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


def ty(go, markers, ctx):
    """(rust Ty expression, go shape) for a Go type expression."""
    go = go.strip()
    shape = "Val"
    if go.startswith("*"):
        go = go[1:]
        shape = "Ptr"
    if go == "[]byte":
        return "Ty::Bytes", "Slice"
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
        atomic = markers.get("mapType") == "atomic"
        return f"Ty::Map(&{elem}, {'true' if atomic else 'false'})", "Map"
    if go in SPECIAL:
        return "Ty::" + SPECIAL[go], shape
    local = go.split(".")[-1]
    if go in BASIC:
        return "Ty::" + BASIC[go], shape
    q = qualify(go, ctx)
    if q in structs:
        if q not in used:
            used.add(q)
            queue.append(q)
        return f'Ty::Named("{q}")', shape
    if q in aliases:
        base, amarks, actx = aliases[q]
        merged = dict(amarks)
        merged.update(markers)
        t, s2 = ty(base, merged, actx)
        return t, (s2 if shape == "Val" else shape)
    if local in SPECIAL:
        return "Ty::" + SPECIAL[local], shape
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
        rel = "R::Atomic"
    elif lt == "set":
        rel = "R::Set"
    else:
        keys = markers.get("listMapKey") or [markers.get("patchMergeKey")]
        rel = "R::Keys(&[" + ", ".join(json.dumps(k) for k in keys) + "])"
    return f"Ty::List(&{elem}, {rel})"


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

emitted = {}
while queue:
    name = queue.pop()
    rows = []
    for f in fields_of(name):
        try:
            t, shape = ty(f["go"], f["markers"], f["ctx"])
        except Unknown as e:
            if "alpha" not in str(e) and "beta" not in str(e):
                raise SystemExit(f"unknown type {e}")
            skipped.append(f'{name}.{f["name"]}')
            continue
        d = f["markers"].get("default")
        dj = "None"
        if d is not None and not d.startswith("ref("):
            try:
                json.loads(d)
                dj = "Some(" + json.dumps(d) + ")"
            except ValueError:
                pass
        rows.append(f'F {{ name: "{f["name"]}", ty: {t}, go: G::{shape}, omit: {"true" if f["omit"] else "false"}, def: {dj} }}')
    emitted[name] = (structs[name]["atomic"], rows)

out = []
out.append("// @generated by ssa/gen/builtin.py from the Go API types; do not edit.")
out.append(f"// kubernetes/api {commit(API)}, kubernetes/apimachinery {commit(MACH)},")
out.append(f"// kubernetes/apiextensions-apiserver {commit(EXT)}, kubernetes/kube-aggregator {commit(AGG)}.")
if skipped:
    out.append("// Left out (fields of alpha/beta API types): " + ", ".join(sorted(skipped)) + ".")
out.append("use super::model::{F, G, R, T, Ty};")
out.append("")
out.append("/// Every struct type reachable from a built-in kind, sorted by name.")
out.append("pub static TYPES: &[T] = &[")
for name in sorted(emitted):
    atomic, rows = emitted[name]
    out.append(f'    T {{ name: "{name}", atomic: {"true" if atomic else "false"}, fields: &[')
    for r in rows:
        out.append("        " + r + ",")
    out.append("    ] },")
out.append("];")
out.append("")
out.append("/// The kinds: (apiVersion, kind, type name), sorted.")
out.append("pub static KINDS: &[(&str, &str, &str)] = &[")
kinds = []
for r in roots:
    pre = r.rsplit(".", 1)[0]
    kind = r.rsplit(".", 1)[1]
    if kind.endswith("List") or kind in ("Status", "WatchEvent", "DeleteOptions", "Eviction", "Binding", "Scale"):
        pass
    if pre.startswith("io.k8s.api."):
        gv = pre[len("io.k8s.api."):].split(".")
        group, version = gv[0], gv[1]
        group = {"core": "", "rbac": "rbac.authorization.k8s.io", "networking": "networking.k8s.io",
                 "policy": "policy", "storage": "storage.k8s.io", "scheduling": "scheduling.k8s.io",
                 "coordination": "coordination.k8s.io", "admissionregistration": "admissionregistration.k8s.io",
                 "discovery": "discovery.k8s.io", "events": "events.k8s.io", "node": "node.k8s.io",
                 "certificates": "certificates.k8s.io", "flowcontrol": "flowcontrol.apiserver.k8s.io"}.get(group, group)
    elif "apiextensions" in pre:
        group, version = "apiextensions.k8s.io", "v1"
    elif "apiregistration" in pre:
        group, version = "apiregistration.k8s.io", "v1"
    else:
        continue
    av = f"{group}/{version}" if group else version
    kinds.append((av, kind, r))
for av, kind, r in sorted(kinds):
    out.append(f'    ("{av}", "{kind}", "{r}"),')
out.append("];")
print("\n".join(out))
