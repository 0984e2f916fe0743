"""CUDA C++ source as tokens, the way the compiler's first phases see it, and the kernels'
entry points with their parameter types.

The C++ guard (cuda_check.py) judges these tokens, and the builder (autokernel/cuda_build.py)
reads the entry points from them to pass arguments. So the splitting must agree with nvcc's
wherever a disagreement could hide code: line splices are joined first, comments become one
space (a block comment's newlines vanish, as the standard says, so a directive runs on), string
and character literals end where the compiler ends them, and a digit separator (1'000) stays
inside its number. Constructs whose reading depends on the dialect (trigraphs, digraph `%:`,
raw strings, universal character names, non-ASCII outside literals) are reported rather than
guessed: the guard refuses them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PUNCT3 = ("<<=", ">>=", "->*", "...", "<=>")
PUNCT2 = ("::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=",
          "*=", "/=", "%=", "&=", "|=", "^=", "##", ".*")  # fmt: skip
RAW_PREFIXES = frozenset({"R", "u8R", "uR", "UR", "LR"})
STRING_PREFIXES = frozenset({"u8", "u", "U", "L"})
TRIGRAPH = re.compile(r"\?\?[=/'()!<>\-]")
SPACED_SPLICE = re.compile(r"\\[ \t\f\v]+\r?\n")


@dataclass(frozen=True)
class Token:
    kind: str  # "ident", "number", "string", "char", "punct", "newline", "header" (<...>)
    text: str
    line: int  # 1-based line in the source as written


class SourceError(ValueError):
    """Source the tokenizer will not read (an unterminated literal or comment, a construct
    whose meaning depends on the dialect). The message names the line."""


def _splice(source: str) -> tuple[str, list[int]]:
    """The text with every backslash-newline removed, and the written line of each character."""
    chars: list[str] = []
    lines: list[int] = []
    line, i, n = 1, 0, len(source)
    while i < n:
        c = source[i]
        if c == "\r" and not source.startswith("\n", i + 1):
            raise SourceError(f"line {line}: a carriage return that is not part of CR LF (the "
                              "compiler's preprocessor ends a line there)")  # fmt: skip
        if c == "\\" and SPACED_SPLICE.match(source, i):
            raise SourceError(f"line {line}: whitespace between a backslash and the end of "
                              "the line (the preprocessor still joins the lines)")  # fmt: skip
        if c == "\\" and source.startswith("\n", i + 1):
            line, i = line + 1, i + 2
            continue
        if c == "\\" and source.startswith("\r\n", i + 1):
            line, i = line + 1, i + 3
            continue
        chars.append(c)
        lines.append(line)
        if c == "\n":
            line += 1
        i += 1
    return "".join(chars), lines


def tokenize(source: str) -> list[Token]:
    """Tokens of the source, newlines (outside comments and literals) included as tokens, so
    preprocessor directives can be told apart. SourceError for what the guard must refuse."""
    text, lines = _splice(source.replace("\r\n", "\n"))
    out: list[Token] = []
    i, n = 0, len(text)

    def at(k: int) -> int:
        return lines[k] if k < len(lines) else (lines[-1] if lines else 1)

    while i < n:
        c = text[i]
        if c == "<" and _after_include(out):
            end = text.find(">", i)
            if end < 0 or "\n" in text[i:end]:
                raise SourceError(f"line {at(i)}: #include <... is never closed on its line")
            out.append(Token("header", text[i : end + 1], at(i)))
            i = end + 1
        elif c == "\n":
            out.append(Token("newline", "\n", at(i)))
            i += 1
        elif c in " \t\f\v\r":
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise SourceError(f"line {at(i)}: a /* comment is never closed")
            i = end + 2
        elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i + 1
            while j < n:
                d = text[j]
                if d in "eEpP" and j + 1 < n and text[j + 1] in "+-":
                    j += 2
                elif d.isalnum() or d in "._":
                    j += 1
                elif d == "'" and j + 1 < n and _ident_char(text[j + 1]):
                    j += 1  # a digit separator, never a character literal
                elif d == "'" and j + 1 < n and (text[j + 1] in "$\\" or ord(text[j + 1]) > 127):
                    # the preprocessor's number goes on through `'$`, `'\u..` and `'é`: what
                    # would read here as a character literal is code to the compiler
                    raise SourceError(f"line {at(j)}: a digit separator before "
                                      f"{text[j + 1]!r}; write plain ASCII digits")  # fmt: skip
                else:
                    break
            out.append(Token("number", text[i:j], at(i)))
            i = j
        elif c.isalpha() or c == "_" or c == "\\" or ord(c) > 127:
            m = IDENT.match(text, i)
            if m is None:
                what = "a universal character name" if c == "\\" else f"the character {c!r}"
                raise SourceError(f"line {at(i)}: {what} outside a literal; write plain ASCII")
            word, j = m.group(), m.end()
            if (j < n and text[j] in "\\") or (j < n and ord(text[j]) > 127):
                raise SourceError(f"line {at(i)}: identifier {word!r} continues with a non-ASCII "
                                  "character or a universal character name")  # fmt: skip
            if j < n and text[j] == '"' and word in RAW_PREFIXES:
                raise SourceError(f"line {at(i)}: raw string literals are not allowed")
            if j < n and text[j] in "\"'" and word in STRING_PREFIXES:
                end = _literal_end(text, j, at)
                out.append(Token("string" if text[j] == '"' else "char", text[i:end], at(i)))
                i = end
                continue
            out.append(Token("ident", word, at(i)))
            i = j
        elif c in "\"'":
            end = _literal_end(text, i, at)
            out.append(Token("string" if c == '"' else "char", text[i:end], at(i)))
            i = end
        else:
            if c == "$":
                # the compiler reads `$` as part of an identifier or number, the guard would not
                raise SourceError(f"line {at(i)}: '$' outside a literal; write plain identifiers")
            if TRIGRAPH.match(text, i):
                raise SourceError(f"line {at(i)}: trigraph {text[i : i + 3]!r} is not allowed")
            if text.startswith("%:", i) or text.startswith("<:", i) or text.startswith("%>", i):
                raise SourceError(f"line {at(i)}: digraph {text[i : i + 2]!r} is not allowed")
            if text.startswith("<%", i) or text.startswith(":>", i):
                raise SourceError(f"line {at(i)}: digraph {text[i : i + 2]!r} is not allowed")
            for size, table in ((3, PUNCT3), (2, PUNCT2)):
                if text[i : i + size] in table:
                    out.append(Token("punct", text[i : i + size], at(i)))
                    i += size
                    break
            else:
                out.append(Token("punct", c, at(i)))
                i += 1
    return out


def _ident_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "_")


def _after_include(out: list[Token]) -> bool:
    """Whether the tokens so far end a line's `# include`: a <...> next is one header name, in
    which the compiler sees no comments or literals."""
    return (
        len(out) >= 2
        and out[-1].text == "include"
        and out[-2].text == "#"
        and (len(out) == 2 or out[-3].kind == "newline")
    )


def _literal_end(text: str, start: int, at) -> int:
    """Index just past the string or character literal opening at text[start]."""
    quote, i, n = text[start], start + 1, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            return i + 1
        if c == "\n":
            break
        i += 1
    raise SourceError(f"line {at(start)}: a {quote} literal is never closed on its line")


def string_value(token: Token) -> str:
    """The characters of a plain string literal, escapes left as written (PTX reads `\\n` and
    `\\t` as separators, which is all the guard needs to know of them)."""
    return token.text[token.text.index('"') + 1 : -1]


def logical_lines(tokens: list[Token]) -> list[list[Token]]:
    """Tokens grouped by logical line (newline tokens dropped, empty lines skipped)."""
    lines: list[list[Token]] = [[]]
    for tok in tokens:
        if tok.kind == "newline":
            lines.append([])
        else:
            lines[-1].append(tok)
    return [line for line in lines if line]


# ---- entry points ----

# C parameter types the launcher can pass by value: ctypes type code (struct module letters).
SCALAR_TYPES = {
    ("int",): "i", ("signed",): "i", ("signed", "int"): "i", ("int32_t",): "i",
    ("unsigned",): "I", ("unsigned", "int"): "I", ("uint32_t",): "I",
    ("long", "long"): "q", ("long", "long", "int"): "q", ("int64_t",): "q", ("long",): "q",
    ("unsigned", "long", "long"): "Q", ("uint64_t",): "Q", ("size_t",): "Q",
    ("unsigned", "long"): "Q", ("float",): "f", ("double",): "d", ("bool",): "?",
}  # fmt: skip
QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict",
                        "__grid_constant__", "struct"})  # fmt: skip
ANNOTATIONS = frozenset({"__launch_bounds__", "__cluster_dims__", "__maxnreg__"})


@dataclass(frozen=True)
class EntryPoint:
    """An `extern "C" __global__ void name(...)` kernel: what the launcher can call."""

    name: str
    params: tuple[str, ...]  # "P" for a pointer, else a SCALAR_TYPES code
    line: int


def skip_parens(tokens: list[Token], i: int) -> int:
    """Index past the balanced (...) group starting at tokens[i] == '('."""
    depth = 0
    while i < len(tokens):
        if tokens[i].text == "(":
            depth += 1
        elif tokens[i].text == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise SourceError("unbalanced parentheses")


def _param_type(toks: list[Token], kernel: str, line: int) -> str:
    words = [t.text for t in toks if t.text not in QUALIFIERS]
    if "*" in words:
        return "P"
    if "&" in words or "[" in words:
        raise SourceError(f"line {line}: kernel {kernel}: references and arrays cannot be "
                          "passed from Python; take a pointer")  # fmt: skip
    key = tuple(words[:-1]) if len(words) > 1 else tuple(words)
    if key in SCALAR_TYPES:
        return SCALAR_TYPES[key]
    shown = " ".join(t.text for t in toks)
    if "(" in words:
        raise SourceError(f"line {line}: kernel {kernel}: write its parameter list out "
                          f"('{shown}' looks like a macro): the launcher reads it without the "
                          "preprocessor")  # fmt: skip
    raise SourceError(f"line {line}: kernel {kernel}: parameter '{shown}' has a type the "
                      "launcher cannot pass; use pointers, int, unsigned, int64_t, float, double "
                      "or bool")  # fmt: skip


def entry_points(tokens: list[Token]) -> list[EntryPoint]:
    """Every `extern "C" __global__ void NAME(params)` (annotations such as __launch_bounds__
    allowed between), in source order. SourceError for a parameter that cannot be passed."""
    toks = [t for t in tokens if t.kind != "newline"]
    found: list[EntryPoint] = []
    for i, tok in enumerate(toks):
        if tok.text != "extern" or i + 1 >= len(toks) or toks[i + 1].text != '"C"':
            continue
        j, seen_global = i + 2, False
        while j < len(toks):
            word = toks[j].text
            if word == "__global__":
                seen_global = True
                j += 1
            elif word in ANNOTATIONS and j + 1 < len(toks) and toks[j + 1].text == "(":
                j = skip_parens(toks, j + 1)
            elif word == "void":
                j += 1
            else:
                break
        if not seen_global or j + 1 >= len(toks) or toks[j].kind != "ident":
            continue
        name = toks[j].text
        if toks[j + 1].text != "(":
            continue
        end = skip_parens(toks, j + 1)
        inner = toks[j + 2 : end - 1]
        params: list[str] = []
        group: list[Token] = []
        depth = 0
        for t in [*inner, Token("punct", ",", tok.line)]:
            if t.text in "(<[":
                depth += 1
            elif t.text in ")>]":
                depth -= 1
            if t.text == "," and depth == 0:
                if group and not (len(group) == 1 and group[0].text == "void"):
                    params.append(_param_type(group, name, tok.line))
                group = []
            else:
                group.append(t)
        found.append(EntryPoint(name, tuple(params), tok.line))
    return found
