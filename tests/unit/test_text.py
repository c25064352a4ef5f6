"""Names a terminal and a log can show as they are, and log text that stays one line
with nothing in it a terminal obeys (issue 29, item 10; docs/security.md)."""

from __future__ import annotations

import pytest

from cronwheel.core.text import check_name, escape_controls, unsafe_character

REFUSED = [
    ("line\nbreak", 0x0A),
    ("carriage\rreturn", 0x0D),
    ("tab\there", 0x09),
    ("nul\x00", 0x00),
    ("\x1b[31mred", 0x1B),
    ("del\x7f", 0x7F),
    ("c1\x85next-line", 0x85),
    ("c1\x9bcsi", 0x9B),
    ("txt.\u202eexe", 0x202E),  # right-to-left override
    ("\u202dforce-ltr", 0x202D),
    ("isolate\u2066x\u2069", 0x2066),
    ("mark\u200f", 0x200F),
    ("arabic mark\u061c", 0x061C),
    ("line\u2028separator", 0x2028),
    ("paragraph\u2029separator", 0x2029),
]
ALLOWED = ["nightly report", "Rapport de nuit (été)", "ジョブ", "job-1_a.b:c", "emoji 🕐", "a/b"]


@pytest.mark.parametrize(("name", "code"), REFUSED)
def test_control_and_bidi_characters_are_refused_by_code_point(name: str, code: int) -> None:
    found = unsafe_character(name)
    assert found is not None and ord(found) == code
    with pytest.raises(ValueError, match=f"U\\+{code:04X}"):
        check_name(name)


@pytest.mark.parametrize("name", ALLOWED)
def test_ordinary_names_in_any_script_pass(name: str) -> None:
    assert unsafe_character(name) is None
    assert check_name(name) == name


def test_escaping_leaves_one_line_and_no_terminal_command() -> None:
    text = "a\nb\rc\td\x1b[2Je\x00f\x7fg\x9bh\u202ei\u2028j ok é ジ"
    escaped = escape_controls(text)
    assert escaped == "a\\nb\\rc\\td\\x1b[2Je\\x00f\\x7fg\\x9bh\\u202ei\\u2028j ok é ジ"
    assert unsafe_character(escaped) is None
