"""Write copier.yml's validators from the rules in the worker runtime's naming.py.

The rules for names, namespaces, lanes and regions live in one place, the
runtime's `workergen_runtime/naming.py`, because a generated project applies them
to its settings and depends on the runtime, not on workergen. copier.yml can only run Jinja, so its
validators are generated from those rules; the tests fail when copier.yml and
the rules drift apart.

    python scripts/sync_validators.py          # rewrite copier.yml
    python scripts/sync_validators.py --check  # exit 1 if copier.yml is out of date
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COPIER_YML = ROOT / "copier.yml"
NAMING_PY = ROOT / "runtime" / "src" / "workergen_runtime" / "naming.py"
MARKER = (
    "  # Generated from workergen_runtime/naming.py by scripts/sync_validators.py: "
    "edit the rule there."
)


def load_naming(path: Path = NAMING_PY) -> ModuleType:
    """Import the runtime's naming.py (standard library only) under a private name."""
    spec = importlib.util.spec_from_file_location("_workergen_template_naming", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def literal(text: str) -> str:
    """A Jinja string literal for `text` (Jinja unescapes literals as Python does)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def message(template: str, value: str) -> str:
    """A Jinja expression printing a rule's message, with `{value}` as the variable."""
    parts = [literal(part) for part in template.split("{value}")]
    return "{{ " + f" ~ {value} ~ ".join(parts) + " }}"


def fails(check: Any, value: str) -> str:
    """A Jinja condition true when `value` breaks `check`."""
    conditions = []
    if check.pattern is not None:
        anchored = literal(f"^(?:{check.pattern})\\Z")
        conditions.append(f"({value} | regex_search({anchored})) is none")
    if check.refused:
        words = ", ".join(literal(word) for word in sorted(check.refused))
        conditions.append(f"{value} in [{words}]")
    return " or ".join(conditions)


def item_fails(rule: Any, value: str) -> str:
    """A Jinja condition true when `value` breaks any check of a text rule."""
    condition = " or ".join(f"({fails(check, value)})" for check in rule.checks)
    return f"({value} != '' and ({condition}))" if rule.empty_allowed else condition


def text_validator(rule: Any) -> list[str]:
    """The validator lines of a text rule: one branch per check, in the rule's order."""
    name = rule.question
    lines = []
    for index, check in enumerate(rule.checks):
        if index == 1 and rule.empty_allowed:
            lines.append(f"{{%- elif {name} == '' %}}")
        keyword = "if" if index == 0 else "elif"
        dash = "" if index == 0 else "-"
        lines.append(f"{{%{dash} {keyword} {fails(check, name)} %}}{message(check.message, name)}")
    lines.append("{%- endif %}")
    return lines


def list_validator(rule: Any) -> list[str]:
    """The validator lines of a comma-separated rule."""
    name = rule.question
    return [
        f"{{% set names = {name}.split(',') | map('trim') | list %}}",
        "{%- set bad = [] %}",
        f"{{%- for item in names if {item_fails(rule.item, 'item')} %}}"
        "{% set _ = bad.append(item) %}{% endfor %}",
        f"{{%- if {fails(rule.template_check, name)} %}}"
        f"{message(rule.template_check.message, name)}",
        f"{{%- elif bad %}}{message(rule.item_message, 'bad[0]')}",
        "{%- elif names | unique(case_sensitive=true) | list | length != names | length %}"
        f"{message(rule.duplicate_message, name)}",
        f"{{%- elif {literal(rule.required)} not in names %}}"
        f"{message(rule.required_message, name)}",
        "{%- endif %}",
    ]


def validator_block(rule: Any) -> str:
    """The copier.yml lines of a question's validator, marker comment included."""
    lines = list_validator(rule) if hasattr(rule, "item") else text_validator(rule)
    return "\n".join([MARKER, "  validator: >-", *(f"    {line}" for line in lines)]) + "\n"


def synced(text: str, rules: dict[str, Any]) -> str:
    """copier.yml's text with every ruled question's validator regenerated."""
    for question, rule in rules.items():
        block = re.compile(
            rf"(^{re.escape(question)}:\n(?:  .*\n)*?)"
            rf"(?:{re.escape(MARKER)}\n)?  validator: >-\n(?:    .*\n)+",
            re.MULTILINE,
        )
        text, count = block.subn(lambda match, r=rule: match.group(1) + validator_block(r), text)
        if count != 1:
            raise SystemExit(f"copier.yml: no validator found for the question {question!r}")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; write nothing")
    options = parser.parse_args(argv)
    current = COPIER_YML.read_text(encoding="utf-8")
    wanted = synced(current, load_naming().ANSWER_RULES)
    if options.check:
        if wanted != current:
            print(
                "copier.yml's validators differ from workergen_runtime/naming.py's rules; "
                "run: python scripts/sync_validators.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if wanted != current:
        COPIER_YML.write_text(wanted, encoding="utf-8")
        print("copier.yml: validators rewritten from workergen_runtime/naming.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
