#!/usr/bin/env python3
"""Writes ssa/gen/openapi-smd.json: what structured-merge-diff (SMD) uses of the published
OpenAPI v3 of every Kubernetes minor drover supports, for every kind drover-ssa's table
knows (ssa/src/builtin/types.rs) and the types those kinds reach.

Each type is converted by the rules of kube-openapi's `pkg/schemaconv` (what an API
server runs on its own OpenAPI v3 to build the schema of server-side apply):
- `type: object` -> a map: its properties as fields, `additionalProperties` as the type of
  other keys (none when properties are listed and additionalProperties is absent, deduced
  when there are no properties or x-kubernetes-preserve-unknown-fields is set), and
  `x-kubernetes-map-type` (`atomic` / `granular`) as its element relationship;
- `type: array` -> a list: `x-kubernetes-list-type` (and -list-map-keys), else the
  `x-kubernetes-patch-strategy` / -patch-merge-key, else atomic;
- string/integer/number/boolean -> scalars (`string` with a format other than `byte` is
  `untyped`, so are date-time and int-or-string);
- no `type` -> untyped: a scalar, an atomic list of untyped values and a granular map of
  deduced values all at once (how `JSON`, `JSONSchemaPropsOrArray` and `IntOrString`
  come out);
- a `$ref` (or a one-element `allOf` of one) -> the named type, with a field-level
  `x-kubernetes-map-type` on the referring property as an override of the named type's
  map relationship (PersistentVolumeSpec.claimRef: `granular` over ObjectReference's
  `atomic`);
- `io.k8s.apimachinery.pkg.api.resource.Quantity` -> an untyped scalar and
  `io.k8s.apimachinery.pkg.runtime.RawExtension` -> untyped atomic, hard-coded in
  schemaconv whatever the spec says.

Only what SMD uses is kept: field names and types, list kinds and keys, map and struct
atomicity, element types, and the defaults of fields that some list uses as a key
(structured-merge-diff reads a field's default only for a missing key). Descriptions,
validation and formats are dropped. Each type is written once per distinct shape with the
minors it holds in ("29-35"), so a field added in 1.33 shows as a second shape from 33 on.

Usage: openapi.py KUBECTL_VALIDATE_GIT_DIR > ssa/gen/openapi-smd.json
where the argument is a git directory of kubernetes-sigs/kubectl-validate, which keeps
verbatim copies of each release's api/openapi-spec/v3 under
pkg/openapiclient/builtins/<minor>/. The output names the commit it was read from.
"""
import json
import subprocess
import sys

REPO = sys.argv[1]
MINORS = list(range(29, 36))
# The group-versions whose kinds the table holds (GA only: a beta version's kinds take the
# server's own /openapi/v3 at run time).
GROUP_VERSIONS = [
    "api/v1", "apis/admissionregistration.k8s.io/v1", "apis/apiextensions.k8s.io/v1",
    "apis/apiregistration.k8s.io/v1", "apis/apps/v1", "apis/autoscaling/v1", "apis/autoscaling/v2",
    "apis/batch/v1", "apis/certificates.k8s.io/v1", "apis/coordination.k8s.io/v1",
    "apis/discovery.k8s.io/v1", "apis/events.k8s.io/v1", "apis/flowcontrol.apiserver.k8s.io/v1",
    "apis/networking.k8s.io/v1", "apis/node.k8s.io/v1", "apis/policy/v1",
    "apis/rbac.authorization.k8s.io/v1", "apis/resource.k8s.io/v1", "apis/scheduling.k8s.io/v1",
    "apis/storage.k8s.io/v1",
]
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"
UNTYPED = "__untyped_atomic_"
DEDUCED = "__untyped_deduced_"
UNTYPED_ATOM = {"scalar": "untyped",
                "list": {"elementType": {"namedType": UNTYPED}, "elementRelationship": "atomic"},
                "map": {"elementType": {"namedType": UNTYPED}, "elementRelationship": "atomic"}}


def git(*args):
    return subprocess.run(["git", "--git-dir", REPO, *args], check=True, capture_output=True, text=True).stdout


def spec_of(minor, gv):
    path = f"HEAD:pkg/openapiclient/builtins/1.{minor}/{gv}.json"
    try:
        return json.loads(git("show", path))
    except subprocess.CalledProcessError:
        return None


def ref_name(s):
    ref = s.get("$ref", "")
    if not ref and len(s.get("allOf", [])) == 1:
        ref = s["allOf"][0].get("$ref", "")
    return ref.rsplit("/", 1)[-1] if ref else None


def map_relationship(ext):
    v = ext.get("x-kubernetes-map-type")
    return {"atomic": "atomic", "granular": "separable", None: None}[v]


def list_relationship(s):
    lt = s.get("x-kubernetes-list-type")
    if lt == "atomic":
        return "atomic", None
    if lt == "set":
        return "associative", None
    if lt == "map":
        return "associative", list(s["x-kubernetes-list-map-keys"])
    if lt is not None:
        raise SystemExit(f"unknown list type {lt}")
    ps = s.get("x-kubernetes-patch-strategy")
    if ps in ("merge", "merge,retainKeys"):
        key = s.get("x-kubernetes-patch-merge-key")
        return "associative", ([key] if key else None)
    return "atomic", None


class Convert:
    """schemaconv's convert: one model, with its preserve-unknown-fields flag."""

    def __init__(self, preserve, refs):
        self.preserve = preserve
        self.refs = refs  # named types met (to convert next)

    def visit(self, s):
        if s.get("x-kubernetes-preserve-unknown-fields") is True:
            self.preserve = True
        return self.parse(s)

    def parse(self, s):
        typ = s.get("type", "")
        if isinstance(typ, list):
            typ = typ[0] if typ else ""
        if typ == "":
            return {"scalar": "untyped", "list": self.parse_list(s), "map": self.parse_object(s)}
        if typ == "object":
            return {"map": self.parse_object(s)}
        if typ == "array":
            return {"list": self.parse_list(s)}
        if typ in ("integer", "number"):
            return {"scalar": "numeric"}
        if typ == "boolean":
            return {"scalar": "boolean"}
        if typ == "string":
            return {"scalar": "string" if s.get("format", "") in ("", "byte") else "untyped"}
        raise SystemExit(f"unrecognized type {typ}")

    def type_ref(self, s):
        name = ref_name(s)
        if name:
            self.refs.add(name)
            out = {"namedType": name}
            rel = map_relationship(s)
            if rel:
                out["elementRelationship"] = rel
            return out
        inner = Convert(self.preserve, self.refs)
        return inner.visit(s)

    def parse_object(self, s):
        props = s.get("properties") or {}
        fields = []
        for name in sorted(props):
            f = {"name": name, "type": self.type_ref(props[name])}
            if "default" in props[name]:
                f["default"] = props[name]["default"]
            fields.append(f)
        out = {}
        if fields:
            out["fields"] = fields
        ap = s.get("additionalProperties")
        if ap is None:
            if self.preserve or not props:
                out["elementType"] = {"namedType": DEDUCED}
        elif isinstance(ap, dict):
            out["elementType"] = self.type_ref(ap)
        elif ap is True:
            out["elementType"] = {"namedType": DEDUCED}
        rel = map_relationship(s)
        if rel:
            out["elementRelationship"] = rel
        return out

    def parse_list(self, s):
        rel, keys = list_relationship(s)
        out = {"elementRelationship": rel}
        if keys:
            out["keys"] = keys
        items = s.get("items")
        if items is not None:
            out["elementType"] = self.type_ref(items)
        else:
            out["elementType"] = {"namedType": UNTYPED}
        return out


def kind_of(s):
    """(apiVersion, kind) of a kind of a group-version this script reads: a GVK of one of
    them and an ObjectMeta `metadata` (a subresource's kind, Scale or Eviction, is found in
    the group-version that serves it)."""
    meta = s.get("properties", {}).get("metadata", {})
    if ref_name(meta) != "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" or "kind" not in s.get("properties", {}):
        return None
    for g in s.get("x-kubernetes-group-version-kind") or []:
        group, version = g.get("group", ""), g.get("version", "")
        gv = f"apis/{group}/{version}" if group else f"api/{version}"
        if gv in GROUP_VERSIONS:
            return (f"{group}/{version}" if group else version, g["kind"])
    return None


def keyed_defaults(types):
    """Drops field defaults SMD never reads: only a list key's default is kept."""
    keyed = set()

    def walk(a):
        if "list" in a:
            l = a["list"]
            et = l.get("elementType", {})
            if l.get("keys"):
                for k in l["keys"]:
                    keyed.add((et.get("namedType") or id(et), k))
            walk_ref(et)
        if "map" in a:
            for f in a["map"].get("fields", []):
                walk_ref(f["type"])
            if "elementType" in a["map"]:
                walk_ref(a["map"]["elementType"])

    def walk_ref(r):
        if "namedType" not in r:
            walk(r)

    for a in types.values():
        walk(a)
    for name, a in types.items():
        for f in a.get("map", {}).get("fields", []):
            if "default" in f and (name, f["name"]) not in keyed:
                del f["default"]


def version(minor):
    schemas = {}
    kinds = []
    for gv in GROUP_VERSIONS:
        doc = spec_of(minor, gv)
        if doc is None:
            continue
        comps = doc["components"]["schemas"]
        for name, s in comps.items():
            if name in schemas and json.dumps(schemas[name], sort_keys=True) != json.dumps(s, sort_keys=True):
                # The same definition differs between two files of one release: never seen.
                sys.stderr.write(f"1.{minor}: {name} differs between group-versions\n")
            schemas.setdefault(name, s)
            k = kind_of(s)
            if k:
                kinds.append((k[0], k[1], name))
    types = {}
    queue = [k[2] for k in kinds]
    while queue:
        name = queue.pop()
        if name in types:
            continue
        if name == QUANTITY:
            types[name] = {"scalar": "untyped"}
            continue
        if name == RAW_EXTENSION:
            types[name] = UNTYPED_ATOM
            continue
        refs = set()
        types[name] = Convert(False, refs).visit(schemas[name])
        queue.extend(sorted(refs - set(types)))
    keyed_defaults(types)
    return sorted(set(kinds)), types


def ranges(minors):
    out, start, prev = [], None, None
    for m in minors + [None]:
        if start is not None and m == prev + 1:
            prev = m
            continue
        if start is not None:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = m
    return ",".join(out)


def main():
    per_kind = {}
    per_type = {}  # name -> {shape json: [minors]}
    for minor in MINORS:
        kinds, types = version(minor)
        for k in kinds:
            per_kind.setdefault(k, []).append(minor)
        for name, atom in types.items():
            per_type.setdefault(name, {}).setdefault(json.dumps(atom, sort_keys=True), []).append(minor)
    commit = git("rev-parse", "HEAD").strip()
    lines = ["{", f'"source": "kubernetes-sigs/kubectl-validate {commit} pkg/openapiclient/builtins/1.MINOR/{{api,apis/GROUP}}/VERSION.json",',
             '"generator": "ssa/gen/openapi.py",', f'"minors": {json.dumps(MINORS)},', '"kinds": [']
    rows = [json.dumps([av, kind, name, ranges(ms)]) for (av, kind, name), ms in sorted(per_kind.items())]
    lines.append(",\n".join(rows))
    lines.append("],")
    lines.append('"types": [')
    rows = []
    for name in sorted(per_type):
        for shape, ms in sorted(per_type[name].items(), key=lambda kv: kv[1]):
            rows.append(json.dumps([name, ranges(ms), json.loads(shape)], separators=(",", ":"), sort_keys=True))
    lines.append(",\n".join(rows))
    lines.append("]")
    lines.append("}")
    print("\n".join(lines))


main()
