"""Sizes of the sources: no source file under base/, backends/, core/ or app/ is longer than MAX_FILE_LINES, and no
function body is longer than MAX_FUNCTION_LINES (from the line of its opening brace to that of its closing one).
The same limits hold for the Python files under analysis/, experiments/, tests/ and peers/: there a function is
read with the ast module, from its `def` line to its last line, and a function nested in another counts as part of
it; a Python file that does not parse is a breach.

A function is what the reader sees as one: a lambda or a local class counts as part of the function that holds it;
a lambda that initializes a variable outside any function counts as a function of its own. The scan needs no build:
it strips comments, string and character literals and preprocessor lines, then matches braces. At namespace or
class scope a brace opens a namespace/class (scanned further), a function body (a head that ends with its
parameter list, qualifiers, a trailing return type or a constructor's initializer list), or data (an initializer,
an enum: skipped). A file whose braces do not match is a breach too, so the check never passes by misreading one.

usage: size_check.py REPO_ROOT     exit 0 with a one-line summary when every rule holds, 1 with one line per breach
"""
import ast
import os
import re
import sys

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80
TOP_DIRS = ("base", "backends", "core", "app")
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".inc")
PYTHON_DIRS = ("analysis", "experiments", "tests", "peers")
# path (relative to the repository root) -> why it may be longer. Keep it short: every entry needs a reason.
EXEMPT = {}

CONTAINER = re.compile(r"^(?:typedef\s+|export\s+)?(?:(?:class|struct|union)\b|(?:inline\s+)?namespace\b|"
                       r"extern\s*\"\"\s*$)")
DATA_KEYWORD = re.compile(r"^(?:typedef\s+)?enum\b")
# What may follow a function's parameter list before its body.
QUALIFIERS = re.compile(r"^(?:\s*(?:const|volatile|&&|&|noexcept|override|final|mutable|constexpr|try|"
                        r"\[\[[^\]]*\]\]|->.*))*\s*$", re.S)
ACCESS = re.compile(r"(?:public|private|protected)\s*:(?!:)\s*")
IDENT = re.compile(r"[A-Za-z_~][A-Za-z_0-9]*(?:\s*::\s*~?[A-Za-z_][A-Za-z_0-9]*)*$")

# The shapes the scan must tell apart, checked on every run before the tree: (name, first line, body lines) of
# every function in SAMPLE. Namespaces, classes, an enum and array initializers are no functions; a constructor
# whose initializer list holds braces, functions in a class (as in headers), a lambda in a function (part of it)
# and a lambda initializing a variable are.
SAMPLE = r"""namespace a::b {
namespace {
const int kTable[] = {
    1, 2'000,
};
struct S : Base<int> {
  std::atomic<bool> f_{false};
  S(int x) : a_(x), b_{x, 2}, c_{3} {
    x++;
  }
  S() noexcept : a_{1} {}
  int get() const override { return '}'; }
  auto pair() -> std::pair<int, int> {
    return {1, 2};
  }
 public:
  template <class F>
  void each(F&& f) {
    auto l = [&](int y) {
      return y;  // }
    };
  }
  enum class E { A, B };
  bool operator()(int x) const {
    return x;
  }
};
const auto twice = [](int x) {
  return 2 * x;
};
}  // namespace
const char* s = "{";
int f(int x) { if (x) { return 1; } return 0; }
}  // namespace a::b
"""
SAMPLE_FUNCTIONS = [("S", 8, 3), ("S", 11, 1), ("get", 12, 1), ("pair", 13, 3), ("each", 18, 5),
                    ("operator()", 24, 3), ("twice", 28, 3), ("f", 33, 1)]

# The same for Python: a nested function is part of its parent, a method (in a class at any depth) is a function.
PY_SAMPLE = """def a():
    def b():
        return 1
    return b


class C:
    class D:
        def m(self):
            return [x for x in ()]
"""
PY_SAMPLE_FUNCTIONS = [("a", 1, 4), ("m", 9, 2)]


def strip_code(text):
    """The text with comments, literals and preprocessor lines blanked; every newline is kept, so lines still count."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":  # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 1
                i += 1
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" and not _ident_char(text, i - 1) else None
        if m:  # raw string literal R"delim( ... )delim"
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
            continue
        if c == '"' or (c == "'" and not _in_number(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _ident_char(text, i):
    return i >= 0 and (text[i].isalnum() or text[i] == "_")


def _in_number(text, i):
    """Whether the quote at i is a digit separator (1'000'000), not the start of a character literal."""
    j = i - 1
    while j >= 0 and _ident_char(text, j):
        j -= 1
    return j + 1 < i and text[j + 1].isdigit()


def depth0(head):
    """head with what is inside () and [] blanked (newlines kept): what remains is its outermost structure."""
    out, d = [], 0
    for ch in head:
        if ch in ")]":
            d -= 1
        out.append(ch if d == 0 or ch == "\n" else " ")
        if ch in "([":
            d += 1
    return "".join(out)


def after_last_paren(head):
    """What follows the last ')' at depth 0 (None when there is none)."""
    k = depth0(head).rfind(")")
    return None if k < 0 else head[k + 1:]


def normalize(head):
    """head without surrounding space, access specifiers and `template <...>` in front: a suffix of head.rstrip()."""
    head = head.strip()
    while True:
        m = ACCESS.match(head)
        if m:
            head = head[m.end():]
            continue
        if head.startswith("template") and "<" in head:
            d, k = 0, head.find("<")
            for j in range(k, len(head)):
                d += {"<": 1, ">": -1}.get(head[j], 0)
                if d == 0:
                    break
            if d:
                return head
            head = head[j + 1:].lstrip()
            continue
        return head


def has_init_list(flat):
    return re.search(r"\)\s*(?:noexcept\s*)?:(?!:)", flat) is not None


def is_init_list_brace(head):
    """A brace that initializes a member in a constructor's initializer list (`: a_(x), b_{y}`), not the body."""
    flat = depth0(normalize(head))
    return has_init_list(flat) and re.search(r"[\w>]\s*$", flat) is not None


def classify(head):
    """'container', 'function' or 'data' for a brace at namespace/class scope preceded by `head`."""
    h = normalize(head)
    if CONTAINER.match(h):
        return "container"
    if DATA_KEYWORD.match(h):
        return "data"
    tail = after_last_paren(h)
    if tail is None:
        return "data"
    if QUALIFIERS.match(tail) or (has_init_list(depth0(h)) and tail.rstrip().endswith("}")):
        return "function"
    return "data"


def function_name(h):
    """The declared name: the identifier before the parameter list (or the variable a lambda initializes)."""
    m = re.search(r"(\w+)\s*=\s*\[", depth0(h))
    if m:
        return m.group(1)
    before = h[:h.find("(")].rstrip()
    if before.endswith("operator"):
        return "operator()"
    m = re.search(r"operator\s*\S+$", before)
    if m:
        return m.group(0).replace(" ", "")
    m = IDENT.search(before)
    return re.sub(r"\s+", "", m.group(0)) if m else "?"


def line_of(code, k):
    return code.count("\n", 0, k) + 1


def scan_functions(code):
    """(name, line, body lines) of every function in the stripped code; ValueError when braces do not match."""
    found = []
    stack = []  # what each open brace is: container, function, data, or inner (any brace inside a function/data)
    start = 0  # where the head of the next brace at namespace/class scope begins
    current = None  # the open function: [name, line, line of its brace]
    k = 0
    while k < len(code):
        ch = code[k]
        if ch == "{":
            if stack and stack[-1] != "container":
                stack.append("inner")
            else:
                head = code[start:k]
                if is_init_list_brace(head):
                    k = match_brace(code, k) + 1  # part of the head: the body's brace comes after it
                    continue
                kind = classify(head)
                if kind == "function":
                    h = normalize(head)
                    at = start + len(head.rstrip()) - len(h) + max(h.find("("), 0)
                    current = [function_name(h), line_of(code, at), line_of(code, k)]
                stack.append(kind)
            start = k + 1
        elif ch == "}":
            if not stack:
                raise ValueError(f"line {line_of(code, k)}: '}}' without '{{'")
            if stack.pop() == "function":
                found.append((current[0], current[1], line_of(code, k) - current[2] + 1))
            start = k + 1
        elif ch == ";" and (not stack or stack[-1] == "container"):
            start = k + 1
        k += 1
    if stack:
        raise ValueError(f"{len(stack)} '{{' never closed")
    return found


def match_brace(code, k):
    d = 0
    for j in range(k, len(code)):
        d += {"{": 1, "}": -1}.get(code[j], 0)
        if d == 0:
            return j
    raise ValueError(f"line {line_of(code, k)}: '{{' never closed")


def python_functions(text):
    """(name, line, lines) of every outermost function in Python source: module-level functions and methods of
    classes at any depth, each from its `def` line to its last line; a function nested in a function is part of
    it. ValueError when the text does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise ValueError(f"line {e.lineno}: {e.msg}") from None
    found = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((child.name, child.lineno, child.end_lineno - child.lineno + 1))
            else:
                visit(child)
    visit(tree)
    return found


def source_files(root):
    """(relative path, path, scanner) of every file the check reads."""
    for tops, suffixes, scan in ((TOP_DIRS, SOURCE_SUFFIXES, lambda text: scan_functions(strip_code(text))),
                                 (PYTHON_DIRS, (".py",), python_functions)):
        for top in tops:
            for dirpath, dirs, files in os.walk(os.path.join(root, top)):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
                for f in sorted(files):
                    if f.endswith(suffixes):
                        path = os.path.join(dirpath, f)
                        yield os.path.relpath(path, root).replace(os.sep, "/"), path, scan


def check(root):
    """(breaches, files scanned, functions scanned)."""
    errors, files, functions = [], 0, 0
    for rel, path, scan in source_files(root):
        if rel in EXEMPT:
            continue
        files += 1
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE_LINES:
            errors.append(f"{rel}:1 file {lines} lines (at most {MAX_FILE_LINES})")
        try:
            found = scan(text)
        except ValueError as e:
            errors.append(f"{rel}: cannot {'parse' if rel.endswith('.py') else 'match braces'} ({e})")
            continue
        functions += len(found)
        for name, line, n in found:
            if n > MAX_FUNCTION_LINES:
                errors.append(f"{rel}:{line} {name} {n} lines (at most {MAX_FUNCTION_LINES})")
    return errors, files, functions


def main(argv):
    if len(argv) != 2 or not os.path.isdir(os.path.join(argv[1], "core")):
        print("usage: size_check.py REPO_ROOT", file=sys.stderr)
        return 2
    found = scan_functions(strip_code(SAMPLE))
    if found != SAMPLE_FUNCTIONS:
        print(f"size_check: the scan misreads its own sample: found {found}, expected {SAMPLE_FUNCTIONS}")
        return 1
    found = python_functions(PY_SAMPLE)
    if found != PY_SAMPLE_FUNCTIONS:
        print(f"size_check: the scan misreads its Python sample: found {found}, expected {PY_SAMPLE_FUNCTIONS}")
        return 1
    errors, files, functions = check(argv[1])
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"sizes ok: {files} files of at most {MAX_FILE_LINES} lines, {functions} functions of at most "
          f"{MAX_FUNCTION_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
