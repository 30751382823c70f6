#!/usr/bin/env python3
"""Every name README.md and docs/*.md give exists in the tree.

    tests/scripts/check_docs.py [SOURCE_DIR]

Checks, in each Markdown file:
  - functions: `name()` in a code span (ds_*() and the static helpers the
    docs name in brackets) is defined or called in a C, Go or shell source;
  - paths: agent-source/..., agent-target/..., common/..., tests/...,
    scripts/..., deploy/..., proto/... name a file or folder of the tree
    (`*` and {a,b} as the shell reads them), and a file named alone in a
    code span (`applier.c`) is one somewhere in the tree (or one a script of
    the tree writes, as scripts/demo.sh writes stop.sh);
  - commands: `drasync-source SUB` and `drasync-target SUB` in code (code
    spans and fenced blocks) name a subcommand of that agent, and each --flag
    after it is an option some C file of that agent or of common/ declares.
Prints each missing name as file:line and exits 1 when there is one.
Python 3 standard library only.
"""
import glob
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..', '..'))
CODE_DIRS = ('agent-source', 'agent-target', 'common', 'proto', 'tests', 'scripts', 'deploy')
AGENTS = {'drasync-source': 'agent-source', 'drasync-target': 'agent-target'}
PATH_RE = re.compile(
    r'(?<![\w./~$-])((?:agent-source|agent-target|common|tests|scripts|deploy|proto)'
    r'/[\w./*{},+-]*)')
FUNC_RE = re.compile(r'`\[?([A-Za-z_]\w*)\(\)\]?`|\[`([A-Za-z_]\w*)\(\)`\]|\b(ds_\w+)\(\)')
CMD_RE = re.compile(r'\b(drasync-source|drasync-target)[ \t]+([a-z][a-z-]*)\b(?![/.])')
FLAG_RE = re.compile(r'(?<![\w-])--([a-z][a-z0-9-]*)')
SPAN_RE = re.compile(r'`([^`\n]+)`')
BARE_RE = re.compile(r'`([\w-]+\.(?:c|h|sh|py|go|proto|cmake))`')


def docs():
    files = [os.path.join(ROOT, 'README.md')]
    files += sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))
    return [f for f in files if os.path.exists(f)]


def sources(exts):
    for top in CODE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if not d.startswith('.')]
            for name in filenames:
                if name.endswith(exts):
                    yield os.path.join(dirpath, name)


def read(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return f.read()


def braces(pattern):
    """Expands the first {a,b} of pattern, recursively, as the shell does."""
    m = re.search(r'\{([^{}]*)\}', pattern)
    if not m:
        return [pattern]
    out = []
    for alt in m.group(1).split(','):
        out += braces(pattern[:m.start()] + alt + pattern[m.end():])
    return out


def path_exists(name):
    """A placeholder in capitals (tests/bench/bench_NAME.c) stands for any name."""
    name = re.sub(r'(?<![A-Za-z])[A-Z][A-Z_]+(?![a-z])', '*', name.rstrip('.,:;)'))
    for p in braces(name):
        full = os.path.join(ROOT, p)
        if any(c in p for c in '*?['):
            if not glob.glob(full):
                return False
        elif not os.path.exists(full):
            return False
    return True


def code_lines(text):
    """(line number, code) for each line: fenced blocks whole (with
    backslash-continued lines joined), else the code spans of the line."""
    out, fenced, pending, start = [], False, '', 0
    for n, line in enumerate(text.split('\n'), 1):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        if fenced:
            if not pending:
                start = n
            if line.rstrip().endswith('\\'):
                pending += line.rstrip()[:-1] + ' '
                continue
            out.append((start, pending + line))
            pending = ''
        else:
            for span in SPAN_RE.findall(line):
                out.append((n, span))
    return out


def main():
    c_text = '\n'.join(read(p) for p in sources(('.c', '.h')))
    other_text = '\n'.join(read(p) for p in sources(('.go', '.sh', '.py')))
    defined = set(re.findall(r'\b([A-Za-z_]\w*)\s*\(', c_text + '\n' + other_text))
    defined |= set(re.findall(r'^\s*(?:function\s+)?([A-Za-z_]\w*)\s*\(\)', other_text, re.M))
    subcommands, options = {}, {}
    for cmd, area in AGENTS.items():
        top = [p for p in glob.glob(os.path.join(ROOT, area, '*.c'))]
        text = '\n'.join(read(p) for p in top)
        subcommands[cmd] = set(re.findall(r'"([a-z][a-z-]*)"', text))
        subcommands[cmd] |= {os.path.basename(p)[4:-2] for p in top
                             if os.path.basename(p).startswith('cmd_')}
        both = '\n'.join(read(p) for p in sources(('.c', '.h'))
                         if p.startswith(os.path.join(ROOT, area) + os.sep) or
                         p.startswith(os.path.join(ROOT, 'common') + os.sep))
        options[cmd] = set(re.findall(r'"(?:--)?([a-z][a-z0-9-]*)', both))

    basenames = set()
    for top in CODE_DIRS:
        for _, _, filenames in os.walk(os.path.join(ROOT, top)):
            basenames.update(filenames)
    missing = []
    for doc in docs():
        rel = os.path.relpath(doc, ROOT)
        text = read(doc)
        for n, line in enumerate(text.split('\n'), 1):
            for m in FUNC_RE.finditer(line):
                name = m.group(1) or m.group(2) or m.group(3)
                if name not in defined:
                    missing.append(f'{rel}:{n}: function {name}() is not in the tree')
            for m in BARE_RE.finditer(line):
                if m.group(1) not in basenames and m.group(1) not in other_text:
                    missing.append(f'{rel}:{n}: file {m.group(1)} is not in the tree')
            for m in PATH_RE.finditer(line):
                if not path_exists(m.group(1)):
                    missing.append(f'{rel}:{n}: path {m.group(1).rstrip(".,:;)")} '
                                   'is not in the tree')
        for n, code in code_lines(text):
            for m in CMD_RE.finditer(code):
                cmd, sub = m.group(1), m.group(2)
                if sub not in subcommands[cmd]:
                    missing.append(f'{rel}:{n}: command "{cmd} {sub}" does not exist')
                    continue
                rest = re.split(r'[|#;`]|&&|\bdrasync-(?:source|target)\b', code[m.end():])[0]
                for flag in FLAG_RE.findall(rest):
                    if flag not in options[cmd]:
                        missing.append(f'{rel}:{n}: option "{cmd} {sub} --{flag}" '
                                       'does not exist')
    missing = list(dict.fromkeys(missing))
    for line in missing:
        print(line)
    if missing:
        print(f'check_docs: {len(missing)} name(s) the docs give are not in the tree')
        return 1
    print(f'check_docs: every function, path and command of {len(docs())} files exists')
    return 0


if __name__ == '__main__':
    sys.exit(main())
