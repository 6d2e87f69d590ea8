#!/usr/bin/env python3
"""List the variables SystemTap's syscall tapsets give each alias.

Reads the tapsets of a SystemTap checkout (a git directory or a work
tree): tapset/linux/sysc_*.stp, tapset/linux/x86_64/sysc_*.stp and the
macros of tapset/linux/*.stpm, and prints one line per alias,

    syscall.NAME[.return]<TAB>var:type var:type ...

for `syscall.*` and `syscall.*.return`, with the variables every probe
the alias resolves to (dw_syscall, nd_syscall, nd1/nd2/tp_syscall, their
@define'd register macros) assigns: what `stap -L` lists on a kernel
where one of them resolves. Preprocessor conditions on `arch` are decided
for x86_64; the others (kernel and SystemTap versions, CONFIG_*) keep
both branches, so a variable any of them sets is listed. Names starting
with `_` are the tapset's own temporaries and are left out. Types are
inferred as stap's checker does for these bodies: a string literal, a
function declared `:string`, sprintf or `.` give `string`, else `long`.

Usage: stap_syscall_vars.py SYSTEMTAP_DIR > tests/data/stap_syscall_vars.tsv
The first line of the output names the commit (`git describe`).

       stap_syscall_vars.py --gaps UTAP [DATA]
prints what `UTAP -L 'syscall.*'` and `-L 'syscall.*.return'` lack of
DATA (default tests/data/stap_syscall_vars.tsv): aliases, and variables
missing or of another type. tests/syscall_alias_vars.rs checks the same
against the reasons of tests/data/stap_syscall_vars.skip.
"""

import os
import re
import subprocess
import sys

ARCH = "x86_64"


class Source:
    """The files of a checkout, read from its git HEAD or its work tree."""

    def __init__(self, root):
        self.root = root
        self.git = ["git", "--git-dir", root] if not os.path.isdir(
            os.path.join(root, "tapset")) else ["git", "-C", root]

    def run(self, *args):
        return subprocess.run(self.git + list(args), check=True,
                              capture_output=True, text=True).stdout

    def files(self):
        names = self.run("ls-tree", "-r", "--name-only", "HEAD", "tapset/").split()
        return [n for n in names if re.fullmatch(
            r"tapset/linux/(x86_64/)?(sysc_[\w]+\.stp|[\w]+\.stpm)", n)]

    def read(self, name):
        return self.run("show", "HEAD:" + name)

    def describe(self):
        return "%s %s" % (self.run("describe", "--tags", "--always").strip(),
                          self.run("rev-parse", "HEAD").strip())


def strip_comments(text):
    """Comments and embedded C (`%{ ... %}`) out; string literals kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif c == "#" or text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text.startswith("%{", i):
            j = text.find("%}", i + 2)
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching(text, start, open_tok, close_tok):
    """Index just past the `close_tok` matching the `open_tok` at start."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith(open_tok, i):
            depth += 1
            i += len(open_tok)
        elif text.startswith(close_tok, i):
            depth -= 1
            i += len(close_tok)
            if depth == 0:
                return i
        else:
            i += 1
    raise ValueError("unbalanced %s at %d" % (open_tok, start))


def take_defines(text, macros):
    """Moves `@define NAME[(params)] %( body %)` into macros."""
    out, pos = [], 0
    for m in re.finditer(r"@define\s+(\w+)\s*(\([^)]*\))?\s*(?=%\()", text):
        if m.start() < pos:
            continue
        end = matching(text, m.end(), "%(", "%)")
        macros[m.group(1)] = text[m.end() + 2:end - 2]
        out.append(text[pos:m.start()])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def arch_decision(cond):
    """True/False for a condition on arch alone, None for any other."""
    m = re.fullmatch(r'\s*arch\s*(==|!=)\s*"(\w+)"\s*', cond)
    if not m:
        return None
    return (m.group(2) == ARCH) == (m.group(1) == "==")


def preprocess(text):
    """Resolves `%( cond %? a %: b %)`: arch for x86_64, else a and b."""
    out, i = [], 0
    while True:
        j = text.find("%(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        end = matching(text, j, "%(", "%)")
        inner = text[j + 2:end - 2]
        q = top_level(inner, "%?")
        if q < 0:
            out.append(preprocess(inner))
        else:
            cond, rest = inner[:q], inner[q + 2:]
            e = top_level(rest, "%:")
            yes, no = (rest, "") if e < 0 else (rest[:e], rest[e + 2:])
            pick = arch_decision(cond)
            if pick is None:
                out.append(preprocess(yes) + "\n" + preprocess(no))
            else:
                out.append(preprocess(yes if pick else no))
        i = end


def top_level(text, tok):
    """Index of tok in text outside nested `%( %)`, or -1."""
    depth, i = 0, 0
    while i < len(text):
        if text.startswith("%(", i):
            depth += 1
            i += 2
        elif text.startswith("%)", i):
            depth -= 1
            i += 2
        elif depth == 0 and text.startswith(tok, i):
            return i
        else:
            i += 1
    return -1


def expand(body, macros, seen=()):
    """Body with its @MACRO uses replaced by their (expanded) text."""
    def repl(m):
        name = m.group(1)
        if name not in macros or name in seen:
            return m.group(0)
        return preprocess(expand(macros[name], macros, seen + (name,)))
    return re.sub(r"@(\w+)", repl, body)


PROBE = re.compile(r"\bprobe\s+([\w.]+(?:\s*,\s*[\w.]+)*)\s*=")


def take_probes(text, probes):
    """Adds `probe NAMES = TARGETS { body } [, { body }]` to probes."""
    for m in PROBE.finditer(text):
        i = m.end()
        brace = text.find("{", i)
        nxt = PROBE.search(text, i)
        if brace < 0 or (nxt and nxt.start() < brace):
            targets, bodies = text[i:nxt.start() if nxt else len(text)], []
        else:
            targets, bodies = text[i:brace], []
            while True:
                end = matching(text, brace, "{", "}")
                bodies.append(text[brace + 1:end - 1])
                more = re.match(r"\s*,\s*\{", text[end:])
                if not more:
                    break
                brace = end + more.end() - 1
        names = [t.strip(" \t\n!?") for t in targets.split(",")]
        for alias in m.group(1).split(","):
            entry = probes.setdefault(alias.strip(), ([], []))
            entry[0].extend(n for n in names if n)
            entry[1].extend(bodies)


ASSIGN = re.compile(r"(?<![\w.$@])([A-Za-z_]\w*)\s*(?:=(?!=)|\.=)")


def assignments(body):
    """(variable, right-hand side) of each assignment in body; the
    right-hand side runs to the end of its statement (across lines while
    parentheses are open), with white space collapsed."""
    plain = re.sub(r'"(?:\\.|[^"\\])*"', '"S"', body)
    for m in ASSIGN.finditer(plain):
        depth, i = 0, m.end()
        while i < len(plain):
            c = plain[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif depth <= 0 and c in "\n;}":
                break
            i += 1
        yield m.group(1), " ".join(plain[m.end():i].split())


def unwrap(rhs):
    """The expression without parentheses around the whole of it."""
    while rhs.startswith("(") and rhs.endswith(")"):
        depth = 0
        for i, c in enumerate(rhs):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(rhs) - 1:
                return rhs
        rhs = rhs[1:-1].strip()
    return rhs


def infer(rhs, string_fns, known):
    """stap's type of an assignment's right-hand side, as far as these
    bodies need: a literal, a `:string` function, `.` or a string
    variable give string; a ternary has the type of its first branch."""
    rhs = unwrap(rhs)
    tern = re.match(r"[^?]*\?(.*?):", rhs)
    if tern and "::" not in rhs:
        return infer(tern.group(1).strip(), string_fns, known)
    if rhs.startswith('"') or re.search(r"\s\.\s", rhs):
        return "string"
    call = re.match(r"@?(\w+)\s*\(", rhs)
    if call and call.group(1) in string_fns:
        return "string"
    if known.get(rhs) == "string":
        return "string"
    return "long"


def string_functions(text):
    """Functions declared `:string`, and untyped ones that return text
    (a literal or sprintf), whose type stap infers as string."""
    names = re.findall(r"\bfunction\s+(\w+)\s*:\s*string", text)
    for m in re.finditer(r"\bfunction\s+(\w+)\s*\(", text):
        body = text[m.end():m.end() + 4000].split("\nfunction", 1)[0]
        if re.search(r'\breturn\s+(?:"|sprintf\s*\()', body):
            names.append(m.group(1))
    return names


def alias_vars(name, probes, macros, string_fns, seen):
    """Ordered variable -> type for an alias and everything it resolves to."""
    if name in seen or name not in probes:
        return {}
    seen = seen | {name}
    targets, bodies = probes[name]
    out = {}
    for body in bodies:
        text = expand(preprocess(body), macros)
        for var, rhs in assignments(text):
            if var.startswith("_"):
                continue
            kind = infer(rhs, string_fns, out)
            if out.get(var) != "string":
                out[var] = kind
    for target in targets:
        for var, kind in alias_vars(target, probes, macros, string_fns, seen).items():
            if out.get(var) != "string":
                out[var] = kind
    return out


def gaps(utap, data):
    """Prints what utap's aliases lack of the data file's."""
    ours = {}
    for pattern in ("syscall.*", "syscall.*.return"):
        text = subprocess.run([utap, "-L", pattern], check=True,
                              capture_output=True, text=True).stdout
        for line in text.splitlines():
            words = line.split()
            ours[words[0]] = dict(w.split(":", 1) for w in words[1:]
                                  if not w.startswith("$"))
    for line in open(data):
        if line.startswith("#"):
            continue
        alias, _, vars_ = line.rstrip("\n").partition("\t")
        if alias not in ours:
            print("%s\tno such alias" % alias)
            continue
        for word in vars_.split():
            var, kind = word.split(":")
            have = ours[alias].get(var)
            if have != kind:
                print("%s %s\t%s" % (alias, var, "missing" if have is None else
                                     "%s, SystemTap's is %s" % (have, kind)))


def main():
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--gaps":
        here = os.path.dirname(os.path.abspath(__file__))
        gaps(sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else
             os.path.join(here, "..", "data", "stap_syscall_vars.tsv"))
        return
    if len(sys.argv) != 2:
        sys.exit("usage: stap_syscall_vars.py SYSTEMTAP_DIR")
    src = Source(sys.argv[1])
    macros, probes, string_fns = {}, {}, set()
    names = src.files()
    texts = {n: strip_comments(src.read(n)) for n in names}
    for name in sorted(names, key=lambda n: not n.endswith(".stpm")):
        texts[name] = take_defines(texts[name], macros)
    for other in src.run("ls-tree", "-r", "--name-only", "HEAD", "tapset/").split():
        if re.search(r"\.stp$", other) and not re.search(
                r"tapset/linux/(?!x86_64/)\w+/", other):
            string_fns.update(string_functions(src.read(other)))
    string_fns.update(["user_string_quoted", "user_string_nofault", "user_string",
                       "user_string2", "user_string_n", "user_string_n_quoted",
                       "kernel_string", "sprintf", "sprint", "execname", "str_replace",
                       "user_string_n_nofault", "user_string_quoted_utf32"])
    for name in names:
        take_probes(preprocess(texts[name]), probes)
    print("# SystemTap %s" % src.describe())
    for alias in sorted(probes):
        if not re.fullmatch(r"syscall\.\w+(\.return)?", alias):
            continue
        found = alias_vars(alias, probes, macros, string_fns, frozenset())
        print("%s\t%s" % (alias, " ".join("%s:%s" % kv for kv in found.items())))


if __name__ == "__main__":
    main()
