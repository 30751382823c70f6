#!/usr/bin/env python3
"""docs/events.md lists every log event the agents emit, and no other.

    tests/scripts/check_events.py [SOURCE_DIR]        check (exit 1 on a difference)
    tests/scripts/check_events.py --dump [SOURCE_DIR] every event found, where, level, fields

An event is found in the C sources of agent-source/, agent-target/ and
common/ (tests excluded) as any call with a log level argument (DS_LOG_DEBUG,
_INFO, _WARN, _ERROR) followed by a string literal: ds_log(LEVEL, "event",
"k=%s ...") (its level a variable or not) and the link's emit(..., LEVEL, "event", ...) alike; a ternary
gives each of its literals (ds_log(ok ? DS_LOG_INFO : DS_LOG_WARN, ok ?
"verified" : "not_verified", ...)). The applier's and the exporter's events
reach the log through such calls in the agents' callbacks. docs/events.md
lists an event as a table row whose first cell is the name in backticks:
| `apply` | info, warn | source, object, ... | ... |
Python 3 standard library only.
"""
import os
import re
import sys

LEVEL_RE = re.compile(r'\bDS_LOG_(DEBUG|INFO|WARN|ERROR)\b')
STRING_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
NAME_RE = re.compile(r'^[a-z][a-z0-9_]*$')
ROW_RE = re.compile(r'^\|\s*`([a-z][a-z0-9_]*)`\s*\|')
SCANNED = ('agent-source', 'agent-target', 'common')


def strip_comments(text):
    """Comments become spaces (newlines kept, so line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def split_args(text, start):
    """The arguments of the call whose '(' is at start, split at top-level commas."""
    args, depth, i, cur = [], 0, start + 1, []
    while i < len(text):
        c = text[i]
        if c in '"\'':
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c in '([{':
            depth += 1
        elif c in ')]}':
            if depth == 0:
                args.append(''.join(cur))
                return args
            depth -= 1
        elif c == ',' and depth == 0:
            args.append(''.join(cur))
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    return args


def field_keys(args):
    """The keys of the key=value pairs in the format strings after the event."""
    keys = []
    for a in args:
        for s in STRING_RE.findall(a):
            for k in re.findall(r'(?:^|[\s"])([a-z][A-Za-z0-9_]*)=', s):
                if k not in keys:
                    keys.append(k)
    return keys


def scan(root):
    """{event: {"levels": set, "fields": list, "where": [file:line]}}."""
    events = {}
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            for name in sorted(filenames):
                if not name.endswith('.c'):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding='utf-8', errors='replace') as f:
                    text = strip_comments(f.read())
                for m in re.finditer(r'\b[A-Za-z_]\w*\s*\(', text):
                    args = split_args(text, m.end() - 1)
                    is_log = re.match(r'ds_log\s*\($', m.group(0)) is not None
                    for i in range(len(args) - 1):
                        levels = LEVEL_RE.findall(args[i])
                        if not levels and not (is_log and i == 0):
                            continue
                        names = STRING_RE.findall(args[i + 1])
                        rest = re.sub(STRING_RE, '', args[i + 1])
                        if not names or re.search(r'[A-Za-z_]\w*\s*\(', rest):
                            continue
                        line = text.count('\n', 0, m.start()) + 1
                        where = f'{os.path.relpath(path, root)}:{line}'
                        for ev in names:
                            if not NAME_RE.match(ev):
                                continue
                            e = events.setdefault(ev, {'levels': set(), 'fields': [],
                                                       'where': []})
                            e['levels'].update(lv.lower() for lv in levels)
                            for k in field_keys(args[i + 2:]):
                                if k not in e['fields']:
                                    e['fields'].append(k)
                            if where not in e['where']:
                                e['where'].append(where)
                        break
    return events


def listed(path):
    """{event: line} of the rows of docs/events.md."""
    out = {}
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            m = ROW_RE.match(line)
            if m:
                out.setdefault(m.group(1), n)
    return out


def main(argv):
    dump = '--dump' in argv
    argv = [a for a in argv if a != '--dump']
    root = os.path.abspath(argv[0] if argv else
                           os.path.join(os.path.dirname(__file__), '..', '..'))
    events = scan(root)
    if dump:
        order = ['debug', 'info', 'warn', 'error']
        for ev in sorted(events):
            e = events[ev]
            lv = ', '.join(sorted(e['levels'], key=order.index))
            print(f"{ev}\t{lv}\t{', '.join(e['fields'])}\t{' '.join(e['where'])}")
        return 0
    doc = os.path.join(root, 'docs', 'events.md')
    if not os.path.exists(doc):
        print('check_events: docs/events.md does not exist')
        return 1
    rows = listed(doc)
    bad = 0
    for ev in sorted(set(events) - set(rows)):
        print(f"{events[ev]['where'][0]}: event {ev} is emitted but docs/events.md "
              'does not list it')
        bad += 1
    for ev in sorted(set(rows) - set(events)):
        print(f'docs/events.md:{rows[ev]}: event {ev} is listed but no code emits it')
        bad += 1
    if bad:
        print(f'check_events: {bad} difference(s) between the code and docs/events.md')
        return 1
    print(f'check_events: docs/events.md lists the {len(events)} events the code emits')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
