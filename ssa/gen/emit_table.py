"""Writes ssa/src/builtin/types.rs from the table builtin.py computed, without one pointer in
it: every string is an offset into one text (`S`), fields, element types and list keys are
index ranges into flat arrays. A table of `&'static str`s is data the dynamic loader
relocates at every start of a position-independent program, which dirties all its pages
(~220 KiB of private memory in every agent); offsets leave it read-only data in the file,
of which only the pages a lookup reads are ever resident."""


class Table:
    """The flat arrays of the generated file."""

    def __init__(self):
        self.text = []        # pieces of STRINGS
        self.size = 0
        self.offsets = {}     # string -> S(off, len) expression
        self.elems = []       # ELEMS rows (Ty expressions)
        self.elem_index = {}  # Ty expression -> index
        self.keys = []        # KEYS rows (S expressions)
        self.key_index = {}   # tuple of keys -> (start, count)

    def s(self, value):
        """`S(offset, len)` of `value` in STRINGS (each distinct string once)."""
        if value not in self.offsets:
            raw = value.encode()
            if len(raw) > 0xFFFF:
                raise SystemExit(f"a string of {len(raw)} bytes does not fit S's u16 length")
            self.offsets[value] = f"S({self.size}, {len(raw)})"
            self.text.append(value)
            self.size += len(raw)
        return self.offsets[value]

    def elem(self, ty):
        expr = self.ty(ty)
        if expr not in self.elem_index:
            self.elem_index[expr] = len(self.elems)
            self.elems.append(expr)
        return self.elem_index[expr]

    def keyset(self, keys):
        keys = tuple(keys)
        if keys not in self.key_index:
            self.key_index[keys] = (len(self.keys), len(keys))
            self.keys.extend(self.s(k) for k in keys)
        return self.key_index[keys]

    def ty(self, t):
        """The Ty expression of builtin.py's type tuple `t`."""
        k = t[0]
        if k == "Named":
            return f"Ty::Named({self.s(t[1])})"
        if k == "NamedAs":
            return f'Ty::NamedAs({self.s(t[1])}, {"true" if t[2] else "false"})'
        if k == "List":
            if t[2] in ("Atomic", "Set"):
                rel = "R::" + t[2]
            else:
                start, count = self.keyset(t[3])
                rel = f"R::Keys({start}, {count})"
            return f"Ty::List({self.elem(t[1])}, {rel})"
        if k == "Map":
            return f"Ty::Map({self.elem(t[1])}, {'true' if t[2] else 'false'})"
        return "Ty::" + k


def rust_string(text):
    """A Rust string literal of `text` (ASCII names and JSON defaults)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def emit(header, types, kinds):
    """The file: `header` (comment and const lines), `types` as (name, atomic expression,
    [(field, type tuple, Go shape, omitempty, default JSON or None, minors expression)]),
    `kinds` as (apiVersion, kind, type name, minors expression)."""
    tab = Table()
    type_rows, field_rows = [], []
    for name, atomic, fields in types:
        type_rows.append(f"    T {{ name: {tab.s(name)}, atomic: {atomic}, fields: ({len(field_rows)}, {len(fields)}) }}, // {name}")
        for fname, t, shape, omit, d, m in fields:
            dj = "None" if d is None else f"Some({tab.s(d)})"
            field_rows.append(f'    F {{ name: {tab.s(fname)}, ty: {tab.ty(t)}, go: G::{shape}, omit: {"true" if omit else "false"}, def: {dj}, m: {m} }}, // {name.rsplit(".", 1)[1]}.{fname}')
    kind_rows = [f"    ({tab.s(av)}, {tab.s(kind)}, {tab.s(r)}, {m}), // {av} {kind}" for av, kind, r, m in kinds]
    out = list(header)
    out.append("")
    out.append("/// Every struct type reachable from a built-in kind in some minor, sorted by name.")
    out.append("pub static TYPES: &[T] = &[")
    out.extend(type_rows)
    out.append("];")
    out.append("")
    out.append("/// The fields of every type, a type's in one run (`T::fields`).")
    out.append("pub static FIELDS: &[F] = &[")
    out.extend(field_rows)
    out.append("];")
    out.append("")
    out.append("/// The element types of lists and maps (`Ty::List`, `Ty::Map` name them by index).")
    out.append("pub static ELEMS: &[Ty] = &[")
    out.extend(f"    {e}," for e in tab.elems)
    out.append("];")
    out.append("")
    out.append("/// The keys of keyed lists (`R::Keys` names a run of them).")
    out.append("pub static KEYS: &[S] = &[" + ", ".join(tab.keys) + "];")
    out.append("")
    out.append("/// The kinds: (apiVersion, kind, type name, the minors that serve it), sorted.")
    out.append("pub static KINDS: &[(S, S, S, M)] = &[")
    out.extend(kind_rows)
    out.append("];")
    out.append("")
    out.append("/// Every string of the table, one after another (`S` is an offset and a length in it).")
    text = "".join(tab.text)
    out.append("pub const STRINGS: &str = concat!(")
    line = []
    for piece in tab.text:
        line.append(rust_string(piece))
        if sum(len(x) + 2 for x in line) > 200:
            out.append("    " + ", ".join(line) + ",")
            line = []
    if line:
        out.append("    " + ", ".join(line) + ",")
    out.append(");")
    if len(text.encode()) > 0xFFFFFFFF:
        raise SystemExit("STRINGS does not fit S's u32 offset")
    return "\n".join(out)
