#!/usr/bin/env python3
"""Every relative link of the documentation resolves.

The pages are the Markdown files at the top of the repository (README.md,
DESIGN.md, ...) and under docs/. A link resolves when the file or folder it
names exists, relative to the page, and its #fragment, if any, is the anchor
GitHub gives a heading of the Markdown page it points to (or an <a id> or
<a name> there). Links with a scheme (https:, mailto:, ...) are not checked;
links inside code spans and fenced code blocks are not links.

GitHub's anchor of a heading: its text as rendered (code spans keep their
text, emphasis and link syntax go), lower-cased, every character that is not
a letter, a digit, a space, a hyphen or an underscore removed, spaces
turned into hyphens; a second heading with the same anchor gets "-1", a
third "-2".

First the checker runs on a planted tree, whose broken links it must report
and whose good ones it must accept, so that it cannot pass by seeing nothing.

Usage: doc_links_test.py SOURCE_DIR
"""
import os
import re
import sys
import tempfile
import unicodedata

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def pages(root):
    """The Markdown pages checked: the top level's and docs/'s, recursively."""
    found = [os.path.join(root, name) for name in sorted(os.listdir(root)) if name.endswith(".md")]
    docs = os.path.join(root, "docs")
    for folder, _, names in sorted(os.walk(docs)):
        found += [os.path.join(folder, name) for name in sorted(names) if name.endswith(".md")]
    return found


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
            continue
        if match:
            fence = match.group(1)
            continue
        yield number, line


def heading_text(raw):
    """A heading's text as GitHub renders it, for its anchor."""
    spans = []

    def keep_code(match):
        spans.append(match.group(2).strip())
        return "\0%d\0" % (len(spans) - 1)

    text = CODE_SPAN.sub(keep_code, raw)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("*", "")
    text = re.sub(r"(?<![\w\\])_+|_+(?![\w])", "", text)  # _emphasis_, not snake_case
    return re.sub(r"\0(\d+)\0", lambda m: spans[int(m.group(1))], text)


def slug(text):
    kept = []
    for ch in text.lower():
        category = unicodedata.category(ch)
        if category[0] in "LMN" or ch in " -_":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found, seen = set(), {}
        for _, line in prose_lines(text):
            found.update(HTML_ANCHOR.findall(line))
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(heading_text(match.group(2)))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else "%s-%d" % (base, count))
        cache[path] = found
    return cache[path]


def links(text):
    """(line number, target) of every link outside code; a link's text may
    run over lines."""
    lines = text.splitlines()
    prose = set(number for number, _ in prose_lines(text))
    kept = "\n".join(line if number in prose else "" for number, line in enumerate(lines, 1))
    # Code spans blanked, newlines kept, so that offsets still give lines.
    kept = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), kept)
    for match in INLINE_LINK.finditer(kept):
        yield kept.count("\n", 0, match.start()) + 1, match.group(1)
    for number, line in enumerate(kept.split("\n"), 1):
        match = REFERENCE_DEFINITION.match(line)
        if match:
            yield number, match.group(1)


def check(root):
    """The broken links of the pages under root, as 'page:line: what'."""
    problems, checked = [], 0
    for page in pages(root):
        with open(page, encoding="utf-8") as f:
            text = f.read()
        where = os.path.relpath(page, root)
        for number, target in links(text):
            if not target or SCHEME.match(target):
                continue
            checked += 1
            path, _, fragment = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(resolved):
                problems.append("%s:%d: %s: no such file or folder" % (where, number, target))
                continue
            if fragment:
                if not resolved.endswith(".md") or os.path.isdir(resolved):
                    problems.append("%s:%d: %s: an anchor into a file that is not Markdown" %
                                    (where, number, target))
                elif fragment not in anchors(resolved):
                    problems.append("%s:%d: %s: %s has no heading with the anchor '%s'" %
                                    (where, number, target, os.path.relpath(resolved, root),
                                     fragment))
    return problems, checked


def planted_tree(folder):
    """A tree with known good and broken links; returns the broken ones' lines."""
    os.makedirs(os.path.join(folder, "docs"))
    os.makedirs(os.path.join(folder, "scripts"))
    with open(os.path.join(folder, "scripts", "run.sh"), "w") as f:
        f.write("true\n")
    with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
        f.write("# Top\n\n"
                "[good](docs/page.md) [good](docs/page.md#the-cpu-step-against-pytorch)\n"
                "[good](#top) [good](scripts/run.sh) [good](scripts/) [good](https://example.org/x)\n"
                "[broken](docs/missing.md)\n"
                "[broken](docs/page.md#no-such-heading)\n"
                "`[not a link](nowhere.md)`\n"
                "```\n[not a link](nowhere.md)\n# not a heading\n```\n"
                "[ref]: docs/gone.md\n"
                "[broken](scripts/run.sh#anchor) [broken over\n"
                "lines](docs/nowhere.md)\n")
    with open(os.path.join(folder, "docs", "page.md"), "w", encoding="utf-8") as f:
        f.write("# Page\n\n## The CPU step against PyTorch\n\n### `model_bench`'s count, 16 bits\n\n"
                "## Twice\n\n## Twice\n\n## Sharded *optimizer* state (ZeRO-1)\n\n"
                "[good](#model_benchs-count-16-bits) [good](#twice-1) [good](../README.md#top)\n"
                "[good](#sharded-optimizer-state-zero-1)\n"
                "[broken](#twice-2) [broken](#not-a-heading)\n")
    return {"README.md:5", "README.md:6", "README.md:12", "README.md:13", "docs/page.md:15"}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as folder:
        expected = planted_tree(folder)
        problems, _ = check(folder)
        reported = {":".join(p.split(":")[:2]) for p in problems}
        if reported != expected or len(problems) != 7:
            print("FAIL: on the planted tree the checker reported\n  " + "\n  ".join(problems) +
                  "\nwhere the broken links are on lines " + ", ".join(sorted(expected)) +
                  " (two on README.md:13 and two on docs/page.md:15)", file=sys.stderr)
            return 1
    root = os.path.abspath(sys.argv[1])
    problems, checked = check(root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("FAIL: %d of %d relative links do not resolve" % (len(problems), checked),
              file=sys.stderr)
        return 1
    print("doc links: %d relative links in %d pages resolve" % (checked, len(pages(root))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
